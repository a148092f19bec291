/* SPDX-License-Identifier: MIT */
/* The public optimizer step on a model: the optimizer module describes the
 * update (optim/optimizer.h), the parameter memory's layer runs it where
 * the buffers live (memory/param_layer.h). */
#include "model.h"
#include "optimizer.h"
#include "param_layer.h"

static esmt_status optimizer_step_unguarded(esmt_model *m, const esmt_optimizer_config *cfg, double lr,
                                      double grad_scale, int64_t step) {
  const char *fn = "esmt_model_optimizer_step";
  ESMT_CHECK_ARG(m && cfg, fn, "model and cfg must not be NULL");
  esmt_optim_step s;
  esmt_status st = esmt_optim_step_build(cfg, m->opt_tensors, m->n_opt_tensors, m->mem.opt_lo,
                                         m->mem.opt_hi, lr, grad_scale, step, fn, &s);
  if (st) return st;
  if (m->cfg.optimizer != cfg->kind) {
    esmt_optim_step_free(&s);
    return esmt_fail(ESMT_ERR_STATE, "%s: this model holds %s's state (esmt_model_config."
                     "optimizer); a %s step would misread it", fn,
                     esmt_optimizer_name(m->cfg.optimizer), esmt_optimizer_name(cfg->kind));
  }
  st = m->mem.layer->step(&m->mem, &s);
  esmt_optim_step_free(&s);
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
