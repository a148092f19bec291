/* SPDX-License-Identifier: MIT */
/* One optimizer update from several micro-batches: the loss is normalised
 * by the selected-token count of the WHOLE update (not averaged per
 * micro-batch), non-finite losses/norms are caught before the weights are
 * touched, the global norm is clipped in fp32, then the optimizer with the
 * scheduled learning rate (esmt_model_optimizer_step). */
#ifndef ESMTRAIN_TRAINER_UPDATE_H
#define ESMTRAIN_TRAINER_UPDATE_H

#include "dp_group.h"
#include "model.h"

typedef struct esmt_micro_batch {
  int B, T;
  int32_t *tokens, *labels;  /* [B*T] host arrays */
  uint64_t selected, real_tokens;
  /* packed rows (esmt_batch.num_segments): nseg 0 = right-padded */
  int nseg, seg_cap;
  int32_t *seg_start, *seg_len;
  /* a sequence head's targets (esmt_batch.targets; trainer_targets.c): n_targets 0 = none */
  float *targets;
  size_t n_targets, targets_cap;
  /* a seq-class head's class weights (esmt_batch.class_weights, NULL: none)
   * and the sum of its scored rows' weights, the loss's normaliser */
  const float *class_weights;
  double weight_sum;
} esmt_micro_batch;

typedef enum esmt_nonfinite_policy { ESMT_NONFINITE_SKIP = 0, ESMT_NONFINITE_ABORT = 1 } esmt_nonfinite_policy;

typedef struct esmt_update_params {
  esmt_optimizer_config optimizer;
  esmt_schedule schedule;    /* the learning rate: peak_lr, shaped per update */
  double grad_clip;          /* max global norm; 0 = off */
  esmt_nonfinite_policy nonfinite;
  double loss_scale;         /* the loss is multiplied by this before backward; 1 = off */
  int scaling;               /* 1: a non-finite gradient is a loss-scale overflow */
  esmt_dp *dp;               /* data parallel group, or NULL */
} esmt_update_params;

typedef struct esmt_update_result {
  double loss;               /* summed CE / selected of the update (all ranks) */
  double grad_norm;          /* before clipping, of the unscaled gradients */
  double lr;
  uint64_t selected, real_tokens; /* of the whole update, all ranks */
  int skipped;               /* 1 when the update was skipped (non-finite) */
  int overflow;              /* skipped for a loss-scale overflow (scaling on, loss finite) */
  char skip_reason[96];
  double t_forward, t_backward, t_optimizer; /* seconds */
} esmt_update_result;

/* Count selected and real tokens of a micro-batch on the host. */
ESMT_HIDDEN void esmt_micro_batch_count(esmt_micro_batch *mb);

/* Run update number `step` (1-based, drives the schedule); `adam_step` is
 * the 1-based count of updates actually applied (AdamW bias correction).
 * With the skip policy a non-finite loss or norm leaves the weights and
 * moments untouched and sets r->skipped; with abort it returns
 * ESMT_ERR_NUMERIC. Gradients are zeroed on entry. */
ESMT_HIDDEN esmt_status esmt_run_update(esmt_model *m, const esmt_micro_batch *mbs, int n,
                                        const esmt_update_params *p, int64_t step,
                                        int64_t adam_step, esmt_update_result *r);

/* Test hook (numerics fault injection): when > 0, updates number
 * inject_nan_step .. inject_nan_step + inject_nan_count - 1 (count 0 counts
 * as 1) get a NaN, or +Inf when inject_inf is set, written into their
 * gradients after backward. */
ESMT_HIDDEN extern int64_t esmt_test_inject_nan_step;
ESMT_HIDDEN extern int64_t esmt_test_inject_nan_count;
ESMT_HIDDEN extern int esmt_test_inject_inf;

#endif
