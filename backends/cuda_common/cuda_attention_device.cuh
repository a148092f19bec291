/* SPDX-License-Identifier: MIT */
// Device-side building blocks of the flash-style attention
// (cuda_attention.cu): parameters, the per-sequence view (right-padded rows
// or packed segments), 16-bit dtype helpers, tensor-core fragments,
// cp.async, tiles into shared memory (plain copies: rotary is applied once
// per pass by attn_rotate_qk), the fp32 staging tile with the inverse
// rotary of backward, and the rotary and rowsum kernels. Included by cuda_attention.cu only (also compiled for the
// host by the ESMT_CUDA_EMULATE build), inside namespace esmt_attn.
#ifndef ESMTRAIN_CUDA_ATTENTION_DEVICE_CUH
#define ESMTRAIN_CUDA_ATTENTION_DEVICE_CUH

#define LOG2E_F 1.44269504088896341f
#define LN2_F 0.69314718055994531f
#define NTHREADS 128

namespace esmt_attn {

struct attn_params {
  const void *qkv;
  // Rotated Q (times scale * log2 e) and rotated K in the storage dtype,
  // [tokens][H][hd] each (attn_rotate_qk, stream-ordered scratch); the
  // 16-bit kernels read Q and K from here, V and dO from qkv / dout.
  const void *qr, *kr;
  int v16, o16;  // qkv / dout 16-byte aligned: 16-byte copies of V / dO
  void *out;
  float *lse;
  const void *dout;
  void *dqkv;
  const float *D;  // rowsum(dO * O), [B*H*T]
  float *dq_acc;   // non-deterministic backward: fp32 dQ sums, [tokens][H][hd]
  int nondeterministic;  // esmtb_attention_args.nondeterministic (ABI 1.6)
  const int32_t *seq_len;
  const float *cos, *sin;
  int B, T, H, hd;
  float scale;
  // packed rows (esmtb_segments): nseg > 0 replaces seq_len
  int nseg, max_len;
  const int32_t *seg_start, *seg_len;
};

__device__ __forceinline__ int valid_len(const attn_params &p, int b) {
  int L = p.seq_len[b];
  return L < 0 ? 0 : (L > p.T ? p.T : L);
}

// The sequence one block works on. Grids are (row tiles, H, sequences):
// blockIdx.z is a row of the right-padded layout or a packed segment.
struct seq_view {
  size_t tok0;  // flattened token index of its first token
  size_t lse0;  // index of that token's lse / D entry for head h
  int L;        // valid tokens
  int rows;     // rows the blocks cover: T (padding rows get zeros here) or
                // L (packed: padding outside segments is zeroed up front)
};

__device__ __forceinline__ seq_view seq_of(const attn_params &p, int z, int h) {
  seq_view v;
  if (p.nseg > 0) {
    // Clamped so that unchecked garbage (no ESMT_CUDA_ATTN_CHECK=1)
    // can never address outside the buffers.
    int s0 = p.seg_start[z], L = p.seg_len[z];
    if (s0 < 0 || s0 >= p.B * p.T) s0 = 0, L = 0;
    const int b = s0 / p.T, t0 = s0 - b * p.T;
    L = L < 0 ? 0 : (L > p.T - t0 ? p.T - t0 : L);
    v.tok0 = (size_t)s0;
    v.lse0 = ((size_t)b * p.H + h) * p.T + t0;
    v.L = v.rows = L;
  } else {
    v.tok0 = (size_t)z * p.T;
    v.lse0 = ((size_t)z * p.H + h) * p.T;
    v.L = valid_len(p, z);
    v.rows = p.T;
  }
  return v;
}

// Grid of the attention kernels for blocks of `rows_per_block` rows.
__host__ __device__ inline dim3 attn_grid(const attn_params &p, int rows_per_block) {
  const int rows = p.nseg > 0 ? p.max_len : p.T;
  return dim3((unsigned)((rows + rows_per_block - 1) / rows_per_block), (unsigned)p.H,
              (unsigned)(p.nseg > 0 ? p.nseg : p.B));
}

// ---- dtype helpers (16-bit types move as packed pairs) ----

template <typename T> struct dt;
template <> struct dt<__half> {
  static __device__ __forceinline__ float2 unpack(uint32_t u) {
    __half2 h;
    memcpy(&h, &u, 4);
    return __half22float2(h);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
  }
};
template <> struct dt<__nv_bfloat16> {
  static __device__ __forceinline__ float2 unpack(uint32_t u) {
    __nv_bfloat162 h;
    memcpy(&h, &u, 4);
    return __bfloat1622float2(h);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
  }
};

// 4 consecutive 16-bit values <-> 4 floats (8-byte accesses).
template <typename T> __device__ __forceinline__ void ld4(const T *p, float x[4]) {
  uint2 u = *reinterpret_cast<const uint2 *>(p);
  float2 a = dt<T>::unpack(u.x), b = dt<T>::unpack(u.y);
  x[0] = a.x; x[1] = a.y; x[2] = b.x; x[3] = b.y;
}
template <typename T> __device__ __forceinline__ void st4(T *p, const float x[4]) {
  uint2 u;
  u.x = dt<T>::pack(x[0], x[1]);
  u.y = dt<T>::pack(x[2], x[3]);
  *reinterpret_cast<uint2 *>(p) = u;
}
template <typename T> __device__ __forceinline__ void st4_zero(T *p) {
  *reinterpret_cast<uint2 *>(p) = make_uint2(0u, 0u);
}
// fp32 rows (attn_rotate_qk<float> for attention_probs): plain loads.
template <> __device__ __forceinline__ void ld4<float>(const float *p, float x[4]) {
  x[0] = p[0]; x[1] = p[1]; x[2] = p[2]; x[3] = p[3];
}
template <> __device__ __forceinline__ void st4<float>(float *p, const float x[4]) {
  p[0] = x[0]; p[1] = x[1]; p[2] = x[2]; p[3] = x[3];
}

// ---- tensor-core fragments ----

template <typename T>
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2]);

template <>
__device__ __forceinline__ void mma16816<__half>(float c[4], const uint32_t a[4],
                                                 const uint32_t b[2]) {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::mma16816(c, a, b, 0);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
  // Turing: k16 = two k8 halves; {a0,a1},{b0} cover k 0..7, {a2,a3},{b1} k 8..15.
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[2]), "r"(a[3]), "r"(b[1]));
#endif
}

template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float c[4], const uint32_t a[4],
                                                        const uint32_t b[2]) {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::mma16816(c, a, b, 1);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
  (void)c; (void)a; (void)b;
  __trap();  // the host refuses bf16 below sm_80
#endif
}

// ldmatrix.x4 (TRANS: .trans): lane 8m + i supplies the (16-byte aligned)
// address of row i of 8x8 matrix m; r[m] receives matrix m in the mma
// fragment layout. Smem rows are HD + 8 elements, so the 8 rows of a matrix
// fall in distinct bank groups (conflict-free).
template <bool TRANS>
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
#ifdef ESMT_CUDA_EMULATE
  ::cuemu::ldsm_x4(r, p, TRANS ? 1 : 0);
#else
  const uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
#endif
}

// A[r][k] = X[r0 + r][k0 + k] (16 x 16, X row-major with leading dim ld):
// matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
template <typename T>
__device__ __forceinline__ void frag_a(uint32_t a[4], const T *X, int ld, int r0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4<false>(a, X + (r0 + (lane & 15)) * ld + k0 + (lane >> 4) * 8);
}

// A[r][k] = X[k0 + k][r0 + r] (16 x 16, X holds A transposed: rows = k):
// ldmatrix.x4.trans, matrices in frag_a's order.
template <typename T>
__device__ __forceinline__ void frag_a_t(uint32_t a[4], const T *X, int ld, int r0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4<true>(a, X + (k0 + ((lane >> 4) << 3) + (lane & 7)) * ld + r0 + ((lane >> 3) & 1) * 8);
}

// One B fragment (columns n0 .. n0 + 7), the narrower loads sm_75 keeps:
// B[k][n] = X[n0 + n][k0 + k] (16 x 8) by two 32-bit loads a thread, and
// B[k][n] = X[k0 + k][n0 + n] by ldmatrix.x2.trans.
template <typename T>
__device__ __forceinline__ void frag_b_nt(uint32_t b[2], const T *X, int ld, int n0, int k0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const T *p = X + (n0 + g) * ld + k0 + 2 * t;
  b[0] = *reinterpret_cast<const uint32_t *>(p);
  b[1] = *reinterpret_cast<const uint32_t *>(p + 8);
}
template <typename T>
__device__ __forceinline__ void frag_b_t(uint32_t b[2], const T *X, int ld, int k0, int n0) {
  const T *p = X + (k0 + (threadIdx.x & 15)) * ld + n0;
#ifdef ESMT_CUDA_EMULATE
  ::cuemu::ldsm_x2_trans(b, p);
#else
  const uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(addr)
               : "memory");
#endif
}

// Two B fragments, b[i][*] for columns n0 + 8i .. n0 + 8i + 7:
// B[k][n] = X[n0 + n][k0 + k] (16 x 16), X holds B transposed (rows = n).
// X4 (sm_80+): one ldmatrix.x4; else (sm_75) one narrow load per fragment,
// which ptxas can schedule next to its MMA: the x4 form's 4 live registers
// per operand made the hd 128 backward spill on sm_75.
template <bool X4, typename T>
__device__ __forceinline__ void frag_b_nt2(uint32_t b[2][2], const T *X, int ld, int n0, int k0) {
  if constexpr (X4) {
    const int lane = threadIdx.x & 31;
    uint32_t r[4];
    ldsm_x4<false>(r, X + (n0 + (lane & 7) + ((lane >> 4) << 3)) * ld + k0 + ((lane >> 3) & 1) * 8);
    b[0][0] = r[0]; b[0][1] = r[1]; b[1][0] = r[2]; b[1][1] = r[3];
  } else {
    frag_b_nt(b[0], X, ld, n0, k0);
    frag_b_nt(b[1], X, ld, n0 + 8, k0);
  }
}

// Two B fragments: B[k][n] = X[k0 + k][n0 + n] (16 x 16), X row-major
// (k-major): ldmatrix.x4.trans (X4), else two ldmatrix.x2.trans.
template <bool X4, typename T>
__device__ __forceinline__ void frag_b_t2(uint32_t b[2][2], const T *X, int ld, int k0, int n0) {
  if constexpr (X4) {
    const int lane = threadIdx.x & 31;
    uint32_t r[4];
    ldsm_x4<true>(r, X + (k0 + (lane & 15)) * ld + n0 + (lane >> 4) * 8);
    b[0][0] = r[0]; b[0][1] = r[1]; b[1][0] = r[2]; b[1][1] = r[3];
  } else {
    frag_b_t(b[0], X, ld, k0, n0);
    frag_b_t(b[1], X, ld, k0, n0 + 8);
  }
}

// Accumulator tiles j (keys/cols 8j..8j+7) -> A operand for k-step kk
// (cols 16kk..16kk+15): a0 = (g, 2t), a1 = (g+8, 2t), a2 = (g, 2t+8), a3 = (g+8, 2t+8).
template <typename T>
__device__ __forceinline__ void acc_to_a(uint32_t a[4], const float lo[4], const float hi[4]) {
  a[0] = dt<T>::pack(lo[0], lo[1]);
  a[1] = dt<T>::pack(lo[2], lo[3]);
  a[2] = dt<T>::pack(hi[0], hi[1]);
  a[3] = dt<T>::pack(hi[2], hi[3]);
}

// ---- cp.async (sm_80+) ----
// Global -> shared copies that bypass registers; a copy is visible to the
// issuing thread after cp_async_wait retires its group, to the others after
// that and a __syncthreads. Only the ASYNC instantiations (launched on
// sm_80+) call these; below sm_80 they compile to plain copies so that the
// sm_75 build links.
template <int N>
__device__ __forceinline__ void cp_async(void *dst, const void *src) {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::cp_async(dst, src, N);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  if constexpr (N == 16)  // .cg: L2 only, the tiles are streamed once per block
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(src), "n"(N)
                 : "memory");
#else
  if constexpr (N == 16)
    *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
  else
    *reinterpret_cast<uint2 *>(dst) = *reinterpret_cast<const uint2 *>(src);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::cp_async_commit();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Wait until at most N of this thread's committed groups are in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::cp_async_wait(N);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// ---- tiles through shared memory ----

// Rows [0, nrows) of a tile into s (leading dim LD) from src (row 0 of the
// tile, `stride` elements between rows), columns [0, hd): rows < nvalid
// are copied (cp.async with ASYNC, 16-byte pieces when `vec16`, else 8),
// rows >= nvalid are zeroed with plain stores (so NaN garbage in padding is
// never read). Columns [hd, HD) are left alone (zeroed once per kernel).
template <typename T, int LD, bool ASYNC>
__device__ __forceinline__ void copy_tile(T *s, const T *src, size_t stride, int nrows,
                                          int nvalid, int hd, bool vec16) {
  if (vec16) {
    const int n8 = hd >> 3;
    for (int i = threadIdx.x; i < nrows * n8; i += NTHREADS) {
      const int r = i / n8, c = (i - r * n8) * 8;
      T *d = s + r * LD + c;
      if (r < nvalid) {
        const T *x = src + (size_t)r * stride + c;
        if constexpr (ASYNC)
          cp_async<16>(d, x);
        else
          *reinterpret_cast<uint4 *>(d) = *reinterpret_cast<const uint4 *>(x);
      } else {
        *reinterpret_cast<uint4 *>(d) = make_uint4(0u, 0u, 0u, 0u);
      }
    }
  } else {
    const int n4 = hd >> 2;
    for (int i = threadIdx.x; i < nrows * n4; i += NTHREADS) {
      const int r = i / n4, c = (i - r * n4) * 4;
      T *d = s + r * LD + c;
      if (r < nvalid) {
        const T *x = src + (size_t)r * stride + c;
        if constexpr (ASYNC)
          cp_async<8>(d, x);
        else
          *reinterpret_cast<uint2 *>(d) = *reinterpret_cast<const uint2 *>(x);
      } else {
        st4_zero(d);
      }
    }
  }
}

// 4 rotary table entries (c is a multiple of 4 and hd/2 is too, so with a
// 16-byte aligned table these are 16-byte loads; checked on the host).
__device__ __forceinline__ float4 ld_f4(const float *p) {
  return __ldg(reinterpret_cast<const float4 *>(p));
}
__device__ __forceinline__ float f4_at(const float4 &v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// Zero columns [hd, HD) of `rows` rows (hd = 24 running as HD = 32).
template <typename T, int HD, int LD>
__device__ __forceinline__ void zero_pad_cols(T *s, int rows, int hd) {
  if (hd >= HD) return;
  const int w = HD - hd;
  for (int i = threadIdx.x; i < rows * w; i += NTHREADS) {
    const int r = i / w, c = hd + (i - r * w);
    s[r * LD + c] = T(0.0f);
  }
}

// fp32 staging tile -> global rows: rows < nvalid get (inverse rotary when
// `rot`) * mult, rows in [nvalid, nrows) zeros.
template <typename T, int LDF>
__device__ __forceinline__ void store_tile(T *dst, size_t stride, const float *sf, int nrows, int nvalid, int hd,
                           const float *cs, const float *sn, int t0, float mult, bool rot) {
  if (rot) {
    const int half = hd >> 1, q4 = half >> 2;
    for (int i = threadIdx.x; i < nrows * q4; i += NTHREADS) {
      const int r = i / q4, c = (i - r * q4) * 4;
      T *d = dst + (size_t)r * stride + c;
      if (r < nvalid) {
        const float *a = sf + r * LDF + c, *b = a + half;
        const float4 co = ld_f4(cs + (size_t)(t0 + r) * half + c);
        const float4 si = ld_f4(sn + (size_t)(t0 + r) * half + c);
        float x0[4], x1[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
          const float cv = f4_at(co, k), sv = f4_at(si, k);
          x0[k] = (a[k] * cv + b[k] * sv) * mult;
          x1[k] = (b[k] * cv - a[k] * sv) * mult;
        }
        st4(d, x0);
        st4(d + half, x1);
      } else {
        st4_zero(d);
        st4_zero(d + half);
      }
    }
  } else {
    const int n4 = hd >> 2;
    for (int i = threadIdx.x; i < nrows * n4; i += NTHREADS) {
      const int r = i / n4, c = (i - r * n4) * 4;
      T *d = dst + (size_t)r * stride + c;
      if (r < nvalid) {
        float x[4];
#pragma unroll
        for (int k = 0; k < 4; k++) x[k] = sf[r * LDF + c + k] * mult;
        st4(d, x);
      } else {
        st4_zero(d);
      }
    }
  }
}

// Accumulators of a warp's 16 rows x HD columns -> fp32 staging tile.
template <int HD, int LDF>
__device__ __forceinline__ void stage_acc(float *sf, const float acc[][4], int row0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int n = 0; n < HD / 8; n++) {
    float *p = sf + (row0 + g) * LDF + n * 8 + 2 * t;
    p[0] = acc[n][0];
    p[1] = acc[n][1];
    p[8 * LDF] = acc[n][2];
    p[8 * LDF + 1] = acc[n][3];
  }
}

// Zero rows [r0, r1) of one head's hd columns (rows `stride` apart), by a
// block of THREADS threads.
template <typename T, int THREADS = NTHREADS>
__device__ __forceinline__ void zero_rows(T *dst, size_t stride, int nrows, int hd) {
  const int n4 = hd >> 2;
  for (int i = threadIdx.x; i < nrows * n4; i += THREADS) {
    const int r = i / n4, c = (i - r * n4) * 4;
    st4_zero(dst + (size_t)r * stride + c);
  }
}

// ---- shared-memory plans ----

// NB = 2 (sm_80+, cp.async): the streamed tiles (K, V in forward and dQ;
// Q, dO, lse, D in dK/dV) are double-buffered, the next one loading while
// the current one is computed. NB = 1 (sm_75): one buffer, as before.
template <int HD, int NB> struct plan {
  static constexpr int LD = HD + 8;          // elements per smem row
  static constexpr int LDF = HD + 4;         // floats per staging row
  // Inner tiles of the backward (dQ: keys BI; dK/dV: queries BJ): 32 with
  // two buffers, so that at HD = 64 shared memory (37 KB each) and
  // registers (<= 168) allow 3 blocks per SM; 64 on sm_75 below HD = 128.
  // dK/dV at HD = 128 on sm_75 takes 16 queries a tile: its 128 fp32
  // accumulators plus a 32-query tile's S^T and dP^T spilled at 255
  // registers (sm_75 has no larger tile budget to trade).
  static constexpr int BI = NB == 2 || HD >= 128 ? 32 : 64;
  static constexpr int BJ = NB == 1 && HD >= 128 ? 16 : BI;
  // Key tile of the forward: 32 at HD = 128 with two buffers (52 KB), else 64.
  static constexpr int BK = NB == 2 && HD >= 128 ? 32 : 64;
  // Query rows a forward block owns: 128 (32 a warp, each K/V fragment
  // used twice) on sm_80+ at HD = 64 (226 registers, 2 blocks per SM);
  // else 64. At HD = 16 and 32 the doubled accumulators spill at the
  // 4 and 3 blocks per SM that keep those small tiles' latency hidden, and
  // at HD = 128 they would not fit at all.
  static constexpr int QR = NB == 2 && HD == 64 ? 128 : 64;
  // With two buffers Q is staged in the second (attn_fwd_mma): no own space.
  static constexpr size_t fwd_bytes = ((NB == 2 ? 0 : QR) + NB * 2 * BK) * LD * 2;
  static constexpr size_t stage_bytes = 64 * LDF * 4;
  static constexpr size_t dq_tiles = (2 * 64 + NB * 2 * BI) * LD * 2;
  static constexpr size_t dq_bytes = dq_tiles > stage_bytes ? dq_tiles : stage_bytes;
  static constexpr size_t dkdv_tiles = (2 * 64 + NB * 2 * BJ) * LD * 2 + NB * 2 * BJ * 4;
  static constexpr size_t dkdv_bytes = dkdv_tiles > stage_bytes ? dkdv_tiles : stage_bytes;
  // The non-deterministic dK/dV/dQ kernel adds one tile of dS, [64 keys][BJ
  // queries + 8] (16-byte rows for ldmatrix, conflict-free like LD).
  static constexpr int LDS = BJ + 8;
  static constexpr size_t dkdvq_tiles = dkdv_tiles + 64 * LDS * 2;
  static constexpr size_t dkdvq_bytes = dkdvq_tiles > stage_bytes ? dkdvq_tiles : stage_bytes;
  // Blocks per SM each kernel is built for (__launch_bounds__' second
  // argument: ptxas keeps to 64K / (128 x this) registers). Every kernel is
  // bounded: unbounded, ptxas spends registers freely and the figures move
  // from one change to the next (dK/dV at hd 16 took 133 registers on sm_80,
  // 3 blocks/SM where main had 7). The values are what fits without spills
  // and what shared memory allows (tests/gpu/kernel_budget.txt).
  static constexpr int fwd_blocks =
      NB == 2 ? (HD <= 16 ? 7 : HD <= 32 ? 4 : HD <= 64 ? 2 : 3) : (HD <= 16 ? 7 : HD <= 32 ? 4 : HD <= 64 ? 2 : 1);
  static constexpr int dkdv_blocks =
      NB == 2 ? (HD <= 16 ? 6 : HD <= 32 ? 4 : HD <= 64 ? 3 : 2) : (HD <= 16 ? 5 : HD <= 32 ? 3 : 1);
  // dK/dV with atomic dQ: at hd 16 one block fewer than dK/dV (it spilled
  // at 6 blocks on sm_80-90 and at 5 on sm_75).
  static constexpr int dkdvq_blocks = HD <= 16 ? (NB == 2 ? 5 : 4) : dkdv_blocks;
  static constexpr int dq_blocks =
      NB == 2 ? (HD <= 16 ? 7 : HD <= 32 ? 4 : HD <= 64 ? 4 : 3) : (HD <= 16 ? 5 : HD <= 32 ? 3 : 1);
};

// Rotary once per pass: qr = rot(q) * scale * log2 e and kr = rot(k), in
// fp32 then rounded to T (what the tile loads did per tile before), for
// the valid rows of each sequence (positions relative to the sequence or
// packed segment); other rows are never read. Grid as the attention
// kernels' for 64-row blocks; a thread does 4 column pairs (c, c + hd/2).
template <typename T>
__global__ void __launch_bounds__(NTHREADS) attn_rotate_qk(attn_params p) {
  const int h = blockIdx.y, r0 = blockIdx.x * 64;
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int L = sq.L;
  if (r0 >= L) return;
  const int hd = p.hd, half = hd >> 1, q4 = half >> 2, nrows = min(64, L - r0);
  const size_t Dm = (size_t)p.H * hd, D3 = 3 * Dm;
  const T *src = reinterpret_cast<const T *>(p.qkv) + (sq.tok0 + r0) * D3 + (size_t)h * hd;
  const size_t o0 = (sq.tok0 + r0) * Dm + (size_t)h * hd;
  T *dq = reinterpret_cast<T *>(const_cast<void *>(p.qr)) + o0;
  T *dk = reinterpret_cast<T *>(const_cast<void *>(p.kr)) + o0;
  const float qmult = p.scale * LOG2E_F;
  for (int i = threadIdx.x; i < 2 * nrows * q4; i += NTHREADS) {
    const int which = i >= nrows * q4, j = i - which * nrows * q4;  // 0: Q, 1: K
    const int r = j / q4, c = (j - r * q4) * 4;
    const T *x = src + (size_t)r * D3 + which * Dm + c;
    T *d = (which ? dk : dq) + (size_t)r * Dm + c;
    const float mult = which ? 1.0f : qmult;
    float a[4], b[4], y0[4], y1[4];
    ld4(x, a);
    ld4(x + half, b);
    const float4 co = ld_f4(p.cos + (size_t)(r0 + r) * half + c);
    const float4 si = ld_f4(p.sin + (size_t)(r0 + r) * half + c);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const float cv = f4_at(co, k), sv = f4_at(si, k);
      y0[k] = (a[k] * cv - b[k] * sv) * mult;
      y1[k] = (b[k] * cv + a[k] * sv) * mult;
    }
    st4(d, y0);
    st4(d + half, y1);
  }
}

// Lanes per (token, head) row of attn_bwd_dot: 4 columns each, rounded up
// to a power of two (hd 16: 4, 24 and 32: 8, 64: 16, 128: 32).
__host__ __device__ inline int dot_lanes(int hd) {
  return hd <= 16 ? 4 : hd <= 32 ? 8 : hd <= 64 ? 16 : 32;
}

template <typename T> __device__ __forceinline__ float dot4(const T *a, const T *b) {
  float x[4], y[4];
  ld4(a, x);
  ld4(b, y);
  return x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3];
}
template <> __device__ __forceinline__ float dot4<float>(const float *a, const float *b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
}

// D[b,h,t] = sum_c dO[t,c] O[t,c] (fp32), 0 for t >= L (right-padded
// rows). dot_lanes(hd) lanes per (token, head), 4 columns a lane (8-byte
// loads of 16-bit data, which the 8-byte alignment of out/dout allows),
// then a shuffle sum within the lane group: one scalar column per lane
// left most of a warp's lanes without work at hd 64.
template <typename T>
__global__ void attn_bwd_dot(attn_params p, float *Dout) {
  const int G = dot_lanes(p.hd), lane = threadIdx.x & 31, sub = lane & (G - 1);
  const size_t warp_id = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
  const size_t row = warp_id * (size_t)(32 / G) + (size_t)(lane / G);
  const size_t total = (size_t)p.B * p.T * p.H;
  const int h = (int)(row % p.H);
  const size_t bt = row / p.H;
  const int tt = (int)(bt % p.T), b = (int)(bt / p.T);
  float acc = 0.0f;  // every lane reaches the shuffles (no early return)
  if (row < total) {
    // packed rows: D is computed everywhere; padding entries are never read
    const int L = p.nseg > 0 ? p.T : valid_len(p, b);
    if (tt < L) {
      const size_t off = bt * (size_t)p.H * p.hd + (size_t)h * p.hd;
      const T *o = reinterpret_cast<const T *>(p.out) + off;
      const T *d = reinterpret_cast<const T *>(p.dout) + off;
      for (int c = sub * 4; c < p.hd; c += G * 4) acc += dot4(d + c, o + c);
    }
  }
  for (int s = G >> 1; s > 0; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (row < total && sub == 0) Dout[((size_t)b * p.H + h) * p.T + tt] = acc;
}

}  // namespace esmt_attn

#endif
