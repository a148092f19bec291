/* SPDX-License-Identifier: MIT */
/* A fine-tuned checkpoint's own names (checkpoint_task.h):
 *   "task": {"version": 1, "label_names": ["cytoplasm", "membrane", "nucleus"]} */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "checkpoint_task.h"
#include "model_record.h"

esmt_status esmt_checkpoint_task_add(const esmt_model *m, json_t *root) {
  if (m->n_label_names == 0) return ESMT_OK;
  json_t *names = json_array();
  for (int i = 0; names && i < m->n_label_names; i++)
    if (json_array_append_new(names, json_string(m->label_names[i]))) {
      json_decref(names);
      names = NULL;
    }
  json_t *task = names ? json_pack("{s:i,s:o}", "version", ESMT_CKPT_TASK_VERSION, "label_names",
                                   names) : NULL;
  if (!task || json_object_set_new(root, "task", task))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "saving checkpoint: the task record: out of memory");
  return ESMT_OK;
}

esmt_status esmt_checkpoint_task_check(json_t *root, const char *path, const esmt_model *m) {
  json_t *task = json_object_get(root, "task");
  if (task) {
    json_t *ver = json_object_get(task, "version"), *names = json_object_get(task, "label_names");
    if (!json_is_integer(ver) || json_integer_value(ver) < 1)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: task.version is not a version number: the file "
                       "is damaged", path);
    if (json_integer_value(ver) > ESMT_CKPT_TASK_VERSION)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: task record version %lld, this library reads up "
                       "to %d", path, (long long)json_integer_value(ver), ESMT_CKPT_TASK_VERSION);
    for (size_t i = 0; i < json_array_size(names); i++)
      if (!json_is_string(json_array_get(names, i)) || !*json_string_value(json_array_get(names, i)))
        return esmt_fail(ESMT_ERR_FORMAT, "%s: task.label_names[%zu] is not a name", path, i);
  }
  json_t *model = json_object_get(json_object_get(root, "trainer"), "model");
  if (!json_object_get(model, "head") && !json_object_get(model, "lora"))
    return ESMT_OK; /* a plain model's, or one from before the record */
  esmt_model_config saved = ESMT_MODEL_CONFIG_INIT;
  esmt_status st = esmt_model_record_read(model, path, &saved);
  if (st) return st;
  const esmt_model_config *c = &m->cfg;
  if (saved.head != c->head || saved.num_labels != c->num_labels)
    return esmt_fail(ESMT_ERR_STATE, "%s: the checkpoint's head is %s with %d outputs, this "
                     "model's is %s with %d", path, esmt_head_kind_name(saved.head),
                     saved.num_labels, esmt_head_kind_name(c->head), c->num_labels);
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
