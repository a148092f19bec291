/* SPDX-License-Identifier: MIT */
/* What a fine-tuning trainer owns besides its model (trainer_finetune.h). */
#include <stdlib.h>

#include "trainer_finetune.h"

void esmt_finetune_owned_free(struct esmt_finetune_owned *o) {
  if (!o) return;
  esmt_labelled_loader_destroy(o->train);
  esmt_labelled_loader_destroy(o->valid);
  esmt_labelled_free(o->data);
  free(o);
}

const esmt_labelled *esmt_finetune_owned_data(const struct esmt_finetune_owned *o) {
  return o ? o->data : NULL;
}
