/* ZeRO-1 support in the model: moments for a shard of the flat buffer, and
 * the gradient sum of squares of a range (see dp_zero.c). */
#include <stdlib.h>

#include "model.h"

static esmtb_status alloc_zeroed(esmt_model *m, uint64_t n, float **out) {
  const uint64_t bytes = (n ? n : 1) * sizeof(float);
  esmtb_status bs = m->ops->alloc(m->dev, ESMTB_MEM_DEVICE, bytes, (void **)out);
  if (!bs) bs = m->ops->memset_async(m->dev, *out, 0, bytes, m->stream);
  return bs;
}

esmt_status esmt_model_shard_optimizer(esmt_model *m, uint64_t lo, uint64_t hi) {
  const char *fn = "esmt_model_shard_optimizer";
  if (m->mem.offload)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: not with optimizer offload", fn);
  if (lo > hi || hi > m->layout.total || lo < m->mem.opt_lo || hi > m->mem.opt_hi)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: [%llu, %llu) is not within the held "
                     "[%llu, %llu)", fn, (unsigned long long)lo, (unsigned long long)hi,
                     (unsigned long long)m->mem.opt_lo, (unsigned long long)m->mem.opt_hi);
  if (lo == m->mem.opt_lo && hi == m->mem.opt_hi) return ESMT_OK;
  const uint64_t n = hi - lo, skip = lo - m->mem.opt_lo;
  float *nm = NULL, *nv = NULL;
  esmtb_status bs = alloc_zeroed(m, n, &nm);
  if (!bs && m->mem.moment2) bs = alloc_zeroed(m, n, &nv); /* AdamW's second moment; Lion has none */
  /* keep the current values (a checkpoint may have been loaded) */
  if (!bs && n) bs = m->ops->copy_async(m->dev, nm, m->mem.moment1 + skip, n * sizeof(float),
                                        ESMTB_COPY_D2D, m->stream);
  if (!bs && n && nv) bs = m->ops->copy_async(m->dev, nv, m->mem.moment2 + skip, n * sizeof(float),
                                        ESMTB_COPY_D2D, m->stream);
  if (!bs) bs = m->ops->stream_sync(m->dev, m->stream);
  if (bs) {
    if (nm) m->ops->free(m->dev, ESMTB_MEM_DEVICE, nm);
    if (nv) m->ops->free(m->dev, ESMTB_MEM_DEVICE, nv);
    return esmt_fail_prefix((esmt_status)bs, "%s: ", fn);
  }
  m->ops->free(m->dev, ESMTB_MEM_DEVICE, m->mem.moment1);
  if (m->mem.moment2) m->ops->free(m->dev, ESMTB_MEM_DEVICE, m->mem.moment2);
  m->mem.moment1 = nm;
  m->mem.moment2 = nv;
  m->mem.opt_lo = lo;
  m->mem.opt_hi = hi;
  return ESMT_OK;
}

esmt_status esmt_model_grad_sumsq(esmt_model *m, uint64_t lo, uint64_t hi, float *sum) {
  *sum = 0.0f;
  if (hi <= lo) return ESMT_OK;
  esmtb_sumsq_args s = {sizeof s, hi - lo, m->mem.grads + lo, m->scalar};
  esmtb_status bs = m->ops->memset_async(m->dev, m->scalar, 0, sizeof(float), m->stream);
  if (!bs) bs = m->ops->sumsq ? m->ops->sumsq(m->dev, &s, m->stream) : ESMT_ERR_UNSUPPORTED;
  if (!bs) bs = m->ops->copy_async(m->dev, sum, m->scalar, sizeof *sum, ESMTB_COPY_D2H, m->stream);
  if (!bs) bs = m->ops->stream_sync(m->dev, m->stream);
  return bs ? esmt_fail_prefix((esmt_status)bs, "gradient norm: ") : ESMT_OK;
}
