/* SPDX-License-Identifier: MIT */
/* What fits instead of a plan that does not (plan_suggest.h). */
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "optimizer.h"
#include "plan_suggest.h"
#include "planner.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* The request with the model `m`, the stage, policy and micro-batch left
 * to the planner; 1 when it fits, its plan in *p. */
static int fits_with(const esmt_plan_request *r, const esmt_model_config *m, esmt_plan *p) {
  esmt_plan_request q = *r;
  q.model = m;
  q.zero = r->world_size > 1 ? -1 : 0;
  q.offload_optimizer = -1;
  q.recompute = -1;
  q.stream = -1;
  *p = (esmt_plan)ESMT_PLAN_INIT;
  return esmt_plan_memory_only(&q, p) == ESMT_OK && p->fits;
}

/* "micro-batch B at ZeRO-z, offload on, 9.1 GiB a rank's device, host 3.2 GiB" */
static void figures(const esmt_plan_request *r, const esmt_plan *p, char *out, size_t cap) {
  const int W = r->world_size > 1 ? r->world_size : 1;
  const int on_host = r->ranks_per_host > 0 && r->ranks_per_host < W ? r->ranks_per_host : W;
  const char *stage = strstr(p->advice, "ZeRO-");
  char host[96] = "";
  if (p->host_pinned)
    snprintf(host, sizeof host, ", %.1f GiB of host memory for the %d rank(s) of a host",
             (double)p->host_pinned * on_host / GIB, on_host);
  snprintf(out, cap, "micro-batch %d x %d%s%.6s, offload %s, recompute %s: %.1f GiB of device "
           "memory a rank%s", p->micro_batch, r->seq_len, stage ? " at " : "", stage ? stage : "",
           p->offload_optimizer ? "on" : "off", p->recompute ? "on" : "off",
           (double)p->device_total / GIB, host);
}

int esmt_plan_suggest(const esmt_plan_request *r, char *out, size_t cap) {
  const esmt_model_config *m = r->model;
  const int W = r->world_size > 1 ? r->world_size : 1;
  if (!m || W < 2 || (!r->device_budget && !r->host_budget) || m->frozen_layers || m->lora_rank)
    return 0;
  esmt_model_config base = ESMT_MODEL_CONFIG_INIT;
  memcpy(&base, m, m->struct_size < sizeof base ? m->struct_size : sizeof base);
  base.struct_size = sizeof base;
  if (!base.ffn_size) base.ffn_size = 4 * base.hidden_size;
  uint64_t P = 0;
  if (esmt_model_config_param_count(&base, &P)) return 0;
  /* the fp32 state every policy keeps somewhere: master, gradients, moments */
  const double state = (double)P * 8 + (double)esmt_optimizer_state_bytes(base.optimizer, P);
  const double device = (double)W * (double)r->device_budget, host = (double)r->host_budget;
  char host_text[64] = "";
  if (host > 0) snprintf(host_text, sizeof host_text, " and %.1f GiB of host memory", host / GIB);
  char why[256];
  snprintf(why, sizeof why, "does not fit: %.2fB parameters with %s keep %.0f bytes each of fp32 "
           "master weights, gradients and moments, %.1f GiB, beside the compute weights and "
           "activations, against %d x %.1f GiB of device memory%s",
           (double)P / 1e9, esmt_optimizer_name(base.optimizer), state / (double)P, state / GIB, W,
           device / W / GIB, host_text);
  char alt[320] = "";
  esmt_plan p;
  /* the same model: Lion's one moment, a half compute copy, both */
  struct { esmt_optimizer_kind opt; esmt_precision prec; const char *what; } tries[] = {
      {ESMT_OPTIMIZER_LION, r->precision, "optimizer.kind lion"},
      {base.optimizer, ESMT_PRECISION_BF16, "backend.precision bf16"},
      {ESMT_OPTIMIZER_LION, ESMT_PRECISION_BF16, "optimizer.kind lion and backend.precision bf16"},
  };
  for (size_t i = 0; i < sizeof tries / sizeof tries[0] && !alt[0]; i++) {
    if (tries[i].opt == base.optimizer && tries[i].prec == r->precision) continue;
    esmt_model_config c = base;
    c.optimizer = tries[i].opt;
    esmt_plan_request q = *r;
    q.precision = tries[i].prec;
    if (!fits_with(&q, &c, &p)) continue;
    char fig[200];
    figures(&q, &p, fig, sizeof fig);
    snprintf(alt, sizeof alt, "this model fits with %s: %s", tries[i].what, fig);
  }
  /* else the largest smaller ESM-2 that fits as asked */
  int n = 0;
  while (esmt_model_preset_name(n)) n++;
  for (int i = n - 1; !alt[0] && i >= 0; i--) {
    esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
    uint64_t pc = 0;
    if (esmt_model_config_preset(esmt_model_preset_name(i), &c) ||
        esmt_model_config_param_count(&c, &pc) || pc >= P)
      continue;
    c.optimizer = base.optimizer;
    c.max_positions = base.max_positions;
    if (!fits_with(r, &c, &p)) continue;
    char fig[200];
    figures(r, &p, fig, sizeof fig);
    snprintf(alt, sizeof alt, "no precision or optimizer of this engine fits this model here; "
             "the largest ESM-2 that fits as asked is %s (%.0fM parameters): %s",
             esmt_model_preset_name(i), (double)pc / 1e6, fig);
  }
  if (!alt[0]) snprintf(alt, sizeof alt, "no smaller ESM-2 fits either");
  snprintf(out, cap, "%s; %s", why, alt);
  return 1;
}
