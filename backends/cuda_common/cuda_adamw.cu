// AdamW over all segments of the flat fp32 buffers in ONE launch: the host
// cuts every segment into fixed chunks, uploads a table (segment offset,
// count, decay, first block), and each block binary-searches its segment.
// Same arithmetic as the CPU backend:
//   p = p (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
#include <math.h>
#include <stdlib.h>

#include "cuda_kernels.cuh"

#define ADAMW_THREADS 256
#define ADAMW_CHUNK 4096  // elements per block

typedef struct adamw_seg {
  size_t offset, count;
  unsigned long long first_block;
  float decay;  // 1 - lr * weight_decay
} adamw_seg;

template <typename L>
__global__ void adamw_kernel(const adamw_seg *segs, int nseg, float *p, const float *g, float *m,
                             float *v, L *low, float b1, float b2, float eps, float gs,
                             float step_size, float inv_sqrt_bc2) {
  const unsigned long long bid = blockIdx.x;
  int lo = 0, hi = nseg - 1;  // the last segment whose first block is <= bid
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (segs[mid].first_block <= bid) lo = mid; else hi = mid - 1;
  }
  const adamw_seg sg = segs[lo];
  const size_t begin = (size_t)(bid - sg.first_block) * ADAMW_CHUNK;
  const size_t end = begin + ADAMW_CHUNK < sg.count ? begin + ADAMW_CHUNK : sg.count;
  for (size_t i = begin + threadIdx.x; i < end; i += ADAMW_THREADS) {
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

static void CUDART_CB free_host_table(void *p) { free(p); }

esmtb_status cuda_adamw(esmtb_device *dev, const esmtb_adamw_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || !a->params || !a->grads || !a->m || !a->v || (a->n_segments && !a->segments))
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "adamw: NULL argument");
  if (a->n_segments < 0) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "adamw: n_segments %d is negative", a->n_segments);
  if (a->step < 1) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "adamw: step must be >= 1 (got %lld)", (long long)a->step);
  if (a->params_lowp && !cuda_dtype_ok(a->lowp_dtype))
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "adamw: lowp_dtype %d is not supported (f32, f16, bf16)",
                     (int)a->lowp_dtype);
  if (!a->n_segments) return 0;
  const int n = a->n_segments;
  adamw_seg *host = (adamw_seg *)malloc((size_t)n * sizeof *host);
  if (!host) return cuda_fail(ESMTB_ERR_OUT_OF_MEMORY, "adamw: out of host memory");
  unsigned long long blocks = 0;
  for (int i = 0; i < n; i++) {
    host[i].offset = a->segments[i].offset;
    host[i].count = a->segments[i].count;
    host[i].first_block = blocks;
    host[i].decay = 1.0f - a->lr * a->segments[i].weight_decay;
    blocks += (a->segments[i].count + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
  }
  if (blocks == 0) {
    free(host);
    return 0;
  }
  if (blocks > 0x7fffffffull) {
    free(host);
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "adamw: %llu blocks exceed the grid limit", blocks);
  }
  cudaStream_t st = cuda_stream_of(s);
  adamw_seg *table = NULL;
  esmtb_status rc = cuda_scratch((void **)&table, (size_t)n * sizeof *table, st, "adamw");
  if (rc) {
    free(host);
    return rc;
  }
  rc = cuda_check(cudaMemcpyAsync(table, host, (size_t)n * sizeof *host, cudaMemcpyHostToDevice, st),
                  "adamw: segment table upload");
  // The host copy is freed in stream order, after the upload has read it.
  if (rc || cudaLaunchHostFunc(st, free_host_table, host) != cudaSuccess) {
    cudaStreamSynchronize(st);
    cudaGetLastError();
    free(host);
    cudaFreeAsync(table, st);
    return rc ? rc : cuda_fail(ESMTB_ERR_BACKEND, "adamw: cudaLaunchHostFunc failed");
  }
  const float b1 = a->beta1, b2 = a->beta2;
  const float bc1 = (float)(1.0 - pow((double)b1, (double)a->step));
  const float bc2 = (float)(1.0 - pow((double)b2, (double)a->step));
  const float step_size = a->lr / bc1, inv_sqrt_bc2 = 1.0f / sqrtf(bc2);
  const unsigned grid = (unsigned)blocks;
  if (!a->params_lowp) {
    ESMT_LAUNCH(grid, ADAMW_THREADS, 0, st, adamw_kernel<float>)(table, n, a->params, a->grads, a->m, a->v,
                                                        NULL, b1, b2, a->eps, a->grad_scale,
                                                        step_size, inv_sqrt_bc2);
  } else {
    CUDA_DISPATCH_DTYPE(a->lowp_dtype, L,
                        ESMT_LAUNCH(grid, ADAMW_THREADS, 0, st, adamw_kernel<L>)(
                            table, n, a->params, a->grads, a->m, a->v, (L *)a->params_lowp, b1,
                            b2, a->eps, a->grad_scale, step_size, inv_sqrt_bc2));
  }
  cudaFreeAsync(table, st);
  return cuda_check(cudaGetLastError(), "adamw");
}
