/* The optimizer module: everything that knows what an optimizer keeps and
 * does, so that adding one touches this module and the backends' kernels,
 * not the model, offload, ZeRO, checkpoints, planner and trainer.
 *  - its state: how many fp32 buffers per parameter (AdamW: m and v), their
 *    names in optimizer.safetensors ("m.", "v." + the HF tensor name);
 *  - its memory: bytes of state per parameter (the planner's "moments");
 *  - its step: the per-tensor weight-decay segments and the backend op
 *    (esmt_model_optimizer_step, public; optimizer.c);
 *  - its name in logs, state.json and the configuration (optimizer.kind). */
#ifndef ESMTRAIN_OPTIMIZER_H
#define ESMTRAIN_OPTIMIZER_H

#include "internal.h"

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

#endif
