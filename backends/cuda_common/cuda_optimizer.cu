/* SPDX-License-Identifier: MIT */
// The optimizer updates (AdamW, Lion) over all segments of the flat fp32
// buffers, each in ONE launch: the host cuts every segment into fixed
// chunks and uploads a table (segment offset, count, decay, first block);
// each block binary-searches its segment. Same arithmetic as the CPU
// backend:
//   AdamW: p = p (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
//   Lion:  p = p (1 - lr wd) - lr sign(b1 m + (1 - b1) g); m = b2 m + (1 - b2) g
#include <math.h>
#include <stdlib.h>

#include "cuda_kernels.cuh"

#define OPT_THREADS 256
#define OPT_CHUNK 4096  // elements per block

typedef struct opt_seg {
  size_t offset, count;
  unsigned long long first_block;
  float decay;  // 1 - lr * weight_decay
} opt_seg;

// The segment of this block and the element range [*begin, *end) in it.
__device__ static inline opt_seg opt_block_range(const opt_seg *segs, int nseg, size_t *begin,
                                                 size_t *end) {
  const unsigned long long bid = blockIdx.x;
  int lo = 0, hi = nseg - 1;  // the last segment whose first block is <= bid
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (segs[mid].first_block <= bid) lo = mid; else hi = mid - 1;
  }
  const opt_seg sg = segs[lo];
  *begin = (size_t)(bid - sg.first_block) * OPT_CHUNK;
  *end = *begin + OPT_CHUNK < sg.count ? *begin + OPT_CHUNK : sg.count;
  return sg;
}

template <typename L>
__global__ void adamw_kernel(const opt_seg *segs, int nseg, float *p, const float *g, float *m,
                             float *v, L *low, float b1, float b2, float eps, float gs,
                             float step_size, float inv_sqrt_bc2) {
  size_t begin, end;
  const opt_seg sg = opt_block_range(segs, nseg, &begin, &end);
  for (size_t i = begin + threadIdx.x; i < end; i += OPT_THREADS) {
    const size_t j = sg.offset + i;
    const float gi = g[j] * gs;
    const float mi = b1 * m[j] + (1.0f - b1) * gi;
    const float vi = b2 * v[j] + (1.0f - b2) * gi * gi;
    m[j] = mi;
    v[j] = vi;
    const float pi = p[j] * sg.decay - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    p[j] = pi;
    if (low) low[j] = st_f<L>(pi);
  }
}

template <typename L>
__global__ void lion_kernel(const opt_seg *segs, int nseg, float *p, const float *g, float *m,
                            L *low, float b1, float b2, float gs, float lr) {
  size_t begin, end;
  const opt_seg sg = opt_block_range(segs, nseg, &begin, &end);
  for (size_t i = begin + threadIdx.x; i < end; i += OPT_THREADS) {
    const size_t j = sg.offset + i;
    const float gi = g[j] * gs;
    const float mj = m[j];
    const float c = b1 * mj + (1.0f - b1) * gi;
    const float u = (c > 0.0f) - (c < 0.0f);  // sign, 0 at 0
    m[j] = b2 * mj + (1.0f - b2) * gi;
    const float pi = p[j] * sg.decay - lr * u;
    p[j] = pi;
    if (low) low[j] = st_f<L>(pi);
  }
}

static void CUDART_CB free_host_table(void *p) { free(p); }

// The segment table of one update on the device (freed in stream order by
// the caller's cudaFreeAsync); *grid 0: nothing to update.
static esmtb_status opt_table(const esmtb_segment *segs, int n, float lr, cudaStream_t st,
                              opt_seg **table, unsigned *grid, const char *op) {
  *table = NULL;
  *grid = 0;
  if (!n) return 0;
  opt_seg *host = (opt_seg *)malloc((size_t)n * sizeof *host);
  if (!host) return cuda_fail(ESMTB_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
  unsigned long long blocks = 0;
  for (int i = 0; i < n; i++) {
    host[i].offset = segs[i].offset;
    host[i].count = segs[i].count;
    host[i].first_block = blocks;
    host[i].decay = 1.0f - lr * segs[i].weight_decay;
    blocks += (segs[i].count + OPT_CHUNK - 1) / OPT_CHUNK;
  }
  if (blocks == 0) {
    free(host);
    return 0;
  }
  if (blocks > 0x7fffffffull) {
    free(host);
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: %llu blocks exceed the grid limit", op, blocks);
  }
  esmtb_status rc = cuda_scratch((void **)table, (size_t)n * sizeof **table, st, op);
  if (rc) {
    free(host);
    return rc;
  }
  rc = cuda_check(cudaMemcpyAsync(*table, host, (size_t)n * sizeof *host, cudaMemcpyHostToDevice, st),
                  "optimizer segment table upload");
  // The host copy is freed in stream order, after the upload has read it.
  if (rc || cudaLaunchHostFunc(st, free_host_table, host) != cudaSuccess) {
    cudaStreamSynchronize(st);
    cudaGetLastError();
    free(host);
    cudaFreeAsync(*table, st);
    *table = NULL;
    return rc ? rc : cuda_fail(ESMTB_ERR_BACKEND, "%s: cudaLaunchHostFunc failed", op);
  }
  *grid = (unsigned)blocks;
  return 0;
}

// Checks both updates share (NULL buffers, segment count, the half dtype).
static esmtb_status opt_check(const float *p, const float *g, const float *m, int nseg,
                              const esmtb_segment *segs, const void *low, esmtb_dtype lowp,
                              const char *op) {
  if (!p || !g || !m || (nseg && !segs))
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
  if (nseg < 0) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: n_segments %d is negative", op, nseg);
  if (low && !cuda_dtype_ok(lowp))
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "%s: lowp_dtype %d is not supported (f32, f16, bf16)",
                     op, (int)lowp);
  return 0;
}

esmtb_status cuda_adamw(esmtb_device *dev, const esmtb_adamw_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || !a->v) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "adamw: NULL argument");
  esmtb_status rc = opt_check(a->params, a->grads, a->m, a->n_segments, a->segments,
                              a->params_lowp, a->lowp_dtype, "adamw");
  if (rc) return rc;
  if (a->step < 1) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "adamw: step must be >= 1 (got %lld)", (long long)a->step);
  cudaStream_t st = cuda_stream_of(s);
  opt_seg *table = NULL;
  unsigned grid = 0;
  if ((rc = opt_table(a->segments, a->n_segments, a->lr, st, &table, &grid, "adamw"))) return rc;
  if (!grid) return 0;
  const float b1 = a->beta1, b2 = a->beta2;
  const float bc1 = (float)(1.0 - pow((double)b1, (double)a->step));
  const float bc2 = (float)(1.0 - pow((double)b2, (double)a->step));
  const float step_size = a->lr / bc1, inv_sqrt_bc2 = 1.0f / sqrtf(bc2);
  const int n = a->n_segments;
  if (!a->params_lowp) {
    ESMT_LAUNCH(grid, OPT_THREADS, 0, st, adamw_kernel<float>)(table, n, a->params, a->grads, a->m, a->v,
                                                      NULL, b1, b2, a->eps, a->grad_scale,
                                                      step_size, inv_sqrt_bc2);
  } else {
    CUDA_DISPATCH_DTYPE(a->lowp_dtype, L,
                        ESMT_LAUNCH(grid, OPT_THREADS, 0, st, adamw_kernel<L>)(
                            table, n, a->params, a->grads, a->m, a->v, (L *)a->params_lowp, b1,
                            b2, a->eps, a->grad_scale, step_size, inv_sqrt_bc2));
  }
  cudaFreeAsync(table, st);
  return cuda_check(cudaGetLastError(), "adamw");
}

esmtb_status cuda_lion(esmtb_device *dev, const esmtb_lion_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "lion: NULL argument");
  esmtb_status rc = opt_check(a->params, a->grads, a->m, a->n_segments, a->segments,
                              a->params_lowp, a->lowp_dtype, "lion");
  if (rc) return rc;
  cudaStream_t st = cuda_stream_of(s);
  opt_seg *table = NULL;
  unsigned grid = 0;
  if ((rc = opt_table(a->segments, a->n_segments, a->lr, st, &table, &grid, "lion"))) return rc;
  if (!grid) return 0;
  const int n = a->n_segments;
  if (!a->params_lowp) {
    ESMT_LAUNCH(grid, OPT_THREADS, 0, st, lion_kernel<float>)(table, n, a->params, a->grads, a->m,
                                                     NULL, a->beta1, a->beta2, a->grad_scale,
                                                     a->lr);
  } else {
    CUDA_DISPATCH_DTYPE(a->lowp_dtype, L,
                        ESMT_LAUNCH(grid, OPT_THREADS, 0, st, lion_kernel<L>)(
                            table, n, a->params, a->grads, a->m, (L *)a->params_lowp, a->beta1,
                            a->beta2, a->grad_scale, a->lr));
  }
  cudaFreeAsync(table, st);
  return cuda_check(cudaGetLastError(), "lion");
}
