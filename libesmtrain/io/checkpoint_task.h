/* SPDX-License-Identifier: MIT */
/* A fine-tuned checkpoint's own names (docs/formats.md, state.json
 * "task"): the names of the task head's outputs, beside the head and LoRA
 * that "trainer"."model" records (model_record.h), and the check that a
 * checkpoint is loaded into a model of its own head. */
#ifndef ESMTRAIN_CHECKPOINT_TASK_H
#define ESMTRAIN_CHECKPOINT_TASK_H

#include <jansson.h>

#include "model.h"

/* The record's own version: a reader refuses a newer one. */
#define ESMT_CKPT_TASK_VERSION 1

/* Add root["task"] = {"version", "label_names"} when the model names its
 * outputs; nothing otherwise. */
ESMT_HIDDEN esmt_status esmt_checkpoint_task_add(const esmt_model *m, json_t *root);

/* Before the model is touched: root["task"] well formed, and the head and
 * LoRA adapters "trainer"."model" records (when it records any) the
 * model's own, else an error naming both. `path` names state.json. */
ESMT_HIDDEN esmt_status esmt_checkpoint_task_check(json_t *root, const char *path,
                                                   const esmt_model *m);

/* Give the model the record's label names (when present and as many as
 * its outputs). */
ESMT_HIDDEN esmt_status esmt_checkpoint_task_restore_names(esmt_model *m, json_t *root);

#endif
