/* SPDX-License-Identifier: MIT */
// Token embedding with ESM-2 token dropout, and its backward.
//   s_b = (1 - mask_ratio_train) / (1 - m_b / n_b)   (row_scale[b]; with
//   packed rows b is a segment and row_scale has nseg entries)
//   out[r] = E[tok[r]] * s_b, 0 for mask/pad tokens.
// The vocabulary size is not an argument, so token ids cannot be range
// checked here; negative ids give zero rows (the CPU backend refuses them).
#include "cuda_kernels.cuh"

// Backward (deterministic, no floating-point atomics): a stable counting
// sort of the token positions by id, then fp32 sums of each id's rows in
// position order.
//   1. embed_count   (a block per tile of EMB_TILE tokens): thread v counts
//      id v in the tile; the tile's largest id.
//   2. embed_scan    (one block): per id, its start in the sorted order and
//      the start of each tile's run; each id's list cut into segments of
//      EMB_SEG positions, numbered id by id.
//   3. embed_scatter (a block per tile): thread v writes the positions of
//      id v in tile order, with the token's dropout scale next to each.
//   4. embed_partial (a block per segment and EMB_COLS columns): the sum of
//      the segment's rows * scale, in position order, to a scratch row.
//   5. embed_finish  (a block per id and EMB_COLS columns): dE[v] += the
//      id's segment sums in segment order.
// Every order is fixed by the tokens alone, so the bits do not depend on
// the launch. Since the vocabulary size is not an argument, ids below
// EMB_CAP (ESM-2 has 33) take this path and larger ones a scan of every
// token per id (embed_backward_big), which returns at once when there are
// none. Stream-ordered scratch: 8 bytes a token (positions, scales) plus
// 4 d bytes per segment (at most tokens / EMB_SEG + EMB_CAP of them).
#define EMB_CAP 128       // ids sorted (threads of the count/scan/scatter blocks)
#define EMB_TILE 2048     // tokens per count/scatter block
#define EMB_SEG 1024      // sorted positions per partial-sum block
#define EMB_COLS 128      // columns per partial/finish block
#define EMB_VGRID 8       // embed_backward_big: blocks along ids >= EMB_CAP

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

// W columns per thread and step: vec16<T>::N (16-byte loads and stores)
// when d is a multiple of it and E, out are 16-byte aligned, else 1.
template <typename T, int W>
__global__ void embed_rows(const int32_t *tok, const T *E, const float *row_scale, T *out,
                           emb_layout g, int d, int mask_id, int pad_id) {
  const size_t r = blockIdx.x;
  const int32_t id = tok[r];
  T *o = out + r * d;
  float f[W];
  if (id == mask_id || id == pad_id || id < 0) {
    for (int k = 0; k < W; k++) f[k] = 0.f;
    for (int c = threadIdx.x * W; c < d; c += blockDim.x * W) st_chunk<W>(o + c, f);
    return;
  }
  const float sc = row_scale[scale_slot(g, (int)r)];
  const T *e = E + (size_t)id * d;
  for (int c = threadIdx.x * W; c < d; c += blockDim.x * W) {
    ld_chunk<W>(e + c, f);
    for (int k = 0; k < W; k++) f[k] *= sc;
    st_chunk<W>(o + c, f);
  }
}

// Loads tile `blockIdx.x` of the token ids into ids[] and returns the
// number loaded; `*mx` gets the largest id this thread saw, mask and pad
// ids left out. Ends in a barrier.
__device__ __forceinline__ int load_tile(const int32_t *tok, int n, int mask_id, int pad_id,
                                         int32_t *ids, int *mx) {
  const int t0 = blockIdx.x * EMB_TILE, lim = min(EMB_TILE, n - t0);
  int m = -1;
  for (int i = threadIdx.x; i < lim; i += blockDim.x) {
    const int32_t id = tok[t0 + i];
    ids[i] = id;
    if (id != mask_id && id != pad_id) m = max(m, id);
  }
  *mx = m;
  __syncthreads();
  return lim;
}

// cnt[v * ntiles + tile] = occurrences of id v in the tile (0 for the
// mask and pad ids, which get no gradient); tmax[tile] = its largest id
// (mask and pad left out). Threads above the tile's largest id skip the
// count (ESM-2 uses 33 of the 128).
__global__ void embed_count(const int32_t *tok, int n, int mask_id, int pad_id, int *cnt,
                            int *tmax) {
  __shared__ int32_t ids[EMB_TILE];
  __shared__ int wmax[EMB_CAP / 32];
  int mx;
  const int lim = load_tile(tok, n, mask_id, pad_id, ids, &mx);
  for (int o = 16; o > 0; o >>= 1) mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if ((threadIdx.x & 31) == 0) wmax[threadIdx.x >> 5] = mx;
  __syncthreads();
  int bmax = wmax[0];
  for (int w = 1; w < EMB_CAP / 32; w++) bmax = max(bmax, wmax[w]);
  const int v = threadIdx.x;
  int c = 0;
  if (v <= bmax && v != mask_id && v != pad_id)
    for (int i = 0; i < lim; i++) c += ids[i] == v;
  cnt[(size_t)v * gridDim.x + blockIdx.x] = c;
  if (threadIdx.x == 0) tmax[blockIdx.x] = bmax;
}

// info[0 .. EMB_CAP]: base, where each id's positions start in the sorted
// order (base[EMB_CAP] = number sorted); info[EMB_CAP + 1 .. 2 EMB_CAP + 1]:
// sbase, each id's first segment (sbase[EMB_CAP] = number of segments);
// info[2 EMB_CAP + 2]: the largest id but mask/pad. cnt becomes, in place, the sorted
// position where each (id, tile) run starts. Integer sums: exact.
__global__ void embed_scan(int *cnt, int ntiles, const int *tmax, int *info) {
  __shared__ int tot[EMB_CAP], base[EMB_CAP + 1], sbase[EMB_CAP + 1], smax[EMB_CAP];
  const int v = threadIdx.x;
  int *row = cnt + (size_t)v * ntiles;
  int t = 0, m = -1;
  for (int b = 0; b < ntiles; b++) t += row[b];
  for (int b = v; b < ntiles; b += EMB_CAP) m = max(m, tmax[b]);
  tot[v] = t;
  smax[v] = m;
  __syncthreads();
  if (v == 0) {
    base[0] = sbase[0] = 0;
    for (int u = 0; u < EMB_CAP; u++) {
      base[u + 1] = base[u] + tot[u];
      sbase[u + 1] = sbase[u] + (tot[u] + EMB_SEG - 1) / EMB_SEG;
      m = max(m, smax[u]);
    }
    info[EMB_CAP] = base[EMB_CAP];
    info[2 * EMB_CAP + 1] = sbase[EMB_CAP];
    info[2 * EMB_CAP + 2] = m;
  }
  __syncthreads();
  info[v] = base[v];
  info[EMB_CAP + 1 + v] = sbase[v];
  int run = base[v];
  for (int b = 0; b < ntiles; b++) {
    const int c = row[b];
    row[b] = run;
    run += c;
  }
}

// Thread v writes the positions of id v in its tile, in tile order, from
// the run start embed_scan gave it: a stable sort. The token's dropout
// scale goes next to it, so the partial sums need no segment search.
__global__ void embed_scatter(const int32_t *tok, int n, emb_layout g, const float *row_scale,
                              int mask_id, int pad_id, const int *tmax, const int *start,
                              int32_t *pos, float *scl) {
  __shared__ int32_t ids[EMB_TILE];
  int mx;
  const int lim = load_tile(tok, n, mask_id, pad_id, ids, &mx);
  const int v = threadIdx.x;
  if (v == mask_id || v == pad_id || v > tmax[blockIdx.x]) return;  // none of id v here
  int o = start[(size_t)v * gridDim.x + blockIdx.x];
  const int t0 = blockIdx.x * EMB_TILE;
  for (int i = 0; i < lim; i++)
    if (ids[i] == v) {
      pos[o] = t0 + i;
      scl[o] = row_scale[scale_slot(g, t0 + i)];
      o++;
    }
}

// Block (column chunk, segment s): part[s][c] = sum over the segment's
// positions p, in order, of dout[pos[p]][c] * scl[p].
template <typename T>
__global__ void embed_partial(const T *dout, const int32_t *pos, const float *scl,
                              const int *info, float *part, int d) {
  const int *base = info, *sbase = info + EMB_CAP + 1;
  const int c = blockIdx.x * EMB_COLS + threadIdx.x;
  if (c >= d) return;
  // The grid is sized for the worst case (capped at 65535 along y).
  for (int s = blockIdx.y; s < sbase[EMB_CAP]; s += gridDim.y) {
    int lo = 0, hi = EMB_CAP - 1;  // the id: the last v with sbase[v] <= s
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (sbase[mid] <= s) lo = mid; else hi = mid - 1;
    }
    const int p0 = base[lo] + (s - sbase[lo]) * EMB_SEG, p1 = min(p0 + EMB_SEG, base[lo + 1]);
    float acc = 0.f;
    for (int p = p0; p < p1; p++) acc += ld_f(dout[(size_t)pos[p] * d + c]) * scl[p];
    part[(size_t)s * d + c] = acc;
  }
}

// Block (column chunk, id v): dE[v][c] += its segment sums, in order.
// Ids that never occur (and mask/pad) have no segments and are untouched.
__global__ void embed_finish(const int *info, const float *part, float *dE, int d) {
  const int *sbase = info + EMB_CAP + 1;
  const int v = blockIdx.y, s0 = sbase[v], s1 = sbase[v + 1];
  const int c = blockIdx.x * EMB_COLS + threadIdx.x;
  if (s0 == s1 || c >= d) return;
  float acc = 0.f;
  for (int s = s0; s < s1; s++) acc += part[(size_t)s * d + c];
  dE[(size_t)v * d + c] += acc;
}

// Ids >= EMB_CAP (none in ESM-2): block (column chunk, v0) scans every
// token for ids v = EMB_CAP + v0, + EMB_VGRID, ... up to the largest id
// (from embed_scan), each thread one column, rows in order. Returns at once
// when the largest id is below EMB_CAP.
template <typename T>
__global__ void embed_backward_big(const int32_t *tok, const T *dout, const float *row_scale,
                                   float *dE, int n, emb_layout g, int d, int mask_id,
                                   int pad_id, const int *info) {
  __shared__ int32_t ids[EMB_TILE];
  const int vmax = info[2 * EMB_CAP + 2];
  if (vmax < EMB_CAP) return;  // uniform over the block
  const int c = blockIdx.x * EMB_COLS + threadIdx.x;
  for (int v = EMB_CAP + blockIdx.y; v <= vmax; v += gridDim.y) {
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
  const int vec = a->d % (int)(16 / cuda_dtype_size(a->dtype)) == 0 && cuda_aligned16(a->E) &&
                  cuda_aligned16(a->out);
  const int per = vec ? (int)(16 / cuda_dtype_size(a->dtype)) : 1, chunks = a->d / per;
  const int threads = chunks >= 256 ? 256 : (chunks + 31) / 32 * 32;
  CUDA_DISPATCH_DTYPE(a->dtype, T, {
    if (vec)
      ESMT_LAUNCH(rows, threads, 0, st, embed_rows<T, vec16<T>::N>)(
          a->tokens, (const T *)a->E, a->row_scale, (T *)a->out, g, a->d, a->mask_id, a->pad_id);
    else
      ESMT_LAUNCH(rows, threads, 0, st, embed_rows<T, 1>)(
          a->tokens, (const T *)a->E, a->row_scale, (T *)a->out, g, a->d, a->mask_id, a->pad_id);
  });
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
  const int n = a->B * a->T;
  const int ntiles = (n + EMB_TILE - 1) / EMB_TILE;
  // Worst case of sum over ids of ceil(count / EMB_SEG).
  const int maxseg = (n + EMB_SEG - 1) / EMB_SEG + (n < EMB_CAP ? n : EMB_CAP);
  const size_t n_cnt = (size_t)EMB_CAP * ntiles, n_info = 2 * (EMB_CAP + 1) + 1;
  const size_t bytes = 4 * (n_cnt + (size_t)ntiles + n_info + 2 * (size_t)n) +
                       sizeof(float) * (size_t)maxseg * (size_t)a->d;
  void *scratch = NULL;
  rc = cuda_scratch(&scratch, bytes, st, "embed_backward");
  if (rc) return rc;
  int *cnt = (int *)scratch, *tmax = cnt + n_cnt, *info = tmax + ntiles;
  int32_t *pos = (int32_t *)(info + n_info);
  float *scl = (float *)(pos + n), *part = scl + n;
  const unsigned cols = (unsigned)((a->d + EMB_COLS - 1) / EMB_COLS);
  ESMT_LAUNCH(ntiles, EMB_CAP, 0, st, embed_count)(a->tokens, n, a->mask_id, a->pad_id, cnt, tmax);
  ESMT_LAUNCH(1, EMB_CAP, 0, st, embed_scan)(cnt, ntiles, tmax, info);
  ESMT_LAUNCH(ntiles, EMB_CAP, 0, st, embed_scatter)(a->tokens, n, g, a->row_scale, a->mask_id,
                                                     a->pad_id, tmax, cnt, pos, scl);
  CUDA_DISPATCH_DTYPE(a->dtype, T, {
    ESMT_LAUNCH(dim3(cols, (unsigned)(maxseg < 65535 ? maxseg : 65535)), EMB_COLS, 0, st, embed_partial<T>)(
        (const T *)a->dout, pos, scl, info, part, a->d);
    ESMT_LAUNCH(dim3(cols, EMB_CAP), EMB_COLS, 0, st, embed_finish)(info, part, a->dE, a->d);
    ESMT_LAUNCH(dim3(cols, EMB_VGRID), EMB_COLS, 0, st, embed_backward_big<T>)(
        a->tokens, (const T *)a->dout, a->row_scale, a->dE, n, g, a->d, a->mask_id, a->pad_id,
        info);
  });
  cudaFreeAsync(scratch, st);
  return cuda_check(cudaGetLastError(), "embed_backward");
}
