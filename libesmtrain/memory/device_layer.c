/* SPDX-License-Identifier: MIT */
/* The device layer of the parameter memory (param_layer.h): every buffer
 * in the backend's device memory, the kernels reading the master itself
 * (fp32) or its half copy. */
#include "esmtrain/backend.h"
#include "param_layer.h"

#include <string.h>

#include "registry.h"

static esmt_status dev_sync_compute(esmt_param_memory *p, uint64_t off, uint64_t count) {
  if (!p->compute_lowp) return ESMT_OK; /* fp32: the kernels read the master */
  const esmt_param_env *e = &p->env;
  const char *where = "refreshing the half-precision weight copy";
  if (off < p->master_lo || off + count > p->master_hi)
    return esmt_fail(ESMT_ERR_STATE, "%s: [%llu, %llu) is outside this rank's fp32 master "
                     "shard [%llu, %llu) (ZeRO-2)", where, (unsigned long long)off,
                     (unsigned long long)(off + count), (unsigned long long)p->master_lo,
                     (unsigned long long)p->master_hi);
  if (!e->ops->convert)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: backend %s does not implement convert", where,
                     e->ops->name);
  esmtb_convert_args c = {sizeof c, count, p->master + (off - p->master_lo), ESMTB_F32,
                          (char *)p->compute_lowp + (off - p->compute_lo) * e->esize, e->dtype};
  esmtb_status bs = e->ops->convert(e->dev, &c, e->stream);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "%s: convert: ", where);
  if (p->norm_dev) { /* a sharded master: the kernels read the LayerNorm w/b from norm_dev */
    esmt_status st = esmt_param_norms_from_master(p, off, off + count);
    if (st) return esmt_fail_prefix(st, "%s: ", where);
  }
  bs = e->ops->stream_sync(e->dev, e->stream);
  return bs ? esmt_fail_prefix((esmt_status)bs, "%s: ", where) : ESMT_OK;
}

static esmt_status dev_copy(esmt_param_memory *p, void *host, void *buf, uint64_t bytes,
                            int to_buf) {
  const esmt_param_env *e = &p->env;
  esmtb_status cs = to_buf
      ? e->ops->copy_async(e->dev, buf, host, bytes, ESMTB_COPY_H2D, e->stream)
      : e->ops->copy_async(e->dev, host, buf, bytes, ESMTB_COPY_D2H, e->stream);
  if (!cs) cs = e->ops->stream_sync(e->dev, e->stream);
  return cs ? esmt_fail_prefix((esmt_status)cs, "copy: ") : ESMT_OK;
}

static esmt_status dev_weights_needed(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  (void)p;
  (void)lo;
  (void)hi;
  return ESMT_OK; /* resident */
}

static void dev_grads_changed(esmt_param_memory *p) { (void)p; }

esmt_status esmt_param_zero_device_grads(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  p->layer->grads_changed(p);
  esmtb_status bs = e->ops->memset_async(e->dev, p->grads, 0,
                                         (p->grads_hi - p->grads_lo) * sizeof(float), e->stream);
  return bs ? esmt_fail_prefix((esmt_status)bs, "zeroing the gradients: ") : ESMT_OK;
}

void esmt_param_resident_views(esmt_param_memory *p) {
  p->weights = (esmt_param_view){0};
  p->weights.base = p->compute_lowp ? (char *)p->compute_lowp : (char *)p->compute32;
  p->weights.esize = p->compute_lowp ? p->env.esize : sizeof(float);
  p->grad_view = (esmt_param_view){0};
  p->grad_view.esize = sizeof(float);
  if (p->grads_lo) { /* a frozen prefix: one window, no address below it */
    p->grad_view.n = 1;
    p->grad_view.win[0].lo = p->grads_lo;
    p->grad_view.win[0].hi = p->grads_hi;
    p->grad_view.win[0].ptr = (char *)p->grads;
  } else {
    p->grad_view.base = (char *)p->grads;
  }
}
static esmt_status dev_ok(esmt_param_memory *p) { (void)p; return ESMT_OK; }
static void dev_cancel(esmt_param_memory *p) { (void)p; }
static esmt_status dev_grads_ready(esmt_param_memory *p, uint64_t from) {
  (void)p;
  (void)from;
  return ESMT_OK;
}

static esmt_status dev_grad_sumsq(esmt_param_memory *p, float *sum) {
  return esmt_param_grad_sumsq_range(p, p->grads_lo, p->grads_hi, sum);
}

/* The backend's op on the device buffers; the half copy is written by the
 * op itself (params_lowp). */
static esmt_status dev_step(esmt_param_memory *p, esmt_optim_step *s) {
  const esmt_param_env *e = &p->env;
  const uint64_t lo = p->opt_lo;
  void *low = p->compute_lowp ? (char *)p->compute_lowp + (lo - p->compute_lo) * e->esize : NULL;
  esmtb_status bs = 0;
  if (s->kind == ESMT_OPTIMIZER_LION) {
    esmtb_lion_args *al = &s->lion;
    al->params = p->master + (lo - p->master_lo);
    al->grads = p->grads + (lo - p->grads_lo);
    al->m = p->moment1;
    al->params_lowp = low;
    al->lowp_dtype = e->dtype;
    if (!al->n_segments) return ESMT_OK;
    if (!esmt_ops_has_lion(e->ops))
      return esmt_fail(ESMT_ERR_UNSUPPORTED, "backend %s (ABI %u.%u) has no Lion op (the "
                       "\"optimizer\" group's lion): use optimizer.kind adamw", e->ops->name, (unsigned)e->ops->abi_major,
                       (unsigned)e->ops->abi_minor);
    bs = e->ops->lion(e->dev, al, e->stream);
  } else {
    esmtb_adamw_args *aw = &s->adamw;
    aw->params = p->master + (lo - p->master_lo);
    aw->grads = p->grads + (lo - p->grads_lo);
    aw->m = p->moment1;
    aw->v = p->moment2;
    aw->params_lowp = low;
    aw->lowp_dtype = e->dtype;
    if (!aw->n_segments) return ESMT_OK;
    bs = e->ops->adamw ? e->ops->adamw(e->dev, aw, e->stream) : ESMT_ERR_UNSUPPORTED;
  }
  /* a host frozen master: the kernels read the LayerNorm w/b that train
   * from norm_dev, which follows the step (stream-ordered) */
  if (!bs && p->frozen_host) return esmt_param_norms_from_master(p, lo, p->opt_hi);
  /* the backend's message names its op; the caller adds its own name */
  return (esmt_status)bs;
}

static void dev_release(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  esmt_param_frozen_release(p);
  void *bufs[] = {p->master, p->grads, p->moment1, p->moment2, p->compute_lowp};
  for (size_t i = 0; e->dev && i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) e->ops->free(e->dev, ESMTB_MEM_DEVICE, bufs[i]);
  memset(p, 0, sizeof *p);
}

const esmt_param_layer esmt_device_layer = {
    "device",       dev_sync_compute, dev_copy,       dev_weights_needed, dev_grads_changed,
    esmt_param_zero_device_grads,     dev_grads_ready, dev_ok,            dev_ok,
    dev_cancel,     dev_grad_sumsq,   dev_step,        dev_release,
};
