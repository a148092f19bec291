/* CPU kernels: LayerNorm forward and backward (fp32, biased variance). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu_math.h"
#include "cpu_ops.h"
#include "isa_kernels.h"

esmtb_status cpu_layernorm_forward(esmtb_device *dev, const esmtb_layernorm_args *a,
                                   esmtb_stream *s) {
  (void)s;
  if (!a || !a->x || !a->w || !a->b || !a->out || !a->mean || !a->rstd || a->N < 0 || a->d <= 0)
    return cpu_fail(1, "cpu layernorm_forward: bad arguments");
  CPU_REQUIRE_F32(a->dtype, "layernorm_forward");
  const int N = a->N, d = a->d;
  const float *x = a->x, *w = a->w, *b = a->b;
  float *out = a->out;
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
  for (int r = 0; r < N; r++)
    k->layernorm_row(x + (size_t)r * d, w, b, out + (size_t)r * d, d, a->eps, &a->mean[r],
                     &a->rstd[r]);
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
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
#pragma omp parallel num_threads(nt)
  {
    /* Chunk by the threads OpenMP actually gave us (never more than nt). */
    int t = omp_get_thread_num();
    size_t r0, r1;
    cpu_chunk((size_t)N, omp_get_num_threads(), t, &r0, &r1);
    float *pw = partial + (size_t)t * 2 * d, *pb = pw + d;
    for (size_t r = r0; r < r1; r++)
      k->layernorm_back_row(x + r * d, w, dout + r * d, a->mean[r], a->rstd[r], dx + r * d,
                            a->accumulate_dx, pw, pb, d);
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
