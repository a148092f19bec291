/* SPDX-License-Identifier: MIT */
/* A sequence head's targets in the trainer's micro-batch copies: kept
 * with the tokens for the update, and counted as the positions the loss
 * is normalised over (the scored rows of a class head, every value of a
 * multi-label or regression head), as esmt_model_forward counts them. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_finetune.h"

esmt_status esmt_micro_batch_take_targets(esmt_micro_batch *mb, const esmt_model *m,
                                          const esmt_batch *b) {
  const int head = m->cfg.head;
  const int sequence_head = head == ESMT_HEAD_SEQ_CLASS || head == ESMT_HEAD_MULTILABEL ||
                            head == ESMT_HEAD_REGRESSION;
  const int has = b->struct_size > offsetof(esmt_batch, targets) && b->targets;
  mb->n_targets = 0;
  mb->class_weights = NULL;
  if (!sequence_head || !has) return ESMT_OK;
  if (head == ESMT_HEAD_SEQ_CLASS && b->struct_size > offsetof(esmt_batch, class_weights))
    mb->class_weights = b->class_weights;
  const size_t per_row = head == ESMT_HEAD_SEQ_CLASS ? 1 : (size_t)m->cfg.num_labels;
  const size_t n = (size_t)b->batch * per_row;
  if (n > mb->targets_cap) {
    float *p = realloc(mb->targets, n * sizeof *p);
    if (!p) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "trainer: out of memory for targets");
    mb->targets = p;
    mb->targets_cap = n;
  }
  memcpy(mb->targets, b->targets, n * sizeof *mb->targets);
  mb->n_targets = n;
  uint64_t scored = 0;
  double weights = 0.0;
  for (size_t i = 0; i < n; i++) {
    const int counted = head != ESMT_HEAD_SEQ_CLASS || mb->targets[i] != (float)ESMT_LABEL_IGNORE;
    scored += counted;
    const int y = (int)mb->targets[i];
    if (counted && mb->class_weights && y >= 0 && y < m->cfg.num_labels)
      weights += mb->class_weights[y];
  }
  mb->selected = scored;
  mb->weight_sum = weights;
  return ESMT_OK;
}
