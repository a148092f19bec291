/* The device layer of the parameter memory (param_layer.h): every buffer
 * in the backend's device memory, the kernels reading the master itself
 * (fp32) or its half copy; and the setup that picks a layer. */
#include "param_layer.h"

#include <string.h>

#include "offload.h"
#include "optimizer.h"
#include "registry.h"

esmt_status esmt_param_dev_alloc(esmt_model *m, uint64_t bytes, void **out, const char *what) {
  esmtb_status st = m->ops->alloc(m->dev, ESMTB_MEM_DEVICE, bytes, out);
  if (!st) return ESMT_OK;
  esmt_fail_prefix((esmt_status)st, "esmt_model_create: %s (%.1f MiB): ", what,
                   (double)bytes / 1048576.0);
  return esmt_oom_advice(m, (esmt_status)st, 0, 0);
}

static esmt_status zero(esmt_model *m, void *buf, uint64_t bytes) {
  esmtb_status bs = buf ? m->ops->memset_async(m->dev, buf, 0, bytes, m->stream) : 0;
  return bs ? esmt_fail_prefix((esmt_status)bs, "esmt_model_create: ") : ESMT_OK;
}

esmt_status esmt_param_memory_setup(esmt_model *m, const esmt_offload_options *o) {
  esmt_param_memory *p = &m->mem;
  const uint64_t bytes = m->layout.total * sizeof(float);
  p->opt_lo = 0;
  p->opt_hi = m->layout.total;
  p->layer = o && o->enabled ? &esmt_offload_layer : &esmt_device_layer;
  esmt_status st = ESMT_OK;
  if (o && o->enabled) { /* host master and moments, device compute weights (offload.c) */
    st = esmt_offload_setup(m, o);
  } else {
    const int nstate = esmt_optimizer_state_count(m->cfg.optimizer);
    st = esmt_param_dev_alloc(m, bytes, (void **)&p->master, "parameters");
    p->compute32 = p->master;
    if (!st) st = esmt_param_dev_alloc(m, bytes, (void **)&p->moment1, "optimizer first moments");
    if (!st && nstate > 1)
      st = esmt_param_dev_alloc(m, bytes, (void **)&p->moment2, "AdamW second moments");
    if (!st && m->dtype != ESMTB_F32)
      st = esmt_param_dev_alloc(m, m->layout.total * m->esize, &p->compute_lowp,
                                "half-precision weight copy");
    if (!st) st = zero(m, p->moment1, bytes);
    if (!st) st = zero(m, p->moment2, bytes);
  }
  if (!st) st = esmt_param_dev_alloc(m, bytes, (void **)&p->grads, "gradients");
  if (!st) st = zero(m, p->grads, bytes);
  return st;
}

static esmt_status dev_sync_compute(esmt_model *m, uint64_t off, uint64_t count) {
  if (!m->mem.compute_lowp) return ESMT_OK; /* fp32: the kernels read the master */
  esmtb_convert_args c = {sizeof c, count, m->mem.master + off, ESMTB_F32,
                          (char *)m->mem.compute_lowp + off * m->esize, m->dtype};
  ESMT_OP(m, convert, c, "refreshing the half-precision weight copy");
  esmtb_status ss = m->ops->stream_sync(m->dev, m->stream);
  if (ss) return esmt_fail_prefix((esmt_status)ss, "refreshing the half-precision weight copy: ");
  m->have_forward = 0;
  return ESMT_OK;
}

static esmt_status dev_copy(esmt_model *m, void *host, void *buf, uint64_t bytes, int to_buf) {
  esmtb_status cs = to_buf
      ? m->ops->copy_async(m->dev, buf, host, bytes, ESMTB_COPY_H2D, m->stream)
      : m->ops->copy_async(m->dev, host, buf, bytes, ESMTB_COPY_D2H, m->stream);
  if (!cs) cs = m->ops->stream_sync(m->dev, m->stream);
  return cs ? esmt_fail_prefix((esmt_status)cs, "copy: ") : ESMT_OK;
}

static void dev_grads_changed(esmt_model *m) { (void)m; }
static esmt_status dev_ok(esmt_model *m) { (void)m; return ESMT_OK; }
static void dev_cancel(esmt_model *m) { (void)m; }
static esmt_status dev_grads_ready(esmt_model *m, uint64_t from) {
  (void)m;
  (void)from;
  return ESMT_OK;
}

static esmt_status dev_grad_sumsq(esmt_model *m, float *sum) {
  esmtb_sumsq_args s = {sizeof s, m->layout.total, m->mem.grads, m->scalar};
  esmtb_status bs = m->ops->memset_async(m->dev, m->scalar, 0, sizeof(float), m->stream);
  if (!bs) bs = m->ops->sumsq ? m->ops->sumsq(m->dev, &s, m->stream) : ESMT_ERR_UNSUPPORTED;
  if (!bs) bs = m->ops->copy_async(m->dev, sum, m->scalar, sizeof *sum, ESMTB_COPY_D2H, m->stream);
  if (!bs) bs = m->ops->stream_sync(m->dev, m->stream);
  return bs ? esmt_fail_prefix((esmt_status)bs, "gradient norm: ") : ESMT_OK;
}

/* The backend's op on the device buffers; the half copy is written by the
 * op itself (params_lowp). */
static esmt_status dev_step(esmt_model *m, esmtb_adamw_args *aw, esmtb_lion_args *al) {
  esmtb_status bs = 0;
  if (al) {
    al->m = m->mem.moment1;
    if (!al->n_segments) return ESMT_OK;
    if (!esmt_ops_has_lion(m->ops))
      return esmt_fail(ESMT_ERR_UNSUPPORTED, "backend %s (ABI %u.%u) has no Lion op (ABI 1.4): "
                       "use optimizer.kind adamw", m->ops->name, (unsigned)m->ops->abi_major,
                       (unsigned)m->ops->abi_minor);
    bs = m->ops->lion(m->dev, al, m->stream);
  } else {
    aw->m = m->mem.moment1;
    aw->v = m->mem.moment2;
    if (!aw->n_segments) return ESMT_OK;
    bs = m->ops->adamw ? m->ops->adamw(m->dev, aw, m->stream) : ESMT_ERR_UNSUPPORTED;
  }
  /* the backend's message names its op; the caller adds its own name */
  return (esmt_status)bs;
}

static void dev_release(esmt_model *m) {
  esmt_param_memory *p = &m->mem;
  void *bufs[] = {p->master, p->grads, p->moment1, p->moment2, p->compute_lowp};
  for (size_t i = 0; m->dev && i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) m->ops->free(m->dev, ESMTB_MEM_DEVICE, bufs[i]);
  memset(p, 0, sizeof *p);
}

const esmt_param_layer esmt_device_layer = {
    "device",      dev_sync_compute, dev_copy, dev_grads_changed, dev_grads_ready, dev_ok,
    dev_ok,        dev_cancel,       dev_grad_sumsq, dev_step,    dev_release,
};
