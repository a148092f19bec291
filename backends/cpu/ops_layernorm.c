/* CPU kernels: LayerNorm forward and backward (fp32, biased variance). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu_math.h"
#include "cpu_ops.h"

esmtb_status cpu_layernorm_forward(esmtb_device *dev, const esmtb_layernorm_args *a,
                                   esmtb_stream *s) {
  (void)s;
  if (!a || !a->x || !a->w || !a->b || !a->out || !a->mean || !a->rstd || a->N < 0 || a->d <= 0)
    return cpu_fail(1, "cpu layernorm_forward: bad arguments");
  CPU_REQUIRE_F32(a->dtype, "layernorm_forward");
  const int N = a->N, d = a->d;
  const float *x = a->x, *w = a->w, *b = a->b;
  float *out = a->out;
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
  for (int r = 0; r < N; r++) {
    const float *xr = x + (size_t)r * d;
    float *o = out + (size_t)r * d;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < d; c++) sum += xr[c];
    const float mean = sum / (float)d;
    float var = 0.0f; /* two passes: no cancellation */
#pragma omp simd reduction(+ : var)
    for (int c = 0; c < d; c++) var += (xr[c] - mean) * (xr[c] - mean);
    const float rstd = 1.0f / sqrtf(var / (float)d + a->eps);
#pragma omp simd
    for (int c = 0; c < d; c++) o[c] = (xr[c] - mean) * rstd * w[c] + b[c];
    a->mean[r] = mean;
    a->rstd[r] = rstd;
  }
  return 0;
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * w.
 * dw and db are summed per thread over a fixed row range, then added in
 * thread order: deterministic for a given thread count. */
esmtb_status cpu_layernorm_backward(esmtb_device *dev, const esmtb_layernorm_args *a,
                                    esmtb_stream *s) {
  (void)s;
  if (!a || !a->x || !a->w || !a->dout || !a->dx || !a->dw || !a->db || !a->mean || !a->rstd ||
      a->N < 0 || a->d <= 0)
    return cpu_fail(1, "cpu layernorm_backward: bad arguments");
  CPU_REQUIRE_F32(a->dtype, "layernorm_backward");
  const int N = a->N, d = a->d, nt = dev->num_threads;
  float *partial = calloc((size_t)nt * 2 * (size_t)d, sizeof *partial);
  if (!partial) return cpu_fail(2, "cpu layernorm_backward: out of memory");
  const float *x = a->x, *w = a->w, *dout = a->dout;
  float *dx = a->dx;
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num();
    size_t r0, r1;
    cpu_chunk((size_t)N, nt, t, &r0, &r1);
    float *pw = partial + (size_t)t * 2 * d, *pb = pw + d;
    for (size_t r = r0; r < r1; r++) {
      const float *xr = x + r * d, *g = dout + r * d;
      float *dxr = dx + r * d;
      const float mean = a->mean[r], rstd = a->rstd[r];
      float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
      for (int c = 0; c < d; c++) {
        float xhat = (xr[c] - mean) * rstd;
        float gw = g[c] * w[c];
        sg += gw;
        sgx += gw * xhat;
        pw[c] += g[c] * xhat;
        pb[c] += g[c];
      }
      sg /= (float)d;
      sgx /= (float)d;
      if (a->accumulate_dx) {
#pragma omp simd
        for (int c = 0; c < d; c++)
          dxr[c] += rstd * (g[c] * w[c] - sg - (xr[c] - mean) * rstd * sgx);
      } else {
#pragma omp simd
        for (int c = 0; c < d; c++)
          dxr[c] = rstd * (g[c] * w[c] - sg - (xr[c] - mean) * rstd * sgx);
      }
    }
  }
  for (int t = 0; t < nt; t++) {
    const float *pw = partial + (size_t)t * 2 * d, *pb = pw + d;
    for (int c = 0; c < d; c++) {
      a->dw[c] += pw[c];
      a->db[c] += pb[c];
    }
  }
  free(partial);
  return 0;
}
