/* SPDX-License-Identifier: MIT */
/* ZeRO-1 in the parameter memory: moments for a shard of the flat buffer,
 * and the gradient sum of squares of a range (see dist/dp_zero.c). */
#include <stdlib.h>

#include "esmtrain/backend.h"
#include "param_layer.h"

static esmtb_status alloc_zeroed(const esmt_param_env *e, uint64_t n, float **out) {
  const uint64_t bytes = (n ? n : 1) * sizeof(float);
  esmtb_status bs = e->ops->alloc(e->dev, ESMTB_MEM_DEVICE, bytes, (void **)out);
  if (!bs) bs = e->ops->memset_async(e->dev, *out, 0, bytes, e->stream);
  return bs;
}

esmt_status esmt_param_shard_optimizer(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  const char *fn = "esmt_model_shard_optimizer";
  const esmt_param_env *e = &p->env;
  if (p->offload)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: not with optimizer offload", fn);
  if (lo > hi || hi > e->total || lo < p->opt_lo || hi > p->opt_hi)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: [%llu, %llu) is not within the held "
                     "[%llu, %llu)", fn, (unsigned long long)lo, (unsigned long long)hi,
                     (unsigned long long)p->opt_lo, (unsigned long long)p->opt_hi);
  if (lo == p->opt_lo && hi == p->opt_hi) return ESMT_OK;
  const uint64_t n = hi - lo, skip = lo - p->opt_lo;
  float *nm = NULL, *nv = NULL;
  esmtb_status bs = alloc_zeroed(e, n, &nm);
  if (!bs && p->moment2) bs = alloc_zeroed(e, n, &nv); /* AdamW's second moment; Lion has none */
  /* keep the current values (a checkpoint may have been loaded) */
  if (!bs && n) bs = e->ops->copy_async(e->dev, nm, p->moment1 + skip, n * sizeof(float),
                                        ESMTB_COPY_D2D, e->stream);
  if (!bs && n && nv) bs = e->ops->copy_async(e->dev, nv, p->moment2 + skip, n * sizeof(float),
                                              ESMTB_COPY_D2D, e->stream);
  if (!bs) bs = e->ops->stream_sync(e->dev, e->stream);
  if (bs) {
    if (nm) e->ops->free(e->dev, ESMTB_MEM_DEVICE, nm);
    if (nv) e->ops->free(e->dev, ESMTB_MEM_DEVICE, nv);
    return esmt_fail_prefix((esmt_status)bs, "%s: ", fn);
  }
  e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->moment1);
  if (p->moment2) e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->moment2);
  p->moment1 = nm;
  p->moment2 = nv;
  p->opt_lo = lo;
  p->opt_hi = hi;
  return ESMT_OK;
}

esmt_status esmt_param_grad_sumsq_range(esmt_param_memory *p, uint64_t lo, uint64_t hi,
                                        float *sum) {
  const esmt_param_env *e = &p->env;
  *sum = 0.0f;
  if (hi <= lo) return ESMT_OK;
  esmtb_sumsq_args s = {sizeof s, hi - lo, p->grads + lo, e->scratch};
  esmtb_status bs = e->ops->memset_async(e->dev, e->scratch, 0, sizeof(float), e->stream);
  if (!bs) bs = e->ops->sumsq ? e->ops->sumsq(e->dev, &s, e->stream) : ESMT_ERR_UNSUPPORTED;
  if (!bs) bs = e->ops->copy_async(e->dev, sum, e->scratch, sizeof *sum, ESMTB_COPY_D2H, e->stream);
  if (!bs) bs = e->ops->stream_sync(e->dev, e->stream);
  return bs ? esmt_fail_prefix((esmt_status)bs, "gradient norm: ") : ESMT_OK;
}
