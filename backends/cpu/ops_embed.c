/* CPU kernels: token embedding with ESM-2 token dropout, and its backward.
 * E, out and dout are in the args' dtype (half rows go through fp32
 * scratch, cpu_half.h); row_scale and dE are fp32. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_half.h"

static int valid(const esmtb_embed_args *a) {
  return a && a->tokens && a->E && a->row_scale && a->B > 0 && a->T > 0 && a->d > 0;
}

/* The vocabulary size is not passed, so only negative ids can be caught. */
static int first_negative(const esmtb_embed_args *a) {
  for (int r = 0; r < a->B * a->T; r++)
    if (a->tokens[r] < 0) return r;
  return -1;
}

esmtb_status cpu_embed_forward(esmtb_device *dev, const esmtb_embed_args *a, esmtb_stream *s) {
  (void)s;
  if (!valid(a) || !a->out) return cpu_fail(1, "cpu embed_forward: bad arguments");
  CPU_REQUIRE_ACT(a->dtype, "embed_forward");
  const int bad = first_negative(a);
  if (bad >= 0) return cpu_fail(1, "cpu embed_forward: token %d is %d", bad, a->tokens[bad]);
  const int B = a->B, T = a->T, d = a->d;
  const int32_t *tok = a->tokens;
  const esmtb_dtype dt = a->dtype;
  /* s_b = (1 - ratio_train) / (1 - masked_b / nonpad_b), cls/eos counted. */
  for (int b = 0; b < B; b++) {
    int nonpad = 0, masked = 0;
    for (int t = 0; t < T; t++) {
      nonpad += tok[b * T + t] != a->pad_id;
      masked += tok[b * T + t] == a->mask_id;
    }
    double observed = nonpad ? (double)masked / nonpad : 0.0;
    a->row_scale[b] = (float)((1.0 - (double)a->mask_ratio_train) / (1.0 - observed));
  }
  const size_t per = 2 * (size_t)d; /* one row of E and one of out */
  float *scratch = dt == ESMTB_F32 ? NULL : cpu_scratch_alloc(dev->num_threads, per);
  if (dt != ESMTB_F32 && !scratch) return cpu_fail(2, "cpu embed_forward: out of memory");
#pragma omp parallel num_threads(dev->num_threads)
  {
    float *te = scratch ? cpu_scratch_slice(scratch, per, omp_get_thread_num()) : NULL;
    float *to = te ? te + d : NULL;
#pragma omp for schedule(static)
    for (int r = 0; r < B * T; r++) {
      int32_t id = tok[r];
      if (id == a->mask_id || id == a->pad_id) {
        cpu_zero(a->out, dt, (size_t)r * d, (size_t)d);
        continue;
      }
      const float *e = cpu_in(a->E, dt, (size_t)id * d, d, te);
      float *o = cpu_out(a->out, dt, (size_t)r * d, to);
      const float sc = a->row_scale[r / T];
#pragma omp simd
      for (int c = 0; c < d; c++) o[c] = e[c] * sc;
      cpu_out_done(a->out, dt, (size_t)r * d, to, d);
    }
  }
  free(scratch);
  return 0;
}

/* Each thread owns a slice of columns of dE, so the scatter-add needs no
 * atomics and sums in row order (deterministic). */
CPU_FORCE_INLINE void embed_backward_cols(esmtb_dtype dt, const esmtb_embed_args *a, int c0,
                                          int c1) {
  const int T = a->T, d = a->d;
  for (int r = 0; r < a->B * T; r++) {
    int32_t id = a->tokens[r];
    if (id == a->mask_id || id == a->pad_id) continue;
    const float sc = a->row_scale[r / T];
    float tmp[32];
    const float *g = cpu_in(a->dout, dt, (size_t)r * d + c0, c1 - c0, tmp);
    float *row = a->dE + (size_t)id * d + c0;
#pragma omp simd
    for (int c = 0; c < c1 - c0; c++) row[c] += g[c] * sc;
  }
}

esmtb_status cpu_embed_backward(esmtb_device *dev, const esmtb_embed_args *a, esmtb_stream *s) {
  (void)s;
  if (!valid(a) || !a->dout || !a->dE) return cpu_fail(1, "cpu embed_backward: bad arguments");
  CPU_REQUIRE_ACT(a->dtype, "embed_backward");
  const int bad = first_negative(a);
  if (bad >= 0) return cpu_fail(1, "cpu embed_backward: token %d is %d", bad, a->tokens[bad]);
  const int d = a->d, block = 32, nblocks = (d + block - 1) / block;
  const esmtb_dtype dt = a->dtype;
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
  for (int bi = 0; bi < nblocks; bi++) {
    const int c0 = bi * block, c1 = c0 + block < d ? c0 + block : d;
    CPU_BY_DTYPE(dt, embed_backward_cols, a, c0, c1);
  }
  return 0;
}
