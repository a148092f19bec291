/* SPDX-License-Identifier: MIT */
// Deterministic column sums (bias gradient, LayerNorm dw/db): every
// partial covers a fixed tile, and partials are added in a fixed order, so
// the bits depend only on the inputs and shape, never on scheduling. No
// float atomics.
#include "cuda_kernels.cuh"

#define COL_TILE 32   // columns per block (one warp-wide row segment)
#define ROW_TILE 64   // rows per block
#define ROW_LANES 8   // threadIdx.y

// partial[chunk][col] (and partial[nchunks + chunk][col] for the LN pair).
template <typename T, bool LN>
__global__ void colsum_partial(const T *dy, const T *x, const float *mean, const float *rstd,
                               int rows, int cols, float *partial) {
  __shared__ float s0[ROW_LANES][COL_TILE], s1[ROW_LANES][COL_TILE];
  const int c = blockIdx.x * COL_TILE + threadIdx.x;
  const int r0 = blockIdx.y * ROW_TILE;
  float a0 = 0.f, a1 = 0.f;
  if (c < cols) {
    for (int i = threadIdx.y; i < ROW_TILE && r0 + i < rows; i += ROW_LANES) {
      const size_t at = (size_t)(r0 + i) * cols + c;
      const float g = ld_f(dy[at]);
      if (LN) {
        const float xhat = (ld_f(x[at]) - mean[r0 + i]) * rstd[r0 + i];
        a0 += g * xhat;
        a1 += g;
      } else {
        a0 += g;
      }
    }
  }
  s0[threadIdx.y][threadIdx.x] = a0;
  s1[threadIdx.y][threadIdx.x] = a1;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t0 = 0.f, t1 = 0.f;
    for (int j = 0; j < ROW_LANES; j++) {
      t0 += s0[j][threadIdx.x];
      t1 += s1[j][threadIdx.x];
    }
    partial[(size_t)blockIdx.y * cols + c] = t0;
    if (LN) partial[((size_t)gridDim.y + blockIdx.y) * cols + c] = t1;
  }
}

__global__ void colsum_final(const float *partial, int nchunks, int cols, float *out0,
                             float *out1) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
    float t0 = 0.f, t1 = 0.f;
    for (int j = 0; j < nchunks; j++) t0 += partial[(size_t)j * cols + c];
    out0[c] += t0;
    if (out1) {
      for (int j = 0; j < nchunks; j++) t1 += partial[((size_t)nchunks + j) * cols + c];
      out1[c] += t1;
    }
  }
}

esmtb_status cuda_colsum(esmtb_dtype dt, int rows, int cols, const void *dy, const void *x,
                         const float *mean, const float *rstd, float *out0, float *out1,
                         cudaStream_t st, const char *op) {
  if (rows <= 0 || cols <= 0) return 0;
  const int nchunks = (rows + ROW_TILE - 1) / ROW_TILE;
  if (nchunks > 65535) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: %d rows is more than this kernel handles", op, rows);
  const bool ln = x != NULL;
  float *partial = NULL;
  esmtb_status rc = cuda_scratch((void **)&partial,
                                 (size_t)nchunks * cols * (ln ? 2 : 1) * sizeof(float), st, op);
  if (rc) return rc;
  dim3 grid((unsigned)((cols + COL_TILE - 1) / COL_TILE), (unsigned)nchunks), block(COL_TILE, ROW_LANES);
  CUDA_DISPATCH_DTYPE(dt, T, {
    if (ln)
      ESMT_LAUNCH(grid, block, 0, st, colsum_partial<T, true>)((const T *)dy, (const T *)x, mean, rstd,
                                                      rows, cols, partial);
    else
      ESMT_LAUNCH(grid, block, 0, st, colsum_partial<T, false>)((const T *)dy, NULL, NULL, NULL, rows,
                                                       cols, partial);
  });
  ESMT_LAUNCH((cols + 255) / 256, 256, 0, st, colsum_final)(partial, nchunks, cols, out0, ln ? out1 : NULL);
  cudaFreeAsync(partial, st);
  return cuda_check(cudaGetLastError(), op);
}
