/* SPDX-License-Identifier: MIT */
/* The expected time of a plan (plan_time.h). Layers are timed as a
 * pipeline of stages: the device's compute, the copy stream (one stream:
 * its uploads and downloads follow each other) and the issuing thread's
 * host sums; a layer takes as long as its slowest stage, so a transfer
 * costs only what exceeds the compute it runs beside. The per-update work
 * of optimizer offload (the gradients down, the host step, the compute
 * weights up) runs beside nothing and is counted whole: an upper bound,
 * since the last backward already sends buckets down as it goes. */
#include "plan_time.h"

#include "optimizer.h"

static double max2(double a, double b) { return a > b ? a : b; }
static double max3(double a, double b, double c) { return max2(a, max2(b, c)); }

int esmt_plan_time_of(const esmt_plan_shape *s, const esmt_plan_rates *r, esmt_plan_time *t) {
  *t = (esmt_plan_time){0};
  if (!(r->flops > 0) || (s->offload && !(r->link > 0))) return 0;
  const esmt_model_config *c = s->model;
  const double d = c->hidden_size, F = c->ffn_size ? c->ffn_size : 4 * d;
  const double B = s->micro_batch, T = s->seq_len, tokens = B * T, es = s->esize;
  const uint64_t per_mb = (uint64_t)s->micro_batch * (uint64_t)s->seq_len;
  t->micro_batches = r->tokens > per_mb ? (int)((r->tokens + per_mb - 1) / per_mb) : 1;
  const double n_mb = t->micro_batches, L = c->num_layers;
  /* One layer's forward (its GEMMs and attention, esmt_model_train_flops'
   * convention); backward twice that, recompute one more forward. */
  const double fwd = (2 * (4 * d * d + 2 * d * F) * tokens + 4 * d * T * T * B) / r->flops;
  const double bwd = 2 * fwd + (s->recompute ? fwd : 0);
  const double ends = 6 * (d * d + d * c->vocab_size) * tokens / r->flops; /* head, both ways */
  t->compute = n_mb * (L * (fwd + bwd) + ends);
  /* Per layer and micro-batch over the link: its weights up in forward and
   * again in backward, its fp32 gradients down; the host then adds them
   * into its fp32 sums (read both, write one). */
  const double Wl = (double)s->layer_params;
  const double up = s->stream >= ESMT_STREAM_WEIGHTS ? Wl * es / r->link : 0;
  const double down = s->stream >= ESMT_STREAM_GRADIENTS ? Wl * 4 / r->link : 0;
  const double sums = s->stream >= ESMT_STREAM_GRADIENTS && r->host > 0 ? Wl * 12 / r->host : 0;
  const double layer_time = max2(fwd, up) + max3(bwd, up + down, sums);
  double streamed = n_mb * (L * layer_time + ends);
  if (s->stream >= ESMT_STREAM_WEIGHTS) streamed += 2 * n_mb * up; /* each pass's first layer */
  t->link = n_mb * L * (2 * up + down);
  /* The update under offload: gradients down unless they streamed, the
   * host step (master and moments read and written, the gradients read, the
   * half image written), the compute weights up unless they stream. */
  double update = 0;
  if (s->offload) {
    const double P = (double)s->params;
    const double g_down = s->stream >= ESMT_STREAM_GRADIENTS ? 0 : P * 4 / r->link;
    const double w_up = s->stream >= ESMT_STREAM_WEIGHTS ? 0 : P * es / r->link;
    const double state = (double)esmt_optimizer_state_bytes(c->optimizer, s->params);
    const double step = r->host > 0 ? (P * 12 + 2 * state + (es < 4 ? P * es : 0)) / r->host : 0;
    update = g_down + step + w_up;
    t->link += g_down + w_up;
  }
  t->exposed = streamed - t->compute + update;
  if (t->exposed < 0) t->exposed = 0;
  return 1;
}
