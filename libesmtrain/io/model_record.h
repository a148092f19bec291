/* SPDX-License-Identifier: MIT */
/* A checkpoint's record of what its model is beyond the encoder's shape
 * (model_record.c): the task head and the LoRA adapters, in state.json's
 * "model" object, so that a checkpoint of a fine-tuned model is re-created
 * (esmt_model_create_from_checkpoint, export) with the tensors it holds. */
#ifndef ESMTRAIN_MODEL_RECORD_H
#define ESMTRAIN_MODEL_RECORD_H

#include <jansson.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

/* Adds "head", "num_labels", "pooling", "frozen_layers" and "lora" to
 * `model` where the config has them (a pre-training model: nothing). */
ESMT_HIDDEN esmt_status esmt_model_record_add(const esmt_model_config *c, json_t *model);

/* Reads them back into *c (absent: the masked-LM model, nothing frozen, no
 * LoRA); `path` names state.json in messages. */
ESMT_HIDDEN esmt_status esmt_model_record_read(json_t *model, const char *path,
                                               esmt_model_config *c);

/* The head's name in files ("seq-class", "multilabel", "regression",
 * "residue-class"; "none"). */
ESMT_HIDDEN const char *esmt_head_kind_name(esmt_head_kind head);

#endif
