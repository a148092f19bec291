/* CPU kernels: token embedding with ESM-2 token dropout, and its backward. */
#include "cpu_ops.h"

#include <string.h>

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
  CPU_REQUIRE_F32(a->dtype, "embed_forward");
  const int bad = first_negative(a);
  if (bad >= 0) return cpu_fail(1, "cpu embed_forward: token %d is %d", bad, a->tokens[bad]);
  const int B = a->B, T = a->T, d = a->d;
  const int32_t *tok = a->tokens;
  const float *E = a->E;
  float *out = a->out;
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
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
  for (int r = 0; r < B * T; r++) {
    float *o = out + (size_t)r * d;
    int32_t id = tok[r];
    if (id == a->mask_id || id == a->pad_id) {
      memset(o, 0, (size_t)d * sizeof *o);
      continue;
    }
    const float *e = E + (size_t)id * d;
    const float sc = a->row_scale[r / T];
#pragma omp simd
    for (int c = 0; c < d; c++) o[c] = e[c] * sc;
  }
  return 0;
}

/* Each thread owns a slice of columns of dE, so the scatter-add needs no
 * atomics and sums in row order (deterministic). */
esmtb_status cpu_embed_backward(esmtb_device *dev, const esmtb_embed_args *a, esmtb_stream *s) {
  (void)s;
  if (!valid(a) || !a->dout || !a->dE) return cpu_fail(1, "cpu embed_backward: bad arguments");
  CPU_REQUIRE_F32(a->dtype, "embed_backward");
  const int bad = first_negative(a);
  if (bad >= 0) return cpu_fail(1, "cpu embed_backward: token %d is %d", bad, a->tokens[bad]);
  const int B = a->B, T = a->T, d = a->d;
  const int32_t *tok = a->tokens;
  const float *dout = a->dout;
  float *dE = a->dE;
  const int block = 32, nblocks = (d + block - 1) / block;
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
  for (int bi = 0; bi < nblocks; bi++) {
    int c0 = bi * block, c1 = c0 + block < d ? c0 + block : d;
    for (int r = 0; r < B * T; r++) {
      int32_t id = tok[r];
      if (id == a->mask_id || id == a->pad_id) continue;
      const float sc = a->row_scale[r / T];
      const float *g = dout + (size_t)r * d;
      float *row = dE + (size_t)id * d;
#pragma omp simd
      for (int c = c0; c < c1; c++) row[c] += g[c] * sc;
    }
  }
  return 0;
}
