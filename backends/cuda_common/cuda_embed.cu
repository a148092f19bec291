// Token embedding with ESM-2 token dropout, and its backward.
//   s_b = (1 - mask_ratio_train) / (1 - m_b / n_b)   (row_scale[b]; with
//   packed rows b is a segment and row_scale has nseg entries)
//   out[r] = E[tok[r]] * s_b, 0 for mask/pad tokens.
// The vocabulary size is not an argument, so token ids cannot be range
// checked here; negative ids give zero rows (the CPU backend refuses them).
#include "cuda_kernels.cuh"

#define EMB_COLS 128      // columns per backward block
#define EMB_VGRID 64      // backward blocks along the vocabulary (ids loop by 64)
#define EMB_TILE 2048     // token ids staged in shared memory at a time

// Where a token's scale lives: its row (right-padded layout) or its packed
// segment (esmtb_segments), found by binary search over the segment starts.
struct emb_layout {
  int T, nseg;
  const int32_t *start, *len;
};

__device__ __forceinline__ int scale_slot(const emb_layout &g, int r) {
  if (g.nseg == 0) return r / g.T;
  int lo = 0, hi = g.nseg - 1;  // the last segment starting at or before r
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (g.start[mid] <= r) lo = mid; else hi = mid - 1;
  }
  return lo;  // tokens outside every segment are pad tokens: never scaled
}

// One block per sequence (row or segment): count non-pad and mask tokens
// (integers, so the order does not matter) and write its scale, computed in
// double like the CPU.
__global__ void embed_row_scale(const int32_t *tok, emb_layout g, int mask_id, int pad_id,
                                float ratio, float *row_scale) {
  __shared__ int s_np[256], s_m[256];
  const int b = blockIdx.x;
  const size_t t0 = g.nseg ? (size_t)g.start[b] : (size_t)b * g.T;
  const int n = g.nseg ? g.len[b] : g.T;
  int np = 0, m = 0;
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    const int32_t id = tok[t0 + t];
    np += id != pad_id;
    m += id == mask_id;
  }
  s_np[threadIdx.x] = np;
  s_m[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      s_np[threadIdx.x] += s_np[threadIdx.x + s];
      s_m[threadIdx.x] += s_m[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const double observed = s_np[0] ? (double)s_m[0] / s_np[0] : 0.0;
    row_scale[b] = (float)((1.0 - (double)ratio) / (1.0 - observed));
  }
}

template <typename T>
__global__ void embed_rows(const int32_t *tok, const T *E, const float *row_scale, T *out,
                           emb_layout g, int d, int mask_id, int pad_id) {
  const size_t r = blockIdx.x;
  const int32_t id = tok[r];
  T *o = out + r * d;
  if (id == mask_id || id == pad_id || id < 0) {
    for (int c = threadIdx.x; c < d; c += blockDim.x) o[c] = st_f<T>(0.f);
    return;
  }
  const float sc = row_scale[scale_slot(g, (int)r)];
  const T *e = E + (size_t)id * d;
  for (int c = threadIdx.x; c < d; c += blockDim.x) o[c] = st_f<T>(ld_f(e[c]) * sc);
}

// Block (column chunk, v0): for ids v = v0, v0 + 64, ... up to the largest
// id present, each thread owns one column and sums the matching rows in row
// order, then adds to dE once: deterministic, no atomics.
template <typename T>
__global__ void embed_backward_kernel(const int32_t *tok, const T *dout, const float *row_scale,
                                      float *dE, int n, emb_layout g, int d, int mask_id,
                                      int pad_id) {
  __shared__ int32_t ids[EMB_TILE];
  __shared__ int wmax[EMB_COLS / 32];
  int mx = -1;
  for (int r = threadIdx.x; r < n; r += blockDim.x) mx = max(mx, tok[r]);
  for (int o = 16; o > 0; o >>= 1) mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if ((threadIdx.x & 31) == 0) wmax[threadIdx.x >> 5] = mx;
  __syncthreads();
  int vmax = wmax[0];
  for (int w = 1; w < EMB_COLS / 32; w++) vmax = max(vmax, wmax[w]);
  const int c = blockIdx.x * EMB_COLS + threadIdx.x;
  for (int v = blockIdx.y; v <= vmax; v += gridDim.y) {
    if (v == mask_id || v == pad_id) continue;  // uniform over the block
    float acc = 0.f;
    for (int t0 = 0; t0 < n; t0 += EMB_TILE) {
      const int lim = min(EMB_TILE, n - t0);
      __syncthreads();
      for (int i = threadIdx.x; i < lim; i += blockDim.x) ids[i] = tok[t0 + i];
      __syncthreads();
      if (c < d)
        for (int i = 0; i < lim; i++)
          if (ids[i] == v) {
            const int r = t0 + i;
            acc += ld_f(dout[(size_t)r * d + c]) * row_scale[scale_slot(g, r)];
          }
    }
    if (c < d) dE[(size_t)v * d + c] += acc;
  }
}

static int valid(const esmtb_embed_args *a) {
  return a && a->tokens && a->E && a->row_scale && a->B > 0 && a->T > 0 && a->d > 0;
}

// Packed rows when the caller's struct has the field and uses it.
static emb_layout layout_of(const esmtb_embed_args *a) {
  emb_layout g = {a->T, 0, NULL, NULL};
  if (a->struct_size >= offsetof(esmtb_embed_args, segs) + sizeof(esmtb_segments) &&
      a->segs.nseg > 0) {
    g.nseg = a->segs.nseg;
    g.start = a->segs.start;
    g.len = a->segs.len;
  }
  return g;
}

static esmtb_status check_layout(const esmtb_embed_args *a, const emb_layout &g, const char *op) {
  if (g.nseg && (!g.start || !g.len || g.nseg > a->B * a->T))
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: bad segments (nseg=%d for B*T=%d, arrays %s)", op, g.nseg,
                     a->B * a->T, g.start && g.len ? "set" : "NULL");
  return 0;
}

esmtb_status cuda_embed_forward(esmtb_device *dev, const esmtb_embed_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!valid(a) || !a->out)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "embed_forward: bad arguments (NULL pointer or B, T, d not positive)");
  if (!cuda_dtype_ok(a->dtype))
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "embed_forward: dtype %d is not supported", (int)a->dtype);
  const emb_layout g = layout_of(a);
  esmtb_status rc = check_layout(a, g, "embed_forward");
  if (rc) return rc;
  cudaStream_t st = cuda_stream_of(s);
  ESMT_LAUNCH(g.nseg ? g.nseg : a->B, 256, 0, st, embed_row_scale)(a->tokens, g, a->mask_id, a->pad_id,
                                                          a->mask_ratio_train, a->row_scale);
  const unsigned rows = (unsigned)a->B * (unsigned)a->T;
  const int threads = a->d >= 256 ? 256 : (a->d + 31) / 32 * 32;
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      ESMT_LAUNCH(rows, threads, 0, st, embed_rows<T>)(a->tokens, (const T *)a->E,
                                                              a->row_scale, (T *)a->out, g,
                                                              a->d, a->mask_id, a->pad_id));
  return cuda_check(cudaGetLastError(), "embed_forward");
}

esmtb_status cuda_embed_backward(esmtb_device *dev, const esmtb_embed_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!valid(a) || !a->dout || !a->dE)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "embed_backward: bad arguments (NULL pointer or B, T, d not positive)");
  if (!cuda_dtype_ok(a->dtype))
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "embed_backward: dtype %d is not supported", (int)a->dtype);
  const emb_layout g = layout_of(a);
  esmtb_status rc = check_layout(a, g, "embed_backward");
  if (rc) return rc;
  cudaStream_t st = cuda_stream_of(s);
  const dim3 grid((unsigned)((a->d + EMB_COLS - 1) / EMB_COLS), EMB_VGRID);
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      ESMT_LAUNCH(grid, EMB_COLS, 0, st, embed_backward_kernel<T>)(
                          a->tokens, (const T *)a->dout, a->row_scale, a->dE, a->B * a->T, g,
                          a->d, a->mask_id, a->pad_id));
  return cuda_check(cudaGetLastError(), "embed_backward");
}
