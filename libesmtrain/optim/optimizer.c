/* SPDX-License-Identifier: MIT */
/* The optimizer module (see optimizer.h): its kinds, their state and
 * memory, and the description of one step: the per-tensor weight-decay
 * segments of the flat buffer (the part this rank holds under ZeRO-1) and
 * the hyper-parameters, which the parameter memory's layer hands to the
 * backend's op, or to the host optimizer under offload. */
#include "esmtrain/backend.h"
#include "optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


typedef struct kind_info {
  const char *name;
  int nstate;
  const char *prefix[ESMT_OPTIMIZER_MAX_STATE];
} kind_info;

static const kind_info kinds[] = {
    [ESMT_OPTIMIZER_ADAMW] = {"adamw", 2, {"m.", "v."}},
    [ESMT_OPTIMIZER_LION] = {"lion", 1, {"m."}},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

static const kind_info *info(esmt_optimizer_kind k) {
  return (unsigned)k < (unsigned)NKINDS ? &kinds[k] : NULL;
}

const char *esmt_optimizer_name(esmt_optimizer_kind k) {
  return info(k) ? info(k)->name : NULL;
}

esmt_status esmt_optimizer_from_name(const char *name, esmt_optimizer_kind *kind) {
  for (int i = 0; i < NKINDS; i++)
    if (name && !strcmp(name, kinds[i].name)) {
      *kind = (esmt_optimizer_kind)i;
      return ESMT_OK;
    }
  return esmt_fail(ESMT_ERR_CONFIG, "unknown optimizer '%s' (known: adamw, lion)", name ? name : "");
}

int esmt_optimizer_state_count(esmt_optimizer_kind k) { return info(k) ? info(k)->nstate : 0; }

const char *esmt_optimizer_state_prefix(esmt_optimizer_kind k, int i) {
  return info(k) && i >= 0 && i < info(k)->nstate ? info(k)->prefix[i] : NULL;
}

uint64_t esmt_optimizer_state_bytes(esmt_optimizer_kind k, uint64_t params) {
  return (uint64_t)esmt_optimizer_state_count(k) * sizeof(float) * params;
}

esmt_status esmt_optimizer_config_check(const esmt_optimizer_config *c, const char *fn) {
  if (!info(c->kind))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: optimizer kind %d is not one this library "
                     "knows (ESMT_OPTIMIZER_ADAMW, ESMT_OPTIMIZER_LION)", fn, (int)c->kind);
  if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1) || !(c->eps > 0) ||
      !(c->weight_decay >= 0) || !isfinite(c->weight_decay) || !isfinite(c->eps))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %s needs 0 <= beta1, beta2 < 1, eps > 0 "
                     "and a finite weight_decay >= 0 (got %g, %g, %g, %g)", fn,
                     esmt_optimizer_name(c->kind), c->beta1, c->beta2, c->eps, c->weight_decay);
  if (ESMT_OPTIMIZER_CONFIG_HAS(c, head_lr_scale) &&
      (!(c->head_lr_scale >= 0) || !isfinite(c->head_lr_scale)))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: head_lr_scale %g must be finite and >= 0",
                     fn, c->head_lr_scale);
  if (ESMT_OPTIMIZER_CONFIG_HAS(c, head_only_steps) && c->head_only_steps < 0)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: head_only_steps %lld must be >= 0", fn,
                     (long long)c->head_only_steps);
  return ESMT_OK;
}

esmt_status esmt_optimizer_config_init(esmt_optimizer_kind kind, esmt_optimizer_config *cfg) {
  ESMT_CHECK_ARG(cfg, "esmt_optimizer_config_init", "cfg must not be NULL");
  if (!info(kind))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_optimizer_config_init: unknown optimizer "
                     "kind %d", (int)kind);
  *cfg = (esmt_optimizer_config)ESMT_OPTIMIZER_CONFIG_INIT;
  cfg->kind = kind;
  if (kind == ESMT_OPTIMIZER_LION) { /* the paper's defaults (Chen et al. 2023, section 5) */
    cfg->beta2 = 0.99;
    cfg->weight_decay = 0.1;
  }
  return ESMT_OK;
}

esmt_status esmt_optim_step_build(const esmt_optimizer_config *cfg,
                                  const esmt_tensor_info *tensors, int count, uint64_t lo,
                                  uint64_t hi, double lr, double grad_scale, int64_t step,
                                  const char *fn, esmt_optim_step *s) {
  memset(s, 0, sizeof *s);
  esmt_status st = esmt_check_struct(fn, "esmt_optimizer_config", cfg->struct_size,
                                     ESMT_OPTIMIZER_CONFIG_MIN_SIZE);
  if (!st) st = esmt_optimizer_config_check(cfg, fn);
  if (st) return st;
  if (step < 1) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: step %lld must be >= 1", fn,
                                 (long long)step);
  if (!(lr >= 0) || !isfinite(lr) || !isfinite(grad_scale))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: need a finite lr >= 0 (got %g) and a finite "
                     "grad_scale (got %g)", fn, lr, grad_scale);
  esmtb_segment *segs = malloc((size_t)(count > 0 ? count : 1) * sizeof *segs);
  if (!segs) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  int n = 0;
  for (int i = 0; i < count; i++) {
    const esmt_tensor_info *t = &tensors[i];
    uint64_t a0 = t->offset > lo ? t->offset : lo;
    uint64_t a1 = t->offset + t->numel < hi ? t->offset + t->numel : hi;
    if (a0 >= a1) continue;
    float wd = (cfg->decay_biases_and_norms || t->ndim >= 2) ? (float)cfg->weight_decay : 0.0f;
    if (n && segs[n - 1].weight_decay == wd && segs[n - 1].offset + segs[n - 1].count == a0 - lo)
      segs[n - 1].count += a1 - a0; /* merge runs with the same decay */
    else
      segs[n++] = (esmtb_segment){a0 - lo, a1 - a0, wd};
  }
  s->kind = cfg->kind;
  s->segments = segs;
  s->lion = (esmtb_lion_args){sizeof s->lion, n, segs, NULL, NULL, NULL, (float)lr,
                              (float)cfg->beta1, (float)cfg->beta2, (float)grad_scale, NULL,
                              ESMTB_F32};
  s->adamw = (esmtb_adamw_args){sizeof s->adamw, n, segs, NULL, NULL, NULL, NULL, (float)lr,
                                (float)cfg->beta1, (float)cfg->beta2, (float)cfg->eps, step,
                                (float)grad_scale, NULL, ESMTB_F32};
  return ESMT_OK;
}

void esmt_optim_step_free(esmt_optim_step *s) {
  free(s->segments); /* an op keeps no pointer into the caller's arrays (backend.h) */
  s->segments = NULL;
}
