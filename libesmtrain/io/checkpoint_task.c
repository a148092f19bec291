/* SPDX-License-Identifier: MIT */
/* The task record of a checkpoint (checkpoint_task.h):
 *   "task": {"version": 1, "head": "seq-class", "num_labels": 3,
 *            "pooling": "mean", "frozen_layers": 0,
 *            "lora": {"rank": 8, "alpha": 16, "dropout": 0.1, "targets": 5},
 *            "label_names": ["cytoplasm", "membrane", "nucleus"]}
 * "lora" only with adapters (targets: the ESMT_LORA_* bits), "label_names"
 * only when the model has them. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "checkpoint_task.h"

static int has_task(const esmt_model *m) {
  return m->cfg.head != ESMT_HEAD_NONE || m->cfg.lora_rank > 0 || m->cfg.frozen_layers != 0 ||
         m->n_label_names > 0;
}

esmt_status esmt_checkpoint_task_add(const esmt_model *m, json_t *root) {
  if (!has_task(m)) return ESMT_OK;
  const esmt_model_config *c = &m->cfg;
  json_t *task = json_pack("{s:i,s:s,s:i,s:s,s:i}", "version", ESMT_CKPT_TASK_VERSION, "head",
                           esmt_head_name(c->head), "num_labels", c->num_labels, "pooling",
                           c->pooling == ESMT_POOL_MEAN ? "mean" : "cls", "frozen_layers",
                           c->frozen_layers);
  if (task && c->lora_rank > 0)
    json_object_set_new(task, "lora",
                        json_pack("{s:i,s:f,s:f,s:I}", "rank", c->lora_rank, "alpha",
                                  (double)c->lora_alpha, "dropout", (double)c->lora_dropout,
                                  "targets", (json_int_t)c->lora_targets));
  if (task && m->n_label_names > 0) {
    json_t *names = json_array();
    for (int i = 0; names && i < m->n_label_names; i++)
      json_array_append_new(names, json_string(m->label_names[i]));
    json_object_set_new(task, "label_names", names);
  }
  if (!task || json_object_set_new(root, "task", task))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "saving checkpoint: the task record: out of memory");
  return ESMT_OK;
}

static esmt_status bad(const char *path, const char *what) {
  return esmt_fail(ESMT_ERR_FORMAT, "%s: task.%s: the file is damaged or from a newer esmtrain",
                   path, what);
}

/* The record as a model configuration over *cfg's shape. */
static esmt_status parse(json_t *task, const char *path, esmt_model_config *cfg) {
  json_t *ver = json_object_get(task, "version");
  if (!json_is_integer(ver) || json_integer_value(ver) < 1)
    return bad(path, "version is not a version number");
  if (json_integer_value(ver) > ESMT_CKPT_TASK_VERSION)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: task record version %lld, this library reads up to "
                     "%d", path, (long long)json_integer_value(ver), ESMT_CKPT_TASK_VERSION);
  const int head = esmt_head_from_name(json_string_value(json_object_get(task, "head")));
  json_t *labels = json_object_get(task, "num_labels");
  json_t *frozen = json_object_get(task, "frozen_layers");
  const char *pool = json_string_value(json_object_get(task, "pooling"));
  if (head < 0) return bad(path, "head is none of none, seq-class, multilabel, regression, "
                           "residue-class");
  if (!json_is_integer(labels) || json_integer_value(labels) < 0 ||
      json_integer_value(labels) > (1 << 20))
    return bad(path, "num_labels is not a count");
  if (!pool || (strcmp(pool, "mean") && strcmp(pool, "cls"))) return bad(path, "pooling");
  if (!json_is_integer(frozen) || json_integer_value(frozen) < ESMT_FREEZE_ENCODER ||
      json_integer_value(frozen) > (1 << 20))
    return bad(path, "frozen_layers");
  cfg->head = (esmt_head_kind)head;
  cfg->num_labels = (int)json_integer_value(labels);
  cfg->pooling = strcmp(pool, "mean") ? ESMT_POOL_CLS : ESMT_POOL_MEAN;
  cfg->frozen_layers = (int)json_integer_value(frozen);
  cfg->lora_rank = 0;
  cfg->lora_alpha = 0.0f;
  cfg->lora_dropout = 0.0f;
  cfg->lora_targets = 0;
  json_t *lora = json_object_get(task, "lora");
  if (!lora) return ESMT_OK;
  json_t *rank = json_object_get(lora, "rank"), *alpha = json_object_get(lora, "alpha");
  json_t *drop = json_object_get(lora, "dropout"), *targets = json_object_get(lora, "targets");
  if (!json_is_integer(rank) || json_integer_value(rank) < 1 ||
      json_integer_value(rank) > (1 << 20) || !json_is_number(alpha) || !json_is_number(drop) ||
      !json_is_integer(targets) || json_integer_value(targets) < 1 ||
      json_integer_value(targets) > 63)
    return bad(path, "lora (rank, alpha, dropout, targets)");
  cfg->lora_rank = (int)json_integer_value(rank);
  cfg->lora_alpha = (float)json_number_value(alpha);
  cfg->lora_dropout = (float)json_number_value(drop);
  cfg->lora_targets = (unsigned)json_integer_value(targets);
  return ESMT_OK;
}

esmt_status esmt_checkpoint_task_config(json_t *root, const char *path, esmt_model_config *cfg) {
  json_t *task = json_object_get(root, "task");
  return task ? parse(task, path, cfg) : ESMT_OK;
}

esmt_status esmt_checkpoint_task_check(json_t *root, const char *path, const esmt_model *m) {
  json_t *task = json_object_get(root, "task");
  if (!task) return ESMT_OK;
  esmt_model_config saved = m->cfg;
  esmt_status st = parse(task, path, &saved);
  if (st) return st;
  const esmt_model_config *c = &m->cfg;
  if (saved.head != c->head || saved.num_labels != c->num_labels)
    return esmt_fail(ESMT_ERR_STATE, "%s: the checkpoint's head is %s with %d outputs, this "
                     "model's is %s with %d", path, esmt_head_name(saved.head), saved.num_labels,
                     esmt_head_name(c->head), c->num_labels);
  if (saved.lora_rank != c->lora_rank || (c->lora_rank && saved.lora_targets != c->lora_targets))
    return esmt_fail(ESMT_ERR_STATE, "%s: the checkpoint's LoRA adapters are rank %d on targets "
                     "0x%x, this model's rank %d on 0x%x", path, saved.lora_rank,
                     saved.lora_targets, c->lora_rank, c->lora_targets);
  return ESMT_OK;
}

esmt_status esmt_checkpoint_task_restore_names(esmt_model *m, json_t *root) {
  json_t *names = json_object_get(json_object_get(root, "task"), "label_names");
  const int n = json_is_array(names) ? (int)json_array_size(names) : 0;
  if (n == 0 || n != m->cfg.num_labels) return ESMT_OK;
  const char **v = calloc((size_t)n, sizeof *v);
  if (!v) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "loading checkpoint: out of memory");
  for (int i = 0; i < n; i++) v[i] = json_string_value(json_array_get(names, i));
  esmt_status st = esmt_model_set_label_names(m, v, n);
  free(v);
  return st;
}
