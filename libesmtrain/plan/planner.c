/* SPDX-License-Identifier: MIT */
/* Memory planner: bytes per tensor class for a config and policy, and the
 * cheapest policy and largest micro-batch that fit a device budget. The
 * activation bytes come from the same carving code that lays out the real
 * arena (model_activations.c), so plan and allocation cannot drift. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "optimizer.h"
#include "grad_shard.h"
#include "model.h"
#include "param_shard.h"
#include "planner.h"
#include "plan_time.h"
#include "stream.h"
#include "weight_gather.h"

#define MIB (1024ull * 1024ull)
#define GEMM_WORKSPACE (32 * MIB) /* cuBLASLt workspace and reduction scratch */
#define MAX_AUTO_BATCH 256

const char *esmt_mem_class_name(esmt_mem_class c) {
  static const char *const names[] = {"compute weights", "master weights", "gradients",
                                      "AdamW moments",   "activations",    "workspace",
                                      "runtime"};
  return (unsigned)c < ESMT_MEM_CLASS_COUNT ? names[c] : "unknown";
}

static uint64_t esize_of(esmt_precision p) { return p == ESMT_PRECISION_FP32 ? 4 : 2; }

/* Stream-ordered scratch of one attention call (backends/cuda_common/
 * cuda_attention.cu), live during the call only, one call at a time: the
 * 16-bit kernels read Q and K rotated once per pass (2 x B*T*d elements),
 * and backward adds D = rowsum(dO * O) in fp32 (B*heads*T). */
static uint64_t attention_scratch_bytes(const esmt_model_config *c, int B, int T, uint64_t es) {
  const uint64_t tokens = (uint64_t)B * (uint64_t)T;
  const uint64_t rotated = es == 2 ? 2 * tokens * (uint64_t)c->hidden_size * es : 0;
  return rotated + tokens * (uint64_t)c->num_heads * 4;
}

/* What the offload layer's buffers are sized by, for this model. */
static esmt_offload_shape offload_shape(const esmt_model_config *c, uint64_t P, int esize) {
  return (esmt_offload_shape){P, esmt_norm_tensor_count(c), c->hidden_size, c->optimizer, esize};
}

/* A planning request with what every attempt reads: the parameter count
 * and the model's parts (the stream layer's slots are sized by them). */
typedef struct plan_ctx {
  const esmt_plan_request *r;
  uint64_t P;
  esmt_layout layout;
  esmt_plan_rates rates;
  uint64_t train_lo;  /* fine-tuning: the frozen prefix holds no moments */
} plan_ctx;

/* Why a model with frozen parameters (LoRA, frozen layers) does not fit:
 * offload and streaming, which the general advice suggests, are not open to
 * it, and its whole fp32 master stays on the device. */
static void frozen_advice(esmt_plan *best, int seq_len, const char *total, const char *budget) {
  snprintf(best->advice, sizeof best->advice,
           "does not fit: the smallest plan (micro-batch %d x %d, recompute %s) needs %s but "
           "the budget is %s, %.2f GiB of it the fp32 master weights: a model with frozen "
           "parameters (LoRA, frozen layers) keeps its weights on the device, with no "
           "optimizer offload or streaming (in fp16/bf16 the frozen ones in half only); "
           "use fp16/bf16, shorten seq_len or use a smaller model",
           best->micro_batch, seq_len, best->recompute ? "on" : "off", total, budget,
           (double)best->device[ESMT_MEM_MASTER_WEIGHTS] / (1024.0 * MIB));
}

/* One concrete policy. */
typedef struct policy {
  int offload, recompute, stream;
} policy;

/* Whether the frozen prefix's fp32 master stays in host memory, as
 * esmt_param_frozen_on_host decides for the model. */
static int frozen_master_on_host(const plan_ctx *c, policy pol, uint64_t es) {
  return c->train_lo && es != 4 && !pol.offload && c->r->zero == 0;
}

/* The ranks that share one host's memory (host_budget's). */
static uint64_t ranks_on_host(const esmt_plan_request *r) {
  const int W = r->world_size > 1 ? r->world_size : 1;
  return (uint64_t)(r->ranks_per_host > 0 && r->ranks_per_host < W ? r->ranks_per_host : W);
}

/* Fill plan->device for one concrete policy and micro-batch. */
static void account(const plan_ctx *c, int B, policy pol, esmt_plan *p) {
  const esmt_plan_request *r = c->r;
  const uint64_t P = c->P, es = esize_of(r->precision);
  memset(p->device, 0, sizeof p->device);
  p->micro_batch = B;
  p->offload_optimizer = pol.offload;
  p->recompute = pol.recompute;
  p->stream = pol.stream;
  p->parameters = P;
  const esmt_offload_shape shape = offload_shape(r->model, P, (int)es);
  const esmt_stream_bytes sb = esmt_stream_sizes(pol.stream, c->layout.part_bounds,
                                                 c->layout.n_parts, (int)es, shape.n_norm, shape.d);
  const uint64_t norms = es == 4 ? 0 : (uint64_t)shape.n_norm * (uint64_t)shape.d * 4;
  /* fp32 without offload computes on the master weights themselves; the
   * LayerNorm w/b beside the half weights count as workspace */
  const int streamed_w = pol.stream >= ESMT_STREAM_WEIGHTS;
  p->device[ESMT_MEM_COMPUTE_WEIGHTS] = !pol.offload ? (es == 4 ? 0 : P * es)
                                      : streamed_w   ? sb.device_weights - norms : P * es;
  /* ZeRO-1/2: the rank's shard of the moments (dp_zero.c; the largest) */
  const uint64_t trained = c->layout.total - c->train_lo;
  const uint64_t held = r->zero > 0 ? esmt_zero_shard_max(trained, r->world_size) : trained;
  /* ZeRO-2 with a half copy: the master's shard, and the fp32 LayerNorm
   * w/b the kernels read beside the half weights as workspace (master_shard.c) */
  const int zero3 = r->zero >= 3; /* offloaded too: offload_zero3.c */
  const int master_shard =
      zero3 || (!pol.offload && esmt_zero_shards_master(r->zero, r->world_size, (int)es));
  /* a frozen prefix in half: its fp32 master in host memory, the device's
   * for what trains, the LayerNorm w/b in fp32 as workspace (frozen_master.c) */
  const int frozen_host = frozen_master_on_host(c, pol, es);
  p->device[ESMT_MEM_MASTER_WEIGHTS] = pol.offload ? 0
                                     : master_shard ? held * 4
                                     : frozen_host  ? trained * 4 : P * 4;
  /* ZeRO-3: the compute weights of the shard (in fp32 without offload the
   * master itself), the end parts whole and two gather slots (weight_gather.c) */
  if (zero3)
    p->device[ESMT_MEM_COMPUTE_WEIGHTS] =
        (es == 4 && !pol.offload ? 0 : held * es) +
        esmt_weight_gather_bytes(c->layout.part_bounds, c->layout.n_parts, (int)es);
  p->device[ESMT_MEM_MOMENTS] =
      pol.offload ? 0 : esmt_optimizer_state_bytes(r->model->optimizer, held);
  /* The fp32 gradients stay on the device (micro-batches accumulate into
   * them; under offload the last backward streams them to the host bucket
   * by bucket), unless they stream: the embedding's and head's, and two
   * layers' slots (stream.c); under ZeRO-2 without offload the rank's
   * shard, the end parts and two layers' slots (grad_shard.c); past a
   * frozen prefix what trains only. */
  p->device[ESMT_MEM_GRADIENTS] =
      (r->zero >= 2 && !pol.offload) || zero3
          ? esmt_grad_shard_bytes(c->layout.part_bounds, c->layout.n_parts, held)
          : c->train_lo ? trained * 4 : sb.device_grads;
  p->device[ESMT_MEM_ACTIVATIONS] =
      esmt_activation_bytes(r->model, B, r->seq_len, (int)es, pol.recompute);
  uint64_t half = (uint64_t)(r->model->hidden_size / r->model->num_heads) / 2;
  p->device[ESMT_MEM_WORKSPACE] = GEMM_WORKSPACE + 2 * (uint64_t)r->model->max_positions * half * 4 +
                                  attention_scratch_bytes(r->model, B, r->seq_len, es);
  if (pol.offload && !zero3) /* the LayerNorm w/b (and alignment) beside the compute weights */
    p->device[ESMT_MEM_WORKSPACE] += sb.device_weights - p->device[ESMT_MEM_COMPUTE_WEIGHTS];
  if (master_shard || frozen_host) p->device[ESMT_MEM_WORKSPACE] += norms; /* 0 in fp32 */
  p->device[ESMT_MEM_RUNTIME] = r->runtime_overhead;
  p->device_total = 0;
  for (int i = 0; i < ESMT_MEM_CLASS_COUNT; i++) p->device_total += p->device[i];
  /* Host: master, moments, fp32 gradients (and the F16/BF16 staging image)
   * live there under offload, for the rank's shard at ZeRO-1/2, and
   * streaming adds its bounce buffers: exactly what offload.c and stream.c
   * allocate. */
  const int W = r->world_size > 1 ? r->world_size : 1;
  p->host_pinned =
      pol.offload ? esmt_offload_host_bytes_sharded(&shape, r->zero, W) + sb.host_extra : 0;
  /* Over the host link per micro-batch: every layer's weights up for the
   * forward and again for backward (its recompute reuses the slot), every
   * layer's gradients down. */
  const uint64_t layers = c->layout.part_bounds[c->layout.n_parts - 1] - c->layout.part_bounds[1];
  p->stream_bytes = (pol.stream >= ESMT_STREAM_GRADIENTS ? layers * 4 : 0) +
                    (pol.stream >= ESMT_STREAM_WEIGHTS ? 2 * layers * es : 0);
  p->fits = (!r->device_budget || p->device_total <= r->device_budget) &&
            (!r->host_budget || p->host_pinned * ranks_on_host(r) <= r->host_budget);
  const esmt_plan_shape shp = {r->model, B, r->seq_len, (int)es, pol.offload, pol.recompute,
                               pol.stream, P, c->layout.part_bounds[2] - c->layout.part_bounds[1]};
  esmt_plan_time t;
  esmt_plan_time_of(&shp, &c->rates, &t); /* zeros when the rates cannot time it */
  p->micro_batches = t.micro_batches;
  esmt_zero_volume v; /* the update's micro-batches, shared by the W ranks */
  if (r->zero >= 3)
    esmt_zero3_comm_volume(c->layout.part_bounds, c->layout.n_parts, W,
                           (t.micro_batches + W - 1) / W, (int)es, &v);
  else
    esmt_zero_comm_volume(r->zero, P, W, (t.micro_batches + W - 1) / W,
                          pol.offload ? (int)es /* the compute copy (dp_zero.c) */
                                      : esmt_zero_gathered_bytes(r->zero, W, (int)es), &v);
  p->comm_bytes = r->world_size > 1 ? v.sent_per_rank : 0;
  p->allreduced_bytes = r->world_size > 1 ? v.allreduced : 0;
  p->reduce_scattered_bytes = r->world_size > 1 ? v.reduce_scattered : 0;
  p->allgathered_bytes = r->world_size > 1 ? v.allgathered : 0;
  p->compute_seconds = t.compute;
  p->link_seconds = t.link;
  p->exposed_seconds = t.exposed;
}

/* Expected seconds per token of a timed plan; 0 when untimed. */
static double per_token(const esmt_plan *p, int seq_len) {
  const double tokens = (double)p->micro_batches * p->micro_batch * seq_len;
  return p->compute_seconds > 0 && tokens > 0 ? (p->compute_seconds + p->exposed_seconds) / tokens
                                              : 0;
}

/* Largest micro-batch in [1, cap] that fits (0 if none); fills *p for it. */
static int largest_batch(const plan_ctx *c, policy pol, int cap, esmt_plan *p) {
  int lo = 0, hi = cap;
  while (lo < hi) { /* memory grows with B: binary search */
    int mid = lo + (hi - lo + 1) / 2;
    account(c, mid, pol, p);
    if (p->fits) lo = mid;
    else hi = mid - 1;
  }
  account(c, lo ? lo : 1, pol, p);
  return lo;
}

static const char *stream_name(int level) {
  return level == ESMT_STREAM_WEIGHTS ? "weights" : level == ESMT_STREAM_GRADIENTS ? "gradients"
                                                                                   : "off";
}

/* The planner without the advice of plan_suggest.c (plan_memory.c adds it). */
esmt_status esmt_plan_memory_only(const esmt_plan_request *r, esmt_plan *plan) {
  const char *fn = "esmt_plan_memory";
  ESMT_CHECK_ARG(r && plan, fn, "request and plan must not be NULL");
  /* the oldest layouts: before `stream` was appended to either */
  esmt_status st = esmt_check_struct(fn, "esmt_plan_request", r->struct_size,
                                     offsetof(esmt_plan_request, stream));
  if (!st) st = esmt_check_struct(fn, "esmt_plan", plan->struct_size, offsetof(esmt_plan, stream));
  if (st) return st;
  ESMT_CHECK_ARG(r->model, fn, "request.model must point to the model's configuration");
  /* A caller's struct may end before the appended optimizer (ADAMW then). */
  st = esmt_check_struct(fn, "esmt_model_config", r->model->struct_size,
                         offsetof(esmt_model_config, optimizer));
  if (st) return st;
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  memcpy(&cfg, r->model, r->model->struct_size < sizeof cfg ? r->model->struct_size : sizeof cfg);
  cfg.struct_size = sizeof cfg;
  if (!cfg.ffn_size) cfg.ffn_size = 4 * cfg.hidden_size;
  if ((st = esmt_model_config_validate(&cfg))) return esmt_fail_prefix(st, "%s: ", fn);
  if (r->seq_len < 1 || r->seq_len > cfg.max_positions || r->micro_batch < 0 ||
      (unsigned)r->precision > ESMT_PRECISION_BF16 || r->offload_optimizer < -1 ||
      r->offload_optimizer > 1 || r->recompute < -1 || r->recompute > 1 ||
      !esmt_optimizer_name(cfg.optimizer))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: need 1 <= seq_len <= max_positions (%d), "
                     "micro_batch >= 0, a known precision and optimizer, offload/recompute in {-1, 0, 1}", fn,
                     cfg.max_positions);
  /* a caller's request may end before `stream` (none then) */
  esmt_plan_request req = ESMT_PLAN_REQUEST_INIT;
  memcpy(&req, r, r->struct_size < sizeof req ? r->struct_size : sizeof req);
  req.struct_size = sizeof req;
  req.model = &cfg;
  if (req.stream < -1 || req.stream > ESMT_STREAM_WEIGHTS)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: stream %d is not an esmt_stream_level or -1",
                     fn, req.stream);
  if (req.stream > 0 && req.offload_optimizer == 0)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: streaming %s from host memory needs the "
                     "optimizer offloaded (offload_optimizer on or auto)", fn,
                     stream_name(req.stream));
  if (req.world_size < 1) req.world_size = 1;
  if (req.zero == -1) {
    /* auto: the lowest stage that fits with the state on the device (each
     * rank offloading its own whole copy costs W times the host memory),
     * else stage 0 with whatever offload and streaming fit; the advice
     * names the stage */
    esmt_status zs = ESMT_OK;
    for (int z = 0; z <= 3; z++) {
      esmt_plan_request q = req;
      q.zero = z;
      if (q.offload_optimizer < 0) q.offload_optimizer = 0;
      if (q.stream < 0) q.stream = 0;
      if ((zs = esmt_plan_memory_only(&q, plan)) != ESMT_ERR_OUT_OF_MEMORY) return zs;
    }
    /* then each rank's shard of the state on its host (ZeRO-1: one
     * reduce-scatter an update; stage 2 holds the same bytes there), and
     * with it ZeRO-3's shard of the compute weights and gradients */
    for (int z = 1; req.offload_optimizer != 0 && req.stream <= 0 && req.world_size > 1 && z <= 3;
         z += 2) {
      esmt_plan_request q = req;
      q.zero = z;
      q.offload_optimizer = 1;
      q.stream = 0;
      if ((zs = esmt_plan_memory_only(&q, plan)) != ESMT_ERR_OUT_OF_MEMORY) return zs;
    }
    req.zero = 0;
    if (req.offload_optimizer == 0 && req.stream <= 0) return zs; /* tried already */
    return esmt_plan_memory_only(&req, plan);
  }
  if (req.zero < 0 || req.zero > 3)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: zero %d: need 0, 1, 2, 3 or -1 (auto)", fn,
                     req.zero);
  /* the ranks combine offload with every stage, and stream under none
   * (dp_zero.c): auto keeps streaming off */
  if (req.zero > 0 && req.stream > 0)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: streaming %s does not combine with ZeRO-%d: "
                     "use ZeRO with the optimizer offloaded, or one process", fn,
                     stream_name(req.stream), req.zero);
  if (req.zero > 0 && req.stream < 0) req.stream = ESMT_STREAM_NONE;
  if (!(req.device_flops >= 0) || !(req.link_bandwidth >= 0) || !(req.host_bandwidth >= 0))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: device_flops, link_bandwidth and "
                     "host_bandwidth must be >= 0 (0: unknown)", fn);
  plan_ctx c = {&req, 0, {0}, {req.device_flops, req.link_bandwidth, req.host_bandwidth,
                               req.tokens_per_update}, 0};
  esmt_model_config_param_count(&cfg, &c.P);
  if ((st = esmt_layout_build(&cfg, &c.layout))) return esmt_fail_prefix(st, "%s: ", fn);
  c.train_lo = esmt_layout_train_lo(&cfg, &c.layout);
  if (c.train_lo && (req.offload_optimizer == 1 || req.stream > 0)) {
    esmt_layout_free(&c.layout);
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: a model with frozen parameters (frozen_layers, "
                     "LoRA) keeps its parameters on the device: no optimizer offload or "
                     "streaming", fn);
  }
  if (c.train_lo) req.offload_optimizer = 0; /* auto: what the model can run */

  /* Policies from cheapest to dearest, restricted by what was forced. */
  static const policy order[] = {{0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 0},
                                 {1, 0, 1}, {1, 1, 1}, {1, 0, 2}, {1, 1, 2}};
  /* Without rates the first that fits wins; with them, later policies
   * (more streamed, or recompute) that fit are timed against it and the
   * fastest per token wins, an earlier one on a tie (within 0.5%). */
  const int timed = req.device_flops > 0;
  esmt_plan best = ESMT_PLAN_INIT;
  int found = 0, have = 0; /* have: best holds an attempt (a forced policy may skip i == 0) */
  for (size_t i = 0; i < sizeof order / sizeof order[0] && (!found || timed); i++) {
    const policy pol = order[i];
    if ((req.offload_optimizer >= 0 && pol.offload != req.offload_optimizer) ||
        (r->recompute >= 0 && pol.recompute != r->recompute) ||
        (req.stream >= 0 && pol.stream != req.stream))
      continue;
    esmt_plan p = ESMT_PLAN_INIT;
    int fits;
    if (r->micro_batch > 0) {
      account(&c, r->micro_batch, pol, &p);
      fits = p.fits;
    } else {
      fits = largest_batch(&c, pol, MAX_AUTO_BATCH, &p) > 0;
    }
    if (found) { /* timed: a faster fitting plan replaces it */
      const double a = per_token(&best, r->seq_len), b = per_token(&p, r->seq_len);
      if (fits && a > 0 && b > 0 && b < a * 0.995) best = p;
      continue;
    }
    found = fits;
    if (found || !have || p.device_total < best.device_total) best = p;
    have = 1;
  }
  esmt_layout_free(&c.layout);
  /* a caller's plan may end before the appended fields */
  const uint32_t size = plan->struct_size;
  best.struct_size = size;
  char total[32], budget[32];
  snprintf(total, sizeof total, "%.2f GiB", (double)best.device_total / (1024.0 * MIB));
  snprintf(budget, sizeof budget, "%.2f GiB", (double)r->device_budget / (1024.0 * MIB));
  if (found) {
    snprintf(best.advice, sizeof best.advice,
             "micro-batch %d x %d fits in %s of %s with optimizer offload %s, recompute %s and "
             "streaming %s",
             best.micro_batch, r->seq_len, total, r->device_budget ? budget : "an unlimited budget",
             best.offload_optimizer ? "on" : "off", best.recompute ? "on" : "off",
             stream_name(best.stream));
    if (best.compute_seconds > 0) {
      const size_t n = strlen(best.advice);
      snprintf(best.advice + n, sizeof best.advice - n,
               "; expected %.3g s of compute per update (%d micro-batches) and %.3g s more for "
               "transfers and host passes (%.1f%%), the fastest of the policies that fit",
               best.compute_seconds, best.micro_batches, best.exposed_seconds,
               100.0 * best.exposed_seconds / best.compute_seconds);
    }
    if (c.train_lo && req.precision != ESMT_PRECISION_FP32 && !req.zero) {
      const size_t n = strlen(best.advice);
      snprintf(best.advice + n, sizeof best.advice - n, "; the fp32 master of the frozen "
               "weights (%.2f GiB) in host memory",
               (double)(c.train_lo * 4) / (1024.0 * MIB));
    }
    if (req.world_size > 1 || req.zero) {
      const size_t n = strlen(best.advice);
      snprintf(best.advice + n, sizeof best.advice - n, "; per rank of %d, ZeRO-%d%s",
               req.world_size, req.zero,
               req.zero ? " (the optimizer state of this rank's shard)" : "");
    }
    if (best.offload_optimizer && req.world_size > 1) {
      const size_t n = strlen(best.advice);
      snprintf(best.advice + n, sizeof best.advice - n, "; host memory %.2f GiB a rank, "
               "%.2f GiB for the %llu ranks of a host", (double)best.host_pinned / (1024.0 * MIB),
               (double)(best.host_pinned * ranks_on_host(&req)) / (1024.0 * MIB),
               (unsigned long long)ranks_on_host(&req));
    }
    memcpy(plan, &best, size < sizeof best ? size : sizeof best);
    return ESMT_OK;
  }
  best.fits = 0;
  const int host_short = r->host_budget && best.host_pinned * ranks_on_host(&req) > r->host_budget &&
                         (!r->device_budget || best.device_total <= r->device_budget);
  if (host_short) { /* the device would hold it; the host cannot hold the offloaded state */
    char host[32], host_avail[32];
    snprintf(host, sizeof host, "%.1f GiB", (double)(best.host_pinned * ranks_on_host(&req)) /
                                             (1024.0 * MIB));
    snprintf(host_avail, sizeof host_avail, "%.1f GiB", (double)r->host_budget / (1024.0 * MIB));
    snprintf(best.advice, sizeof best.advice,
             "does not fit: the smallest plan (micro-batch %d x %d, offload on, recompute %s, "
             "streaming %s) fits the device in %s but needs %s of host memory for the "
             "offloaded weights, gradients and optimizer state, and %s is available; use "
             "optimizer.kind lion (one moment instead of two), a machine with more memory, or "
             "a smaller model",
             best.micro_batch, r->seq_len, best.recompute ? "on" : "off",
             stream_name(best.stream), total, host, host_avail);
  } else if (c.train_lo) {
    frozen_advice(&best, r->seq_len, total, budget);
  } else {
    snprintf(best.advice, sizeof best.advice,
             "does not fit: the smallest plan (micro-batch %d x %d, offload %s, recompute %s, "
             "streaming %s) needs %s but the budget is %s; allow offload, recompute and "
             "streaming (auto), shorten seq_len, use a lower precision or a smaller model",
             best.micro_batch, r->seq_len, best.offload_optimizer ? "on" : "off",
             best.recompute ? "on" : "off", stream_name(best.stream), total, budget);
  }
  memcpy(plan, &best, size < sizeof best ? size : sizeof best);
  return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: %s", fn, plan->advice);
}
