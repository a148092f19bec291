/* SPDX-License-Identifier: MIT */
/* Compute precision: choosing the dtype a backend computes in, and the
 * half-precision weight copy (the conversions are backend/dtype.c's). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops_table.h"
#include "model.h"
#include "param_layer.h"

esmt_status esmt_resolve_precision(const esmtb_ops *ops, int precision, esmtb_dtype *dtype) {
  const uint32_t caps = ops->caps;
  esmtb_dtype t;
  switch (precision) {
    case ESMT_PRECISION_AUTO:
      /* A host-memory backend is a CPU: half precision there only adds
       * conversions, so its best is fp32 (half stays available on request). */
      t = (caps & ESMTB_CAP_HOST_ADDRESSABLE) ? ESMTB_F32
        : (caps & ESMTB_CAP_BF16)             ? ESMTB_BF16
        : (caps & ESMTB_CAP_F16)              ? ESMTB_F16 : ESMTB_F32;
      break;
    case ESMT_PRECISION_FP32: t = ESMTB_F32; break;
    case ESMT_PRECISION_FP16: t = ESMTB_F16; break;
    case ESMT_PRECISION_BF16: t = ESMTB_BF16; break;
    default:
      return esmt_fail(ESMT_ERR_CONFIG, "model config: precision %d is not one of auto, fp32, "
                       "fp16, bf16", precision);
  }
  *dtype = t;
  if (t == ESMTB_F32) return ESMT_OK; /* every backend computes in fp32 (the ABI's baseline) */
  uint32_t need = t == ESMTB_F16 ? ESMTB_CAP_F16 : ESMTB_CAP_BF16;
  if (!(caps & need)) {
    char list[32] = "";
    static const struct { uint32_t cap; const char *name; } k[] = {
        {ESMTB_CAP_F32, "fp32"}, {ESMTB_CAP_F16, "fp16"}, {ESMTB_CAP_BF16, "bf16"}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
      if (caps & k[i].cap)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", *list ? ", " : "",
                 k[i].name);
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "backend %s cannot compute in %s (caps: %s)",
                     ops->name, esmt_dtype_name(t), *list ? list : "none");
  }
  if (!ops->convert)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "backend %s has no convert op, which %s training "
                     "needs for its weight copy", ops->name, esmt_dtype_name(t));
  return ESMT_OK;
}

esmt_status esmt_model_sync_lowp(esmt_model *m, uint64_t offset, uint64_t count) {
  m->have_forward = 0; /* the weights the kernels read change */
  return m->mem.layer->sync_compute(&m->mem, offset, count); /* memory/param_layer.h */
}
