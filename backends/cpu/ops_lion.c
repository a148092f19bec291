/* SPDX-License-Identifier: MIT */
/* CPU kernel: Lion over segments of the flat fp32 buffers (backend.h,
 * esmtb_lion_args). Memory bound like AdamW but one moment: 16 bytes per
 * parameter read and written instead of 28. Threads split each segment;
 * also the host optimizer under GPU offload. The optional weight copy
 * params_lowp is written in lowp_dtype (F32/F16/BF16). */
#include <string.h>

#include <omp.h>

#include "cpu_half.h"
#include "cpu_math.h"

/* One chunk: plain C the compiler vectorises (the sign is two compares). */
static void lion_chunk(float *restrict p, const float *restrict g, float *restrict m, long n,
                       float b1, float b2, float gs, float lr, float decay) {
#pragma omp simd
  for (long i = 0; i < n; i++) {
    const float gi = g[i] * gs;
    const float c = b1 * m[i] + (1.0f - b1) * gi;
    const float u = (float)(c > 0.0f) - (float)(c < 0.0f);
    m[i] = b2 * m[i] + (1.0f - b2) * gi;
    p[i] = p[i] * decay - lr * u;
  }
}

esmtb_status cpu_lion(esmtb_device *dev, const esmtb_lion_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || !a->params || !a->grads || !a->m || (a->n_segments && !a->segments))
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu lion: NULL argument");
  if (a->n_segments < 0)
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu lion: n_segments %d is negative", a->n_segments);
  if (a->params_lowp && !cpu_act_dtype(a->lowp_dtype))
    return cpu_fail(ESMTB_ERR_UNSUPPORTED, "cpu lion: lowp_dtype %d is not f32, f16 or bf16",
                    (int)a->lowp_dtype);
  for (int sgi = 0; sgi < a->n_segments; sgi++) {
    const esmtb_segment seg = a->segments[sgi];
    float *p = a->params + seg.offset, *m = a->m + seg.offset;
    const float *g = a->grads + seg.offset;
    const float decay = 1.0f - a->lr * seg.weight_decay;
    void *low = a->params_lowp;
#pragma omp parallel num_threads(dev->num_threads)
    {
      size_t b, e;
      cpu_chunk(seg.count, omp_get_num_threads(), omp_get_thread_num(), &b, &e);
      lion_chunk(p + b, g + b, m + b, (long)(e - b), a->beta1, a->beta2, a->grad_scale, a->lr,
                 decay);
      if (low) cpu_half_store(p + b, low, a->lowp_dtype, seg.offset + b, (long)(e - b));
    }
  }
  return 0;
}
