/* SPDX-License-Identifier: MIT */
/* The expected time of a plan: the device's compute per update and what
 * the host link and the host's own passes add to it, from rates the
 * caller measured (the GEMM ceiling, the link's copy bandwidth, the host's
 * memory bandwidth). */
#ifndef ESMTRAIN_PLAN_TIME_H
#define ESMTRAIN_PLAN_TIME_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

typedef struct esmt_plan_rates {
  double flops;          /* device FLOP/s on the model's GEMMs; 0: unknown */
  double link;           /* host link bytes/s (the slower direction); 0: unknown */
  double host;           /* host memory bytes/s for its sums and the optimizer; 0: not counted */
  uint64_t tokens;       /* tokens per update; 0: one micro-batch */
} esmt_plan_rates;

/* What one policy and micro-batch cost per update. */
typedef struct esmt_plan_time {
  int micro_batches;     /* per update */
  double compute;        /* seconds of device compute (recompute included) */
  double link;           /* seconds the host link is busy */
  double exposed;        /* seconds added to compute: transfers and host passes not hidden */
} esmt_plan_time;

/* The shape of the policy being timed. */
typedef struct esmt_plan_shape {
  const esmt_model_config *model;
  int micro_batch, seq_len, esize;
  int offload, recompute, stream;
  uint64_t params, layer_params; /* all parameters; one encoder layer's */
} esmt_plan_shape;

/* 0 when the rates cannot time it (no device or link rate). */
ESMT_HIDDEN int esmt_plan_time_of(const esmt_plan_shape *s, const esmt_plan_rates *r,
                                  esmt_plan_time *t);

#endif
