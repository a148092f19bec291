/* SPDX-License-Identifier: MIT */
/* The public optimizer step on a model: the optimizer module describes the
 * update (optim/optimizer.h), the parameter memory's layer runs it where
 * the buffers live (memory/param_layer.h). */
#include "model.h"
#include "optimizer.h"
#include "param_layer.h"

/* One update of `tensors` at learning rate lr. */
static esmt_status step_tensors(esmt_model *m, const esmt_optimizer_config *cfg,
                                const esmt_tensor_info *tensors, int count, double lr,
                                double grad_scale, int64_t step, const char *fn) {
  esmt_optim_step s;
  esmt_status st = esmt_optim_step_build(cfg, tensors, count, m->mem.opt_lo, m->mem.opt_hi, lr,
                                         grad_scale, step, fn, &s);
  if (st) return st;
  st = m->mem.layer->step(&m->mem, &s);
  esmt_optim_step_free(&s);
  return st;
}

static esmt_status optimizer_step_unguarded(esmt_model *m, const esmt_optimizer_config *cfg, double lr,
                                      double grad_scale, int64_t step) {
  const char *fn = "esmt_model_optimizer_step";
  ESMT_CHECK_ARG(m && cfg, fn, "model and cfg must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_optimizer_config", cfg->struct_size,
                                     ESMT_OPTIMIZER_CONFIG_MIN_SIZE);
  if (!st) st = esmt_optimizer_config_check(cfg, fn);
  if (st) return st;
  if (m->cfg.optimizer != cfg->kind)
    return esmt_fail(ESMT_ERR_STATE, "%s: this model holds %s's state (esmt_model_config."
                     "optimizer); a %s step would misread it", fn,
                     esmt_optimizer_name(m->cfg.optimizer), esmt_optimizer_name(cfg->kind));
  /* the task head at its own rate: a second update over its tensors (the
   * optimizers are elementwise, so this is one update with two rates) */
  const double scale = ESMT_OPTIMIZER_CONFIG_HAS(cfg, head_lr_scale) ? cfg->head_lr_scale : 1.0;
  const int64_t head_only = ESMT_OPTIMIZER_CONFIG_HAS(cfg, head_only_steps) ? cfg->head_only_steps
                                                                             : 0;
  const int has_head = m->n_opt_body < m->n_opt_tensors;
  if (head_only > 0 && !has_head)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: head_only_steps %lld needs a model with a "
                     "task head that trains", fn, (long long)head_only);
  const int split = (scale != 1.0 || head_only > 0) && has_head;
  const int body = split ? m->n_opt_body : m->n_opt_tensors;
  const double t0 = esmt_profile_begin(m);
  /* the encoder's step count restarts when it joins: its moments are zero
   * there, and the bias correction of step 1 keeps its first update sized */
  if (step > head_only)
    st = step_tensors(m, cfg, m->opt_tensors, body, lr, grad_scale, step - head_only, fn);
  if (!st && split)
    st = step_tensors(m, cfg, m->opt_tensors + body, m->n_opt_tensors - body, lr * scale,
                      grad_scale, step, fn);
  if (!st) esmt_profile_end(m, "update", "optimizer step", NULL, t0);
  m->have_forward = 0; /* the weights changed */
  return st ? esmt_fail_prefix(st, "%s: ", fn) : ESMT_OK;
}

esmt_status esmt_model_optimizer_step(esmt_model *model, const esmt_optimizer_config *cfg, double lr,
                                      double grad_scale, int64_t step) {
  if (!model) return optimizer_step_unguarded(model, cfg, lr, grad_scale, step); /* its message */
  esmt_status st = esmt_model_enter(model, "esmt_model_optimizer_step");
  if (st) return st;
  st = optimizer_step_unguarded(model, cfg, lr, grad_scale, step);
  esmt_model_leave(model);
  return st;
}
