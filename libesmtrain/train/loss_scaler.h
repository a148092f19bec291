/* SPDX-License-Identifier: MIT */
/* Dynamic loss scaling for fp16 training. The loss (and so every gradient)
 * is multiplied by `scale` before backward, so that small fp16 gradients do
 * not flush to zero; the optimizer divides it out again. A non-finite
 * gradient is an overflow: the update is skipped, and after `hysteresis`
 * overflows without a clean update in between the scale is multiplied by
 * `backoff`. After `growth_interval` clean updates in a row it doubles.
 * When an overflow would take it below `min` the run cannot make progress:
 * the caller saves a checkpoint and stops with diagnostics. The policy is
 * backend-agnostic core logic; with fp32 it is exact for power-of-two
 * scales, which is how CI tests it on the CPU backend. */
#ifndef ESMTRAIN_LOSS_SCALER_H
#define ESMTRAIN_LOSS_SCALER_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

typedef struct esmt_loss_scaler {
  int enabled;
  double scale;              /* current; 1 when disabled */
  double backoff, min;
  int64_t growth_interval;
  int hysteresis;
  /* state (checkpointed) */
  int64_t clean_run;         /* clean updates since the last overflow or growth */
  int hysteresis_left;       /* overflows still tolerated at this scale */
  int64_t overflows;         /* total overflow-skipped updates */
  int64_t consecutive;       /* overflows since the last clean update */
} esmt_loss_scaler;

typedef enum esmt_scaler_event {
  ESMT_SCALER_CLEAN = 0,     /* update applied */
  ESMT_SCALER_GREW,          /* applied, and the scale doubled */
  ESMT_SCALER_SKIPPED,       /* overflow tolerated (hysteresis), scale kept */
  ESMT_SCALER_BACKED_OFF,    /* overflow, scale reduced */
  ESMT_SCALER_AT_FLOOR       /* overflow with nowhere lower to go: stop */
} esmt_scaler_event;

/* From the trainer options; checks the values (ESMT_ERR_INVALID_ARGUMENT). */
ESMT_HIDDEN esmt_status esmt_loss_scaler_init(esmt_loss_scaler *s,
                                              const esmt_loss_scale_config *cfg);

/* Record the outcome of one update (overflow = a non-finite gradient). */
ESMT_HIDDEN esmt_scaler_event esmt_loss_scaler_update(esmt_loss_scaler *s, int overflow);

#endif
