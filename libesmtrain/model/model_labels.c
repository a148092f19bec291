/* SPDX-License-Identifier: MIT */
/* What a task model calls its outputs (finetune.h): the label names a
 * fine-tuning run takes from its table, kept on the model so that its
 * checkpoints carry them (io/checkpoint_task.c) and predictions name their
 * columns; and the names of the head kinds and poolings, as the finetune.*
 * keys, checkpoints and predictions spell them. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "model.h"

static const char *const k_head_names[] = {"none", "seq-class", "multilabel", "regression",
                                           "residue-class"};

const char *esmt_head_name(int head) {
  return head >= 0 && head < (int)(sizeof k_head_names / sizeof *k_head_names)
             ? k_head_names[head] : NULL;
}

int esmt_head_from_name(const char *name) {
  for (int k = 0; name && k < (int)(sizeof k_head_names / sizeof *k_head_names); k++)
    if (!strcmp(name, k_head_names[k])) return k;
  return -1;
}

esmt_status esmt_model_set_label_names(esmt_model *m, const char *const *names, int count) {
  const char *fn = "esmt_model_set_label_names";
  ESMT_CHECK_ARG(m, fn, "model is NULL");
  ESMT_CHECK_ARG(count == 0 || names, fn, "names is NULL");
  if (count != 0 && count != m->cfg.num_labels)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %d names for a head of %d outputs", fn,
                     count, m->cfg.num_labels);
  char **copy = count ? calloc((size_t)count, sizeof *copy) : NULL;
  esmt_status st = count && !copy ? esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn)
                                  : ESMT_OK;
  for (int i = 0; !st && i < count; i++) {
    if (!names[i] || !*names[i])
      st = esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: name %d is empty", fn, i);
    else if (!(copy[i] = strdup(names[i])))
      st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  if (st) {
    for (int i = 0; copy && i < count; i++) free(copy[i]);
    free(copy);
    return st;
  }
  for (int i = 0; i < m->n_label_names; i++) free(m->label_names[i]);
  free(m->label_names);
  m->label_names = copy;
  m->n_label_names = count;
  return ESMT_OK;
}

const char *esmt_model_label_name(const esmt_model *m, int index) {
  return m && index >= 0 && index < m->n_label_names ? m->label_names[index] : NULL;
}
