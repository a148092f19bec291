/* SPDX-License-Identifier: MIT */
/* What every layer of the parameter memory does on the device alike: an
 * allocation that names what it is for (and lets the owner answer a device
 * out-of-memory), and fp32 host weights uploaded into a buffer of the
 * compute dtype. It calls nothing else of memory/, so the layers and the
 * ZeRO files all stand on it. */
#include "esmtrain/backend.h"
#include "param_layer.h"

#include "registry.h"

esmt_status esmt_param_dev_alloc(const esmt_param_env *env, uint64_t bytes, void **out,
                                 const char *what) {
  esmtb_status st = env->ops->alloc(env->dev, ESMTB_MEM_DEVICE, bytes, out);
  if (!st) return ESMT_OK;
  esmt_fail_prefix((esmt_status)st, "esmt_model_create: %s (%.1f MiB): ", what,
                   (double)bytes / 1048576.0);
  return env->device_oom ? env->device_oom(env->owner, (esmt_status)st) : (esmt_status)st;
}

esmt_status esmt_param_upload_converted(esmt_param_memory *p, void *dst, const float *host,
                                       uint64_t n) {
  const esmt_param_env *e = &p->env;
  if (!n) return ESMT_OK;
  if (e->dtype == ESMTB_F32) {
    esmtb_status bs = e->ops->copy_async(e->dev, dst, host, n * sizeof(float), ESMTB_COPY_H2D,
                                         e->stream);
    if (!bs) bs = e->ops->stream_sync(e->dev, e->stream);
    return bs ? esmt_fail_prefix((esmt_status)bs, "uploading weights: ") : ESMT_OK;
  }
  if (!e->ops->convert)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "uploading weights: backend %s does not implement "
                     "convert", e->ops->name);
  enum { CHUNK = 1 << 20 }; /* elements staged at a time */
  const uint64_t stage_n = n < CHUNK ? n : CHUNK;
  float *stage = NULL;
  esmt_status st = esmt_param_dev_alloc(e, stage_n * sizeof(float), (void **)&stage,
                                        "weight staging buffer");
  if (st) return st;
  esmtb_status bs = 0;
  for (uint64_t at = 0; !bs && at < n; at += stage_n) {
    const uint64_t k = n - at < stage_n ? n - at : stage_n;
    bs = e->ops->copy_async(e->dev, stage, host + at, k * sizeof(float), ESMTB_COPY_H2D,
                            e->stream);
    esmtb_convert_args c = {sizeof c, k, stage, ESMTB_F32, (char *)dst + at * e->esize, e->dtype};
    if (!bs) bs = e->ops->convert(e->dev, &c, e->stream);
    if (!bs) bs = e->ops->stream_sync(e->dev, e->stream); /* the stage is reused */
  }
  e->ops->free(e->dev, ESMTB_MEM_DEVICE, stage);
  return bs ? esmt_fail_prefix((esmt_status)bs, "uploading weights: ") : ESMT_OK;
}
