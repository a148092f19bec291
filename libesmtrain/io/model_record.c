/* SPDX-License-Identifier: MIT */
/* The task head and LoRA fields of a checkpoint's "model" record
 * (model_record.h). */
#include <string.h>

#include "model_record.h"

const char *esmt_head_kind_name(esmt_head_kind head) {
  const char *name = esmt_head_name(head); /* model_labels.c */
  return name ? name : "unknown";
}

esmt_status esmt_model_record_add(const esmt_model_config *c, json_t *model) {
  int bad = 0;
  if (c->head != ESMT_HEAD_NONE) {
    bad |= json_object_set_new(model, "head", json_string(esmt_head_kind_name(c->head)));
    bad |= json_object_set_new(model, "num_labels", json_integer(c->num_labels));
    bad |= json_object_set_new(model, "pooling",
                               json_string(c->pooling == ESMT_POOL_MEAN ? "mean" : "cls"));
  }
  if (c->frozen_layers)
    bad |= json_object_set_new(model, "frozen_layers", json_integer(c->frozen_layers));
  if (c->lora_rank > 0)
    bad |= json_object_set_new(model, "lora",
                               json_pack("{s:i,s:f,s:f,s:i}", "rank", c->lora_rank, "alpha",
                                         (double)c->lora_alpha, "dropout",
                                         (double)c->lora_dropout, "targets",
                                         (int)c->lora_targets));
  return bad ? esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "checkpoint state: out of memory") : ESMT_OK;
}

static esmt_status field_int(json_t *o, const char *key, const char *path, int lo, int hi,
                             int *out) {
  json_t *v = json_object_get(o, key);
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: model.%s is missing or outside %d..%d: the file is "
                     "damaged", path, key, lo, hi);
  *out = (int)json_integer_value(v);
  return ESMT_OK;
}

esmt_status esmt_model_record_read(json_t *model, const char *path, esmt_model_config *c) {
  esmt_status st = ESMT_OK;
  json_t *head = json_object_get(model, "head");
  if (head) {
    const char *name = json_string_value(head);
    const int k = esmt_head_from_name(name);
    if (k <= ESMT_HEAD_NONE)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: model.head is not one of seq-class, multilabel, "
                       "regression, residue-class", path);
    c->head = (esmt_head_kind)k;
    st = field_int(model, "num_labels", path, 1, 1 << 20, &c->num_labels);
    const char *pool = json_string_value(json_object_get(model, "pooling"));
    if (!st && pool && strcmp(pool, "cls") && strcmp(pool, "mean"))
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: model.pooling '%s' is neither cls nor mean", path, pool);
    c->pooling = pool && !strcmp(pool, "mean") ? ESMT_POOL_MEAN : ESMT_POOL_CLS;
  }
  if (!st && json_object_get(model, "frozen_layers"))
    st = field_int(model, "frozen_layers", path, ESMT_FREEZE_ENCODER, 1 << 20, &c->frozen_layers);
  json_t *lora = json_object_get(model, "lora");
  if (!st && lora) {
    int targets = 0;
    st = field_int(lora, "rank", path, 1, 1 << 16, &c->lora_rank);
    if (!st) st = field_int(lora, "targets", path, 1, 63, &targets);
    json_t *alpha = json_object_get(lora, "alpha"), *drop = json_object_get(lora, "dropout");
    if (!st && (!json_is_number(alpha) || (drop && !json_is_number(drop))))
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: model.lora.alpha or .dropout is not a number", path);
    if (!st) {
      c->lora_targets = (unsigned)targets;
      c->lora_alpha = (float)json_number_value(alpha);
      c->lora_dropout = drop ? (float)json_number_value(drop) : 0.0f;
    }
  }
  return st;
}
