/* SPDX-License-Identifier: MIT */
/* The task record of a checkpoint's state.json ("task", docs/formats.md):
 * what a fine-tuned model is beyond its shape (the head, its outputs'
 * names, pooling, frozen layers, LoRA), so that the checkpoint alone
 * reopens it. A plain pre-training model has none, and a checkpoint
 * without one loads as a plain model, as before the record existed. */
#ifndef ESMTRAIN_CHECKPOINT_TASK_H
#define ESMTRAIN_CHECKPOINT_TASK_H

#include <jansson.h>

#include "model.h"

/* The record's own version: a reader refuses a newer one. */
#define ESMT_CKPT_TASK_VERSION 1

/* Add root["task"] for a model with a head, LoRA, frozen layers or label
 * names; nothing for a plain model. */
ESMT_HIDDEN esmt_status esmt_checkpoint_task_add(const esmt_model *m, json_t *root);

/* Apply root["task"] (when present) to *cfg: head, num_labels, pooling,
 * frozen_layers and LoRA. `path` (state.json) names the file in errors. */
ESMT_HIDDEN esmt_status esmt_checkpoint_task_config(json_t *root, const char *path,
                                                    esmt_model_config *cfg);

/* Check root["task"] (when present) against the model it is loaded into:
 * the same head, outputs and LoRA adapters, else an error naming both. */
ESMT_HIDDEN esmt_status esmt_checkpoint_task_check(json_t *root, const char *path,
                                                   const esmt_model *m);

/* Give the model the record's label names (when present and as many as
 * its outputs). */
ESMT_HIDDEN esmt_status esmt_checkpoint_task_restore_names(esmt_model *m, json_t *root);

#endif
