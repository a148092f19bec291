/* SPDX-License-Identifier: MIT */
/* CPU kernel: AdamW over segments of the flat fp32 buffers. Memory bound
 * (28 bytes per parameter); one vectorised pass, threads split each
 * segment. This is also the host optimizer used under GPU offload. The
 * optional weight copy params_lowp is written in lowp_dtype (F32/F16/BF16). */
#include <math.h>
#include <string.h>

#include <omp.h>

#include "cpu_half.h"
#include "cpu_math.h"
#include "isa_kernels.h"

esmtb_status cpu_adamw(esmtb_device *dev, const esmtb_adamw_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || !a->params || !a->grads || !a->m || !a->v || (a->n_segments && !a->segments))
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu adamw: NULL argument");
  if (a->step < 1) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu adamw: step must be >= 1");
  if (a->params_lowp && !cpu_act_dtype(a->lowp_dtype))
    return cpu_fail(ESMTB_ERR_UNSUPPORTED, "cpu adamw: lowp_dtype %d is not f32, f16 or bf16", (int)a->lowp_dtype);
  const float b1 = a->beta1, b2 = a->beta2, eps = a->eps, lr = a->lr, gs = a->grad_scale;
  const float bc1 = (float)(1.0 - pow((double)b1, (double)a->step));
  const float bc2 = (float)(1.0 - pow((double)b2, (double)a->step));
  /* p -= lr * (wd p + (m / bc1) / (sqrt(v / bc2) + eps)), rearranged so the
   * loop has one sqrt and one division. */
  const float step_size = lr / bc1, inv_sqrt_bc2 = 1.0f / sqrtf(bc2);
  for (int sgi = 0; sgi < a->n_segments; sgi++) {
    const esmtb_segment seg = a->segments[sgi];
    float *p = a->params + seg.offset, *m = a->m + seg.offset, *v = a->v + seg.offset;
    const float *g = a->grads + seg.offset;
    const cpu_adamw_consts k = {b1, b2, eps, gs, step_size, inv_sqrt_bc2,
                                1.0f - lr * seg.weight_decay};
    const cpu_isa_elementwise *kern = cpu_isa()->elementwise;
    void *low = a->params_lowp;
#pragma omp parallel num_threads(dev->num_threads)
    {
      size_t b, e;
      cpu_chunk(seg.count, omp_get_num_threads(), omp_get_thread_num(), &b, &e);
      kern->adamw(p + b, g + b, m + b, v + b, (long)(e - b), &k);
      /* the weight copy the forward pass reads (rounded when half) */
      if (low) cpu_half_store(p + b, low, a->lowp_dtype, seg.offset + b, (long)(e - b));
    }
  }
  return 0;
}
