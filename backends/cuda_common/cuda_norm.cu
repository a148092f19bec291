// LayerNorm forward/backward over rows of [N, d]: one warp per row, fp32
// math, biased variance (two passes, no cancellation), mean/rstd saved.
// Backward: dw/db by the deterministic column sum (cuda_colsum.cu), run
// BEFORE dx so that dx may alias dout or x.
#include "cuda_kernels.cuh"

#define ROWS_PER_BLOCK 8  // warps per block, one row each

template <typename T>
__global__ void ln_forward(const T *x, const float *w, const float *b, T *out, float *mean,
                           float *rstd, int N, int d, float eps) {
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y, lane = threadIdx.x;
  if (row >= N) return;  // the whole warp leaves together
  const T *xr = x + (size_t)row * d;
  T *orow = out + (size_t)row * d;
  float sum = 0.f;
  for (int c = lane; c < d; c += 32) sum += ld_f(xr[c]);
  const float mu = warp_sum(sum) / (float)d;
  float var = 0.f;
  for (int c = lane; c < d; c += 32) {
    const float t = ld_f(xr[c]) - mu;
    var += t * t;
  }
  const float rs = 1.0f / sqrtf(warp_sum(var) / (float)d + eps);
  for (int c = lane; c < d; c += 32) orow[c] = st_f<T>((ld_f(xr[c]) - mu) * rs * w[c] + b[c]);
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

// dx (+)= rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * w.
template <typename T>
__global__ void ln_backward_dx(const T *x, const float *w, const T *dout, const float *mean,
                               const float *rstd, T *dx, int accumulate, int N, int d) {
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y, lane = threadIdx.x;
  if (row >= N) return;
  const size_t base = (size_t)row * d;
  const float mu = mean[row], rs = rstd[row];
  float sg = 0.f, sgx = 0.f;
  for (int c = lane; c < d; c += 32) {
    const float g = ld_f(dout[base + c]) * w[c];
    sg += g;
    sgx += g * (ld_f(x[base + c]) - mu) * rs;
  }
  sg = warp_sum(sg) / (float)d;
  sgx = warp_sum(sgx) / (float)d;
  for (int c = lane; c < d; c += 32) {
    const float g = ld_f(dout[base + c]) * w[c];
    float v = rs * (g - sg - (ld_f(x[base + c]) - mu) * rs * sgx);
    if (accumulate) v += ld_f(dx[base + c]);
    dx[base + c] = st_f<T>(v);
  }
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
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      ESMT_LAUNCH(grid, block, 0, st, ln_forward<T>)((const T *)a->x, a->w, a->b,
                                                            (T *)a->out, a->mean, a->rstd, a->N,
                                                            a->d, a->eps));
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
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      ESMT_LAUNCH(grid, block, 0, st, ln_backward_dx<T>)(
                          (const T *)a->x, a->w, (const T *)a->dout, a->mean, a->rstd,
                          (T *)a->dx, a->accumulate_dx, a->N, a->d));
  return cuda_check(cudaGetLastError(), "layernorm_backward");
}
