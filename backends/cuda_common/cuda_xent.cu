/* SPDX-License-Identifier: MIT */
// Fused softmax cross-entropy: one warp per row of [N, V] logits; per-row
// losses go to scratch and one block adds them up in a fixed order (in
// double), so loss_sum is bitwise reproducible. dlogits may alias logits.
#include <math.h>

#include "cuda_kernels.cuh"

#define XENT_ROWS 8        // warps (rows) per block
#define XENT_SUM_THREADS 1024

template <typename T>
__global__ void xent_rows(const T *logits, const int32_t *labels, T *dl, float *row_loss, int N,
                          int V, float grad_scale) {
  const int row = blockIdx.x * XENT_ROWS + threadIdx.y, lane = threadIdx.x;
  if (row >= N) return;  // the whole warp leaves together
  const T *z = logits + (size_t)row * V;
  T *g = dl ? dl + (size_t)row * V : NULL;
  const int32_t y = labels[row];
  if (y < 0 || y >= V) {
    // Ignored row; a label past the vocabulary poisons the loss (NaN)
    // instead of reading out of bounds, since it cannot be reported here.
    if (g)
      for (int v = lane; v < V; v += 32) g[v] = st_f<T>(0.f);
    if (lane == 0) row_loss[row] = y < 0 ? 0.f : __int_as_float(0x7fc00000);
    return;
  }
  float mx = -INFINITY;
  for (int v = lane; v < V; v += 32) mx = fmaxf(mx, ld_f(z[v]));
  mx = warp_max(mx);
  // Read z[y] before the shuffle below: after it, lanes may overwrite the
  // row when dl aliases logits.
  const float zy = ld_f(z[y]);
  float sum = 0.f;
  for (int v = lane; v < V; v += 32) sum += expf(ld_f(z[v]) - mx);
  const float lse = mx + logf(warp_sum(sum));
  if (lane == 0) row_loss[row] = lse - zy;
  if (g)
    for (int v = lane; v < V; v += 32)
      g[v] = st_f<T>((expf(ld_f(z[v]) - lse) - (v == y ? 1.f : 0.f)) * grad_scale);
}

__global__ void xent_sum(const float *row_loss, int N, float *loss_sum) {
  __shared__ double sh[XENT_SUM_THREADS];
  double acc = 0.0;
  for (int i = threadIdx.x; i < N; i += XENT_SUM_THREADS) acc += row_loss[i];
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int s = XENT_SUM_THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss_sum += (float)sh[0];
}

esmtb_status cuda_xent(esmtb_device *dev, const esmtb_xent_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || !a->logits || !a->labels || !a->loss_sum || a->N < 0 || a->V <= 0)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "xent: bad arguments (NULL pointer or N=%d V=%d)", a ? a->N : 0,
                     a ? a->V : 0);
  if (!cuda_dtype_ok(a->dtype)) return cuda_fail(ESMTB_ERR_UNSUPPORTED, "xent: dtype %d is not supported", (int)a->dtype);
  if (!a->N) return 0;
  cudaStream_t st = cuda_stream_of(s);
  float *row_loss = NULL;
  esmtb_status rc = cuda_scratch((void **)&row_loss, (size_t)a->N * sizeof(float), st, "xent");
  if (rc) return rc;
  const dim3 block(32, XENT_ROWS);
  const unsigned grid = (unsigned)((a->N + XENT_ROWS - 1) / XENT_ROWS);
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      ESMT_LAUNCH(grid, block, 0, st, xent_rows<T>)((const T *)a->logits, a->labels,
                                                           (T *)a->dlogits, row_loss, a->N, a->V,
                                                           a->grad_scale));
  ESMT_LAUNCH(1, XENT_SUM_THREADS, 0, st, xent_sum)(row_loss, a->N, a->loss_sum);
  cudaFreeAsync(row_loss, st);
  return cuda_check(cudaGetLastError(), "xent");
}
