/* SPDX-License-Identifier: MIT */
/* See trainer_update.h. */
#define _POSIX_C_SOURCE 200809L
#include "trainer_update.h"

#include "param_layer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


void esmt_micro_batch_count(esmt_micro_batch *mb) {
  uint64_t sel = 0, real = 0, n = (uint64_t)mb->B * (uint64_t)mb->T;
  for (uint64_t i = 0; i < n; i++) {
    real += mb->tokens[i] != ESMT_TOKEN_PAD;
    sel += mb->labels && mb->labels[i] != ESMT_LABEL_IGNORE;
  }
  mb->selected = sel;
  mb->real_tokens = real;
}

int64_t esmt_test_inject_nan_step;
int64_t esmt_test_inject_nan_count;
int esmt_test_inject_inf;

static int inject_here(int64_t step) {
  int64_t first = esmt_test_inject_nan_step;
  int64_t count = esmt_test_inject_nan_count > 0 ? esmt_test_inject_nan_count : 1;
  return first > 0 && step >= first && step < first + count;
}

esmt_status esmt_run_update(esmt_model *m, const esmt_micro_batch *mbs, int n,
                            const esmt_update_params *p, int64_t step, int64_t adam_step,
                            esmt_update_result *r) {
  memset(r, 0, sizeof *r);
  const double S = p->loss_scale > 0 ? p->loss_scale : 1.0;
  /* The update's counts over every rank: each rank divides its loss by
   * the global number of selected tokens, so the summed gradients are
   * those of one big batch. */
  uint64_t counts[2] = {0, 0};
  for (int i = 0; i < n; i++) {
    counts[0] += mbs[i].selected;
    counts[1] += mbs[i].real_tokens;
  }
  esmt_dp_set_step(p->dp, step);
  esmt_status st = esmt_dp_sum_u64(p->dp, counts, 2);
  if (st) return st;
  const uint64_t selected = counts[0];
  /* class weights: the loss is divided by the scored rows' weights, as
   * CrossEntropyLoss(weight=w) divides it (fine-tuning runs in one process) */
  double weight_sum = 0.0;
  int weighted = 0;
  for (int i = 0; i < n; i++) {
    weight_sum += mbs[i].weight_sum;
    weighted |= mbs[i].class_weights != NULL;
  }
  r->selected = selected;
  r->real_tokens = counts[1];
  if ((st = esmt_model_zero_grad(m))) return st;
  /* a head warm-up's update: the encoder is not stepped, so its backward
   * is not run either (its gradients stay zero, out of the norm) */
  esmt_model_hold_encoder(m, adam_step <= p->optimizer.head_only_steps);
  double loss_sum = 0;
  for (int i = 0; i < n; i++) {
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = mbs[i].B;
    b.seq_len = mbs[i].T;
    b.tokens = mbs[i].tokens;
    b.labels = mbs[i].labels;
    b.targets = mbs[i].n_targets ? mbs[i].targets : NULL;
    b.num_segments = mbs[i].nseg;
    b.seg_start = mbs[i].seg_start;
    b.seg_len = mbs[i].seg_len;
    /* The whole update's count: k micro-batches equal one big batch. The
     * loss scale rides on the normaliser: gradients come out scale times
     * larger and the optimizer's grad_scale divides it out. */
    b.loss_normalizer = (selected ? (double)selected : 1.0) / S;
    b.class_weights = mbs[i].class_weights;
    if (weighted) b.loss_normalizer = (weight_sum > 0.0 ? weight_sum : 1.0) / S;
    esmt_forward_result fr = ESMT_FORWARD_RESULT_INIT;
    double t0 = esmt_now_s();
    if ((st = esmt_model_forward(m, &b, &fr, NULL))) return st;
    double t1 = esmt_now_s();
    /* the last backward of the update overlaps the gradient all-reduce
     * (under ZeRO-2 every backward overlaps its reduce-scatter) */
    const int last = i == n - 1, reduce = last || esmt_dp_zero_each_backward(p->dp);
    if (reduce && (st = esmt_dp_grads_arm(p->dp, m))) return st;
    /* ... and, with optimizer offload, the gradient copy to the host (not
     * with data parallelism: the all-reduce must finish first, and the
     * host then pulls the reduced gradients in one copy) */
    const esmt_param_layer *pl = m->mem.layer;
    if (last && !p->dp && (st = pl->arm(&m->mem))) return st;
    st = esmt_model_backward(m);
    if (reduce) {
      if (st) {
        esmt_dp_grads_cancel(p->dp, m);
        if (last) pl->cancel(&m->mem);
      } else {
        st = esmt_dp_grads_finish(p->dp, m);
        if (last && !st) st = pl->finish(&m->mem);
        else if (last) pl->cancel(&m->mem);
        /* ZeRO-2: the next backward adds onto this shard's sums only */
        if (!last && !st) st = esmt_dp_zero_keep_shard(p->dp, m);
      }
    }
    if (st) return st;
    r->t_forward += t1 - t0;
    r->t_backward += esmt_now_s() - t1;
    loss_sum += fr.loss_sum;
  }
  if ((st = esmt_dp_sum_f64(p->dp, &loss_sum, 1))) return st;
  r->loss = weighted ? (weight_sum > 0.0 ? loss_sum / weight_sum : 0.0)
                     : selected ? loss_sum / (double)selected : 0.0;
  if (inject_here(step)) {
    float nan = esmt_test_inject_inf ? __builtin_inff() : __builtin_nanf("");
    /* through the parameter memory: the gradients may live on the host;
     * under ZeRO-2's sharded gradients only the owner holds the element */
    const uint64_t at = m->layout.total / 2;
    if (at >= m->mem.grads_lo && at < m->mem.grads_hi)
      st = esmt_master_copy(m, &nan, m->mem.grads + (at - m->mem.grads_lo), sizeof nan, 1);
    if (st) return esmt_fail_prefix(st, "test hook: ");
    m->mem.layer->grads_changed(&m->mem); /* the offload's host copy must see it too */
  }
  double t2 = esmt_now_s();
  /* ZeRO: each rank holds final gradients for its shard only; the norm
   * (and with it every skip and overflow decision) is global */
  st = esmt_dp_zero(p->dp) ? esmt_dp_zero_grad_norm(p->dp, m, &r->grad_norm)
                           : esmt_model_grad_norm(m, &r->grad_norm);
  if (st) return st;
  r->grad_norm /= S;
  if (p->scaling && isfinite(r->loss) && !isfinite(r->grad_norm)) {
    /* Overflow: the scaler (the caller) backs off; no policy applies. */
    snprintf(r->skip_reason, sizeof r->skip_reason, "gradient overflow at loss scale %g", S);
    r->skipped = r->overflow = 1;
    esmt_model_zero_grad(m);
    r->t_optimizer = esmt_now_s() - t2;
    return ESMT_OK;
  }
  if (!isfinite(r->loss) || !isfinite(r->grad_norm)) {
    snprintf(r->skip_reason, sizeof r->skip_reason, "non-finite %s (loss %g, grad norm %g)",
             !isfinite(r->loss) ? "loss" : "gradient norm", r->loss, r->grad_norm);
    if (p->nonfinite == ESMT_NONFINITE_ABORT)
      return esmt_fail(ESMT_ERR_NUMERIC, "update %lld: %s; stopping (train.nonfinite = abort)",
                       (long long)step, r->skip_reason);
    r->skipped = 1;
    esmt_model_zero_grad(m);
    r->t_optimizer = esmt_now_s() - t2;
    return ESMT_OK;
  }
  if ((st = esmt_schedule_lr(&p->schedule, step, &r->lr))) return st;
  double grad_scale = 1.0 / S;
  if (p->grad_clip > 0 && r->grad_norm > p->grad_clip) grad_scale *= p->grad_clip / r->grad_norm;
  if ((st = esmt_model_optimizer_step(m, &p->optimizer, r->lr, grad_scale, adam_step))) return st;
  if (esmt_dp_zero(p->dp) && (st = esmt_dp_zero_gather_params(p->dp, m))) return st;
  r->t_optimizer = esmt_now_s() - t2;
  return ESMT_OK;
}
