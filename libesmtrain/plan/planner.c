/* Memory planner: bytes per tensor class for a config and policy, and the
 * cheapest policy and largest micro-batch that fit a device budget. The
 * activation bytes come from the same carving code that lays out the real
 * arena (model_activations.c), so plan and allocation cannot drift. */
#include <stdio.h>
#include <string.h>

#include "optimizer.h"
#include "model.h"
#include "offload.h"

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

/* Parameters of the largest layer, and of embedding + head (whose
 * gradients stay on the device under offload: the tied embedding gets its
 * two contributions at opposite ends of backward). */
static void param_split(const esmt_model_config *c, uint64_t *layer, uint64_t *ends) {
  uint64_t d = (uint64_t)c->hidden_size, F = c->ffn_size ? (uint64_t)c->ffn_size : 4 * d;
  *layer = 4 * d * d + 2 * d * F + 9 * d + F;
  *ends = (uint64_t)c->vocab_size * d + d * d + 5 * d + (uint64_t)c->vocab_size;
}

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

/* Fill plan->device for one concrete policy and micro-batch. */
static void account(const esmt_plan_request *r, uint64_t P, int B, int offload, int recompute,
                    esmt_plan *p) {
  const uint64_t es = esize_of(r->precision);
  uint64_t layer, ends;
  param_split(r->model, &layer, &ends);
  memset(p->device, 0, sizeof p->device);
  p->micro_batch = B;
  p->offload_optimizer = offload;
  p->recompute = recompute;
  p->parameters = P;
  /* fp32 without offload computes on the master weights themselves. */
  p->device[ESMT_MEM_COMPUTE_WEIGHTS] = (r->precision == ESMT_PRECISION_FP32 && !offload) ? 0 : P * es;
  p->device[ESMT_MEM_MASTER_WEIGHTS] = offload ? 0 : P * 4;
  p->device[ESMT_MEM_MOMENTS] = offload ? 0 : esmt_optimizer_state_bytes(r->model->optimizer, P);
  /* The fp32 gradients stay on the device (micro-batches accumulate into
   * them); under offload the last backward streams them to the host
   * bucket by bucket (offload.c). */
  (void)layer; (void)ends;
  p->device[ESMT_MEM_GRADIENTS] = P * 4;
  p->device[ESMT_MEM_ACTIVATIONS] =
      esmt_activation_bytes(r->model, B, r->seq_len, (int)es, recompute);
  uint64_t half = (uint64_t)(r->model->hidden_size / r->model->num_heads) / 2;
  p->device[ESMT_MEM_WORKSPACE] = GEMM_WORKSPACE + 2 * (uint64_t)r->model->max_positions * half * 4 +
                                  attention_scratch_bytes(r->model, B, r->seq_len, es);
  const esmt_offload_shape shape = offload_shape(r->model, P, (int)es);
  if (offload && es != 4) /* fp32 LayerNorm w/b beside the half weights (offload.c) */
    p->device[ESMT_MEM_WORKSPACE] += esmt_offload_compute_bytes(&shape) - P * es;
  p->device[ESMT_MEM_RUNTIME] = r->runtime_overhead;
  p->device_total = 0;
  for (int i = 0; i < ESMT_MEM_CLASS_COUNT; i++) p->device_total += p->device[i];
  /* Host: master, moments, fp32 gradients (and the F16/BF16 staging image)
   * live there under offload: exactly what offload.c allocates. */
  p->host_pinned = offload ? esmt_offload_host_bytes(&shape) : 0;
  p->fits = !r->device_budget || p->device_total <= r->device_budget;
}

/* Largest micro-batch in [1, cap] that fits (0 if none); fills *p for it. */
static int largest_batch(const esmt_plan_request *r, uint64_t P, int offload, int recompute, int cap,
                         esmt_plan *p) {
  int lo = 0, hi = cap;
  while (lo < hi) { /* memory grows with B: binary search */
    int mid = lo + (hi - lo + 1) / 2;
    account(r, P, mid, offload, recompute, p);
    if (p->fits) lo = mid;
    else hi = mid - 1;
  }
  account(r, P, lo ? lo : 1, offload, recompute, p);
  return lo;
}

esmt_status esmt_plan_memory(const esmt_plan_request *r, esmt_plan *plan) {
  const char *fn = "esmt_plan_memory";
  ESMT_CHECK_ARG(r && plan, fn, "request and plan must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_plan_request", r->struct_size, sizeof *r);
  if (!st) st = esmt_check_struct(fn, "esmt_plan", plan->struct_size, sizeof *plan);
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
  esmt_plan_request req = *r;
  req.model = &cfg;
  uint64_t P = 0;
  esmt_model_config_param_count(&cfg, &P);

  /* Policies from cheapest to dearest, restricted by what was forced. */
  static const int order[4][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  esmt_plan best = *plan;
  int found = 0, have = 0; /* have: best holds an attempt (a forced policy may skip i == 0) */
  for (int i = 0; i < 4 && !found; i++) {
    int off = order[i][0], rec = order[i][1];
    if ((r->offload_optimizer >= 0 && off != r->offload_optimizer) ||
        (r->recompute >= 0 && rec != r->recompute))
      continue;
    esmt_plan p = *plan;
    if (r->micro_batch > 0) {
      account(&req, P, r->micro_batch, off, rec, &p);
      found = p.fits;
    } else {
      found = largest_batch(&req, P, off, rec, MAX_AUTO_BATCH, &p) > 0;
    }
    if (found || !have || p.device_total < best.device_total) best = p;
    have = 1;
  }
  uint32_t size = plan->struct_size;
  *plan = best;
  plan->struct_size = size;
  char total[32], budget[32];
  snprintf(total, sizeof total, "%.2f GiB", (double)plan->device_total / (1024.0 * MIB));
  snprintf(budget, sizeof budget, "%.2f GiB", (double)r->device_budget / (1024.0 * MIB));
  if (found) {
    snprintf(plan->advice, sizeof plan->advice,
             "micro-batch %d x %d fits in %s of %s with optimizer offload %s and recompute %s",
             plan->micro_batch, r->seq_len, total, r->device_budget ? budget : "an unlimited budget",
             plan->offload_optimizer ? "on" : "off", plan->recompute ? "on" : "off");
    return ESMT_OK;
  }
  plan->fits = 0;
  snprintf(plan->advice, sizeof plan->advice,
           "does not fit: the smallest plan (micro-batch %d x %d, offload %s, recompute %s) needs "
           "%s but the budget is %s; allow offload/recompute (auto), shorten seq_len, use a "
           "lower precision or a smaller model",
           plan->micro_batch, r->seq_len, plan->offload_optimizer ? "on" : "off",
           plan->recompute ? "on" : "off", total, budget);
  return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: %s", fn, plan->advice);
}
