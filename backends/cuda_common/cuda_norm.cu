/* SPDX-License-Identifier: MIT */
// LayerNorm forward/backward over rows of [N, d]: one warp per row, fp32
// math, biased variance (two passes, no cancellation), mean/rstd saved;
// 16-byte accesses when the width and pointers allow (ln_vec_ok).
// Backward: dw/db by the deterministic column sum (cuda_colsum.cu), run
// BEFORE dx so that dx may alias dout or x.
#include "cuda_kernels.cuh"

#define ROWS_PER_BLOCK 8  // warps per block, one row each

// W consecutive columns per lane and step: vec16<T>::N (16-byte loads and
// stores of x/out/dout/dx, and of w/b as 16-byte float pieces) when d is a
// multiple of it and every array is 16-byte aligned (ESM-2's widths 320 ...
// 5120 are), else 1. The per-lane partial sums then run over a different
// set of columns than the scalar path, but in a fixed order: both are
// deterministic, and each reduces in fp32.
template <typename T, int W>
__global__ void ln_forward(const T *x, const float *w, const float *b, T *out, float *mean,
                           float *rstd, int N, int d, float eps) {
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y, lane = threadIdx.x;
  if (row >= N) return;  // the whole warp leaves together
  const T *xr = x + (size_t)row * d;
  T *orow = out + (size_t)row * d;
  float f[W];
  float sum = 0.f;
  for (int c = lane * W; c < d; c += 32 * W) {
    ld_chunk<W>(xr + c, f);
    for (int k = 0; k < W; k++) sum += f[k];
  }
  const float mu = warp_sum(sum) / (float)d;
  float var = 0.f;
  for (int c = lane * W; c < d; c += 32 * W) {
    ld_chunk<W>(xr + c, f);
    for (int k = 0; k < W; k++) {
      const float t = f[k] - mu;
      var += t * t;
    }
  }
  const float rs = 1.0f / sqrtf(warp_sum(var) / (float)d + eps);
  for (int c = lane * W; c < d; c += 32 * W) {
    float fw[W], fb[W];
    ld_chunk<W>(xr + c, f);
    ld_chunk<W>(w + c, fw);
    ld_chunk<W>(b + c, fb);
    for (int k = 0; k < W; k++) f[k] = (f[k] - mu) * rs * fw[k] + fb[k];
    st_chunk<W>(orow + c, f);
  }
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

// dx (+)= rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * w.
// dx may alias dout or x: a lane reads its columns before writing them.
template <typename T, int W>
__global__ void ln_backward_dx(const T *x, const float *w, const T *dout, const float *mean,
                               const float *rstd, T *dx, int accumulate, int N, int d) {
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y, lane = threadIdx.x;
  if (row >= N) return;
  const size_t base = (size_t)row * d;
  const float mu = mean[row], rs = rstd[row];
  float fx[W], fg[W], fw[W];
  float sg = 0.f, sgx = 0.f;
  for (int c = lane * W; c < d; c += 32 * W) {
    ld_chunk<W>(dout + base + c, fg);
    ld_chunk<W>(x + base + c, fx);
    ld_chunk<W>(w + c, fw);
    for (int k = 0; k < W; k++) {
      const float g = fg[k] * fw[k];
      sg += g;
      sgx += g * (fx[k] - mu) * rs;
    }
  }
  sg = warp_sum(sg) / (float)d;
  sgx = warp_sum(sgx) / (float)d;
  for (int c = lane * W; c < d; c += 32 * W) {
    float fd[W];
    ld_chunk<W>(dout + base + c, fg);
    ld_chunk<W>(x + base + c, fx);
    ld_chunk<W>(w + c, fw);
    if (accumulate) ld_chunk<W>(dx + base + c, fd);
    for (int k = 0; k < W; k++) {
      const float g = fg[k] * fw[k];
      float v = rs * (g - sg - (fx[k] - mu) * rs * sgx);
      if (accumulate) v += fd[k];
      fx[k] = v;
    }
    st_chunk<W>(dx + base + c, fx);
  }
}

// Whether a row kernel may take vec16<T>::N columns per step.
static int ln_vec_ok(esmtb_dtype dt, int d, const void *p0, const void *p1, const void *p2,
                     const void *p3, const void *p4) {
  const void *ps[5] = {p0, p1, p2, p3, p4};
  if (d % (int)(16 / cuda_dtype_size(dt))) return 0;
  for (int i = 0; i < 5; i++)
    if (ps[i] && !cuda_aligned16(ps[i])) return 0;
  return 1;
}

esmtb_status cuda_layernorm_forward(esmtb_device *dev, const esmtb_layernorm_args *a,
                                    esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || !a->x || !a->w || !a->b || !a->out || !a->mean || !a->rstd || a->N < 0 || a->d <= 0)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "layernorm_forward: bad arguments (NULL pointer or N=%d d=%d)",
                     a ? a->N : 0, a ? a->d : 0);
  if (!cuda_dtype_ok(a->dtype))
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "layernorm_forward: dtype %d is not supported", (int)a->dtype);
  if (!a->N) return 0;
  cudaStream_t st = cuda_stream_of(s);
  const dim3 block(32, ROWS_PER_BLOCK);
  const unsigned grid = (unsigned)((a->N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
  const int vec = ln_vec_ok(a->dtype, a->d, a->x, a->out, a->w, a->b, NULL);
  CUDA_DISPATCH_DTYPE(a->dtype, T, {
    if (vec)
      ESMT_LAUNCH(grid, block, 0, st, ln_forward<T, vec16<T>::N>)(
          (const T *)a->x, a->w, a->b, (T *)a->out, a->mean, a->rstd, a->N, a->d, a->eps);
    else
      ESMT_LAUNCH(grid, block, 0, st, ln_forward<T, 1>)(
          (const T *)a->x, a->w, a->b, (T *)a->out, a->mean, a->rstd, a->N, a->d, a->eps);
  });
  return cuda_check(cudaGetLastError(), "layernorm_forward");
}

esmtb_status cuda_layernorm_backward(esmtb_device *dev, const esmtb_layernorm_args *a,
                                     esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || !a->x || !a->w || !a->dout || !a->dx || !a->dw || !a->db || !a->mean || !a->rstd ||
      a->N < 0 || a->d <= 0)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "layernorm_backward: bad arguments (NULL pointer or N=%d d=%d)",
                     a ? a->N : 0, a ? a->d : 0);
  if (!cuda_dtype_ok(a->dtype))
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "layernorm_backward: dtype %d is not supported", (int)a->dtype);
  if (!a->N) return 0;
  cudaStream_t st = cuda_stream_of(s);
  esmtb_status rc = cuda_colsum(a->dtype, a->N, a->d, a->dout, a->x, a->mean, a->rstd, a->dw,
                                a->db, st, "layernorm_backward");
  if (rc) return rc;
  const dim3 block(32, ROWS_PER_BLOCK);
  const unsigned grid = (unsigned)((a->N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
  const int vec = ln_vec_ok(a->dtype, a->d, a->x, a->w, a->dout, a->dx, NULL);
  CUDA_DISPATCH_DTYPE(a->dtype, T, {
    if (vec)
      ESMT_LAUNCH(grid, block, 0, st, ln_backward_dx<T, vec16<T>::N>)(
          (const T *)a->x, a->w, (const T *)a->dout, a->mean, a->rstd, (T *)a->dx,
          a->accumulate_dx, a->N, a->d);
    else
      ESMT_LAUNCH(grid, block, 0, st, ln_backward_dx<T, 1>)(
          (const T *)a->x, a->w, (const T *)a->dout, a->mean, a->rstd, (T *)a->dx,
          a->accumulate_dx, a->N, a->d);
  });
  return cuda_check(cudaGetLastError(), "layernorm_backward");
}
