/* SPDX-License-Identifier: MIT */
/* The optimizer module: everything that knows what an optimizer keeps and
 * does, so that adding one touches this module and the backends' kernels,
 * not the model, offload, ZeRO, checkpoints, planner and trainer.
 *  - its state: how many fp32 buffers per parameter (AdamW: m and v), their
 *    names in optimizer.safetensors ("m.", "v." + the HF tensor name);
 *  - its memory: bytes of state per parameter (the planner's "moments");
 *  - its step: the per-tensor weight-decay segments and the hyper-parameters
 *    of one update (esmt_optim_step, below), which the parameter memory's
 *    layer runs where the buffers live (memory/param_layer.h) and the public
 *    esmt_model_optimizer_step (model/model_optimizer.c) drives;
 *  - its name in logs, state.json and the configuration (optimizer.kind). */
#ifndef ESMTRAIN_OPTIMIZER_H
#define ESMTRAIN_OPTIMIZER_H

#include <stddef.h>

#include "esmtrain/esmtrain.h"
#include "esmtrain/backend.h"
#include "internal.h"

/* The oldest esmt_optimizer_config a caller may pass: the one before
 * head_lr_scale was appended (that caller gets 1). */
#define ESMT_OPTIMIZER_CONFIG_MIN_SIZE offsetof(esmt_optimizer_config, head_lr_scale)

/* Whether a caller's esmt_optimizer_config of struct_size holds `field`. */
#define ESMT_OPTIMIZER_CONFIG_HAS(c, field)                                                 \
  ((c)->struct_size >= offsetof(esmt_optimizer_config, field) + sizeof (c)->field)

/* Most state buffers any optimizer keeps (AdamW's two moments). */
#define ESMT_OPTIMIZER_MAX_STATE 2

/* The kind's name ("adamw"), or NULL for an unknown kind. */
ESMT_HIDDEN const char *esmt_optimizer_name(esmt_optimizer_kind kind);

/* The kind a name denotes; ESMT_ERR_CONFIG naming the known ones if none. */
ESMT_HIDDEN esmt_status esmt_optimizer_from_name(const char *name, esmt_optimizer_kind *kind);

/* fp32 state buffers per parameter (AdamW 2), 0 for an unknown kind. */
ESMT_HIDDEN int esmt_optimizer_state_count(esmt_optimizer_kind kind);

/* The tensor-name prefix of state buffer i in optimizer.safetensors. */
ESMT_HIDDEN const char *esmt_optimizer_state_prefix(esmt_optimizer_kind kind, int i);

/* Bytes of optimizer state for `params` parameters. */
ESMT_HIDDEN uint64_t esmt_optimizer_state_bytes(esmt_optimizer_kind kind, uint64_t params);

/* Check a configuration's kind and values; messages start with `fn`. */
ESMT_HIDDEN esmt_status esmt_optimizer_config_check(const esmt_optimizer_config *cfg,
                                                    const char *fn);

/* One update, whatever the kind: the backend op's arguments with every
 * hyper-parameter and segment filled in and the buffer pointers (params,
 * grads, moments, params_lowp) left for the parameter memory's layer to
 * fill where the buffers live. Exactly one of the two is used, by `kind`. */
typedef struct esmt_optim_step {
  esmt_optimizer_kind kind;
  esmtb_adamw_args adamw;
  esmtb_lion_args lion;
  esmtb_segment *segments; /* owned: esmt_optim_step_free */
} esmt_optim_step;

/* Check the update's arguments (messages start with `fn`) and build *s:
 * the weight-decay segments of the tensors' elements within [lo, hi) (the
 * part whose moments are held), offsets relative to lo. */
ESMT_HIDDEN esmt_status esmt_optim_step_build(const esmt_optimizer_config *cfg,
                                              const esmt_tensor_info *tensors, int count,
                                              uint64_t lo, uint64_t hi, double lr,
                                              double grad_scale, int64_t step, const char *fn,
                                              esmt_optim_step *s);
ESMT_HIDDEN void esmt_optim_step_free(esmt_optim_step *s);

#endif
