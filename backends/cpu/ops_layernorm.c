/* SPDX-License-Identifier: MIT */
/* CPU kernels: LayerNorm forward and backward (fp32 math, biased
 * variance). x/out/dout/dx are in the args' dtype, half rows going through
 * per-thread fp32 scratch (cpu_half.h); w, b, mean, rstd, dw, db are fp32. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu_half.h"
#include "cpu_math.h"
#include "isa_kernels.h"

esmtb_status cpu_layernorm_forward(esmtb_device *dev, const esmtb_layernorm_args *a,
                                   esmtb_stream *s) {
  (void)s;
  if (!a || !a->x || !a->w || !a->b || !a->out || !a->mean || !a->rstd || a->N < 0 || a->d <= 0)
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu layernorm_forward: bad arguments");
  CPU_REQUIRE_ACT(a->dtype, "layernorm_forward");
  const int N = a->N, d = a->d;
  const esmtb_dtype dt = a->dtype;
  const size_t per = 2 * (size_t)d; /* a row of x and one of out */
  float *scratch = dt == ESMTB_F32 ? NULL : cpu_scratch_alloc(dev->num_threads, per);
  if (dt != ESMTB_F32 && !scratch) return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu layernorm_forward: out of memory");
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
#pragma omp parallel num_threads(dev->num_threads)
  {
    float *tx = scratch ? cpu_scratch_slice(scratch, per, omp_get_thread_num()) : NULL;
    float *to = tx ? tx + d : NULL;
#pragma omp for schedule(static)
    for (int r = 0; r < N; r++) {
      const size_t at = (size_t)r * d;
      float *o = cpu_out(a->out, dt, at, to);
      k->layernorm_row(cpu_in(a->x, dt, at, d, tx), a->w, a->b, o, d, a->eps, &a->mean[r],
                       &a->rstd[r]);
      cpu_out_done(a->out, dt, at, to, d);
    }
  }
  free(scratch);
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
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu layernorm_backward: bad arguments");
  CPU_REQUIRE_ACT(a->dtype, "layernorm_backward");
  const int N = a->N, d = a->d, nt = dev->num_threads;
  const esmtb_dtype dt = a->dtype;
  const size_t per = 3 * (size_t)d; /* rows of x, dout and dx */
  float *partial = calloc((size_t)nt * 2 * (size_t)d, sizeof *partial);
  float *scratch = dt == ESMTB_F32 ? NULL : cpu_scratch_alloc(nt, per);
  if (!partial || (dt != ESMTB_F32 && !scratch)) {
    free(partial);
    free(scratch);
    return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu layernorm_backward: out of memory");
  }
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
#pragma omp parallel num_threads(nt)
  {
    /* Chunk by the threads OpenMP actually gave us (never more than nt). */
    int t = omp_get_thread_num();
    size_t r0, r1;
    cpu_chunk((size_t)N, omp_get_num_threads(), t, &r0, &r1);
    float *pw = partial + (size_t)t * 2 * d, *pb = pw + d;
    float *tx = scratch ? cpu_scratch_slice(scratch, per, t) : NULL;
    float *tg = tx ? tx + d : NULL, *tdx = tx ? tx + 2 * d : NULL;
    for (size_t r = r0; r < r1; r++) {
      const size_t at = r * d;
      float *dx = cpu_out(a->dx, dt, at, tdx);
      if (a->accumulate_dx && dt != ESMTB_F32) cpu_half_load(a->dx, dt, at, tdx, d);
      k->layernorm_back_row(cpu_in(a->x, dt, at, d, tx), a->w, cpu_in(a->dout, dt, at, d, tg),
                            a->mean[r], a->rstd[r], dx, a->accumulate_dx, pw, pb, d);
      cpu_out_done(a->dx, dt, at, tdx, d);
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
  free(scratch);
  return 0;
}
