// Flash-style multi-head self-attention core (forward and backward) for the
// GPU backends; semantics are esmtb_attention_args' (include/esmtrain/backend.h).
//
// Notation for one (row b, head h) with L = seq_len[b] valid tokens:
//   Qs = rot(scale * q), Kr = rot(k)  (split-half rotary, position = index)
//   S = Qs Kr^T, keys j >= L masked, P = softmax(S), O = P V,
//   lse = log sum_j exp(S_ij).
// Nothing T x T is ever stored: everything is tiled, with an online softmax
// in fp32 (base 2: Q tiles carry scale * log2(e), so exponentials are exp2).
//
// F16 / BF16 (tensor cores, fp32 accumulation), 128 threads = 4 warps:
//   Every tile is staged through registers into shared memory, which is
//   where rotary (and the scale on Q) is applied in fp32 before rounding
//   back to the storage dtype; rows past L are zero-filled there, so NaN
//   garbage in padded rows is never read. Smem rows are padded by 8
//   elements (HD + 8) so fragment loads are bank-conflict free. hd = 24 runs
//   as HD = 32 with zero columns 24..31. MMAs are mma.sync m16n8k16 (f16 or
//   bf16) on sm_80+; on sm_75 each is issued as two m16n8k8 f16 MMAs (same
//   register layout). B operands stored k-major come from ldmatrix.trans.
//
//   forward: grid (ceil(T/64), H, B). A block owns 64 query rows (16 per
//     warp), loops over 64-key tiles up to L only (fully masked tiles are
//     skipped); S = Q K^T, online max/sum, P (rounded to the dtype) . V.
//     Blocks wholly past L write zeros; rows past L in the last tile are
//     computed on zero queries and written as 0 (lse 0).
//     smem: Q, K, V tiles 3 x 64 x (HD+8) elements: 52 KB at HD = 128.
//   backward (FlashAttention-2 style, deterministic, no atomics):
//     1. D = rowsum(dO * O) in fp32 (scratch [B*H*T], stream-ordered alloc).
//     2. dK/dV kernel: a block owns 64 keys, loops over query tiles (64, or
//        32 at HD = 128): S^T = K Q^T, P^T = exp2(S^T - lse2) recomputed from
//        the saved lse, dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - D),
//        dK += dS^T Q.
//     3. dQ kernel: a block owns 64 queries, loops over key tiles (64, or 32
//        at HD = 128): S, P, dP = dO V^T, dS, dQ += dS K.
//     At HD <= 64 the block-resident operands' A fragments (K, V in 2; Q, dO
//     in 3) are held in registers for the whole loop.
//     The cost of determinism: S and dP are computed twice (7 tile GEMMs
//     instead of FA2's 5 with atomic dQ), ~1.4x the backward MMA work.
//     Results go through an fp32 smem staging tile so that the inverse
//     rotary (which pairs columns c and c + hd/2) and the scales (dq *=
//     scale; dk *= ln 2 because Q carried log2 e) are applied before the
//     store; rows past L get zeros.
//     smem: K, V (64 rows) + Q, dO (64 or 32 rows) tiles: 36 KB at HD = 64,
//     51 KB at HD = 128. Everything stays <= 64 KB, the sm_75 limit.
// F32: a simpler scalar path (no tensor cores), one thread per query row
//   (forward, dQ) or per key row (dK/dV), 32-row tiles of the other operand
//   in smem, same algorithm and the same masking rules.
//
// Host emulation: tests/gpu/emu compiles this file with -DESMT_ATTN_EMULATE
// (threads as coroutines, mma/ldmatrix per the PTX layouts) and checks every
// kernel against float64 without a GPU (ctest gpu_attention_emulated).
//
// Argument checks: shapes, dtype, hd, alignment (qkv/out/dout/dqkv 8 bytes,
// the rotary tables 16), and seq_len in [1, T]. The
// seq_len check reads the device array back (a stream sync per call);
// ESMT_CUDA_ATTN_NO_SEQ_CHECK=1 skips it (the core already validates seq_len
// on the host), in which case the kernels clamp seq_len to [0, T].
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef ESMT_ATTN_EMULATE
// Host emulation of the kernels (tests/gpu/emu): warps, shuffles, MMAs and
// ldmatrix are emulated; the host-side entry points are left out.
#include "attn_emulate.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_attention.h"
#include "cuda_device.h"
#endif

#define LOG2E_F 1.44269504088896341f
#define LN2_F 0.69314718055994531f
#define NTHREADS 128

namespace {

#ifdef ESMT_ATTN_EMULATE
alignas(16) unsigned char smem[65536];
#endif

struct attn_params {
  const void *qkv;
  void *out;
  float *lse;
  const void *dout;
  void *dqkv;
  const float *D;  // rowsum(dO * O), [B*H*T]
  const int32_t *seq_len;
  const float *cos, *sin;
  int B, T, H, hd;
  float scale;
};

__device__ __forceinline__ int valid_len(const attn_params &p, int b) {
  int L = p.seq_len[b];
  return L < 0 ? 0 : (L > p.T ? p.T : L);
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

// ---- tensor-core fragments ----

template <typename T>
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2]);

template <>
__device__ __forceinline__ void mma16816<__half>(float c[4], const uint32_t a[4],
                                                 const uint32_t b[2]) {
#if defined(ESMT_ATTN_EMULATE)
  emu_mma16816(c, a, b, 0);
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
#if defined(ESMT_ATTN_EMULATE)
  emu_mma16816(c, a, b, 1);
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

__device__ __forceinline__ uint32_t lds32(const void *p) {
  return *reinterpret_cast<const uint32_t *>(p);
}

// A[r][k] = X[r0 + r][k0 + k] (16 x 16, X row-major with leading dim ld).
template <typename T>
__device__ __forceinline__ void frag_a(uint32_t a[4], const T *X, int ld, int r0, int k0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const T *p = X + (r0 + g) * ld + k0 + 2 * t;
  a[0] = lds32(p);
  a[1] = lds32(p + 8 * ld);
  a[2] = lds32(p + 8);
  a[3] = lds32(p + 8 * ld + 8);
}

// B[k][n] = X[n0 + n][k0 + k] (16 x 8): X holds B transposed (rows = n).
template <typename T>
__device__ __forceinline__ void frag_b_nt(uint32_t b[2], const T *X, int ld, int n0, int k0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const T *p = X + (n0 + g) * ld + k0 + 2 * t;
  b[0] = lds32(p);
  b[1] = lds32(p + 8);
}

// B[k][n] = X[k0 + k][n0 + n] (16 x 8), X row-major: ldmatrix.x2.trans.
template <typename T>
__device__ __forceinline__ void frag_b_t(uint32_t b[2], const T *X, int ld, int k0, int n0) {
  const int lane = threadIdx.x & 15;
  const T *p = X + (k0 + lane) * ld + n0;
#ifdef ESMT_ATTN_EMULATE
  emu_ldsm_x2_trans(b, p);
#else
  uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(addr)
               : "memory");
#endif
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

// ---- tiles through shared memory ----

// 4 rotary table entries (c is a multiple of 4 and hd/2 is too, so with a
// 16-byte aligned table these are 16-byte loads; checked on the host).
__device__ __forceinline__ float4 ld_f4(const float *p) {
  return __ldg(reinterpret_cast<const float4 *>(p));
}
__device__ __forceinline__ float f4_at(const float4 &v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// Rows [0, nrows) of a tile into s (leading dim LD) from src (row 0 of the
// tile, `stride` elements between rows): rows >= nvalid are zeros. With
// `rot`, split-half rotary at positions t0 + r, times `mult`. Columns
// [hd, HD) are left alone (zeroed once per kernel).
template <typename T, int LD>
__device__ __forceinline__ void load_tile(T *s, const T *src, size_t stride, int nrows, int nvalid, int hd,
                          const float *cs, const float *sn, int t0, float mult, bool rot) {
  if (rot) {
    const int half = hd >> 1, q4 = half >> 2;
    for (int i = threadIdx.x; i < nrows * q4; i += NTHREADS) {
      const int r = i / q4, c = (i - r * q4) * 4;
      T *d = s + r * LD + c;
      if (r < nvalid) {
        const T *x = src + (size_t)r * stride + c;
        float a[4], b[4], y0[4], y1[4];
        ld4(x, a);
        ld4(x + half, b);
        const float4 co = ld_f4(cs + (size_t)(t0 + r) * half + c);
        const float4 si = ld_f4(sn + (size_t)(t0 + r) * half + c);
#pragma unroll
        for (int k = 0; k < 4; k++) {
          const float cv = f4_at(co, k), sv = f4_at(si, k);
          y0[k] = (a[k] * cv - b[k] * sv) * mult;
          y1[k] = (b[k] * cv + a[k] * sv) * mult;
        }
        st4(d, y0);
        st4(d + half, y1);
      } else {
        st4_zero(d);
        st4_zero(d + half);
      }
    }
  } else {
    const int n4 = hd >> 2;
    for (int i = threadIdx.x; i < nrows * n4; i += NTHREADS) {
      const int r = i / n4, c = (i - r * n4) * 4;
      T *d = s + r * LD + c;
      if (r < nvalid) {
        *reinterpret_cast<uint2 *>(d) =
            *reinterpret_cast<const uint2 *>(src + (size_t)r * stride + c);
      } else {
        st4_zero(d);
      }
    }
  }
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

// Zero rows [r0, r1) of one head's hd columns (rows `stride` apart).
template <typename T>
__device__ __forceinline__ void zero_rows(T *dst, size_t stride, int nrows, int hd) {
  const int n4 = hd >> 2;
  for (int i = threadIdx.x; i < nrows * n4; i += NTHREADS) {
    const int r = i / n4, c = (i - r * n4) * 4;
    st4_zero(dst + (size_t)r * stride + c);
  }
}

// ---- shared-memory plans ----

template <int HD> struct plan {
  static constexpr int LD = HD + 8;          // elements per smem row
  static constexpr int LDF = HD + 4;         // floats per staging row
  static constexpr int BI = HD >= 128 ? 32 : 64;  // inner tile in backward
  static constexpr size_t fwd_bytes = 3 * 64 * LD * 2;
  static constexpr size_t stage_bytes = 64 * LDF * 4;
  static constexpr size_t bwd_tiles = (2 * 64 + 2 * BI) * LD * 2;
  static constexpr size_t bwd_bytes =
      (bwd_tiles + 2 * BI * 4 > stage_bytes ? bwd_tiles + 2 * BI * 4 : stage_bytes);
};

// ---- forward (tensor cores) ----

template <typename T, int HD, int HDR>
__global__ void __launch_bounds__(NTHREADS) attn_fwd_mma(attn_params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int LD = plan<HD>::LD;
  T *sQ = reinterpret_cast<T *>(smem), *sK = sQ + 64 * LD, *sV = sK + 64 * LD;
  const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * 64;
  constexpr int hd = HDR;  // the real head dim (HD = its padded size)
  const int Tn = p.T, L = valid_len(p, b);
  const size_t Dm = (size_t)p.H * hd, D3 = 3 * Dm;
  T *out = reinterpret_cast<T *>(p.out) + (size_t)b * Tn * Dm + h * hd;
  float *lse = p.lse + ((size_t)b * p.H + h) * Tn;
  const int rows_here = min(64, Tn - q0);
  if (q0 >= L) {  // padding only: zeros
    zero_rows(out + (size_t)q0 * Dm, Dm, rows_here, hd);
    for (int r = threadIdx.x; r < rows_here; r += NTHREADS) lse[q0 + r] = 0.0f;
    return;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  zero_pad_cols<T, HD, LD>(sQ, 3 * 64, hd);
  const T *base = reinterpret_cast<const T *>(p.qkv) + (size_t)b * Tn * D3 + h * hd;
  load_tile<T, LD>(sQ, base + (size_t)q0 * D3, D3, 64, min(64, L - q0), hd, p.cos, p.sin, q0,
                   p.scale * LOG2E_F, true);
  __syncthreads();
  uint32_t qf[HD / 16][4];
#pragma unroll
  for (int kk = 0; kk < HD / 16; kk++) frag_a(qf[kk], sQ, LD, warp * 16, kk * 16);
  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  for (int k0 = 0; k0 < L; k0 += 64) {
    const int kv = min(64, L - k0);
    __syncthreads();  // the previous tile is consumed
    load_tile<T, LD>(sK, base + Dm + (size_t)k0 * D3, D3, 64, kv, hd, p.cos, p.sin, k0, 1.0f, true);
    load_tile<T, LD>(sV, base + 2 * Dm + (size_t)k0 * D3, D3, 64, kv, hd, p.cos, p.sin, k0, 1.0f,
                     false);
    __syncthreads();
    float s[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t bf[2];
        frag_b_nt(bf, sK, LD, j * 8, kk * 16);
        mma16816<T>(s[j], qf[kk], bf);
      }
    }
    if (kv < 64) {
#pragma unroll
      for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          if (j * 8 + 2 * t + (e & 1) >= kv) s[j][e] = -INFINITY;
    }
    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
      mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    // Key k0 is valid, so mx0/mx1 are finite; exp2(-inf) = 0 on the first tile.
    const float a0 = exp2f(m0 - mx0), a1 = exp2f(m1 - mx1);
    m0 = mx0;
    m1 = mx1;
    float rs0 = 0.0f, rs1 = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      s[j][0] = exp2f(s[j][0] - m0);
      s[j][1] = exp2f(s[j][1] - m0);
      s[j][2] = exp2f(s[j][2] - m1);
      s[j][3] = exp2f(s[j][3] - m1);
      rs0 += s[j][0] + s[j][1];
      rs1 += s[j][2] + s[j][3];
    }
    l0 = l0 * a0 + rs0;
    l1 = l1 * a1 + rs1;
#pragma unroll
    for (int n = 0; n < HD / 8; n++) {
      o[n][0] *= a0; o[n][1] *= a0;
      o[n][2] *= a1; o[n][3] *= a1;
    }
    const int ksteps = (kv + 15) >> 4;  // 16-key steps holding a valid key
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      if (kk < ksteps) {
        uint32_t pa[4];
        acc_to_a<T>(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
        for (int n = 0; n < HD / 8; n++) {
          uint32_t bf[2];
          frag_b_t(bf, sV, LD, kk * 16, n * 8);
          mma16816<T>(o[n], pa, bf);
        }
      }
    }
  }
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
#pragma unroll
  for (int n = 0; n < HD / 8; n++) {
    if (n * 8 >= hd) break;
    const int col = n * 8 + 2 * t;
    if (r0 < Tn)
      *reinterpret_cast<uint32_t *>(out + (size_t)r0 * Dm + col) =
          r0 < L ? dt<T>::pack(o[n][0] * inv0, o[n][1] * inv0) : 0u;
    if (r1 < Tn)
      *reinterpret_cast<uint32_t *>(out + (size_t)r1 * Dm + col) =
          r1 < L ? dt<T>::pack(o[n][2] * inv1, o[n][3] * inv1) : 0u;
  }
  if (t == 0) {
    if (r0 < Tn) lse[r0] = r0 < L ? (m0 + log2f(l0)) * LN2_F : 0.0f;
    if (r1 < Tn) lse[r1] = r1 < L ? (m1 + log2f(l1)) * LN2_F : 0.0f;
  }
}

// ---- backward ----

// D[b,h,t] = sum_c dO[t,c] O[t,c] (fp32), 0 for t >= L. One warp per
// (token, head); lanes over columns.
template <typename T>
__global__ void attn_bwd_dot(attn_params p, float *Dout) {
  const size_t warp_id = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const size_t total = (size_t)p.B * p.T * p.H;
  if (warp_id >= total) return;
  const int h = (int)(warp_id % p.H);
  const size_t bt = warp_id / p.H;
  const int tt = (int)(bt % p.T), b = (int)(bt / p.T);
  const int L = valid_len(p, b);
  float acc = 0.0f;
  if (tt < L) {
    const size_t off = bt * (size_t)p.H * p.hd + (size_t)h * p.hd;
    const T *o = reinterpret_cast<const T *>(p.out) + off;
    const T *d = reinterpret_cast<const T *>(p.dout) + off;
    for (int c = lane; c < p.hd; c += 32) acc += (float)d[c] * (float)o[c];
  }
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (lane == 0) Dout[((size_t)b * p.H + h) * p.T + tt] = acc;
}

// dK, dV for 64 keys; loops over query tiles of BI.
template <typename T, int HD, int HDR>
__global__ void __launch_bounds__(NTHREADS) attn_bwd_dkdv_mma(attn_params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int LD = plan<HD>::LD, LDF = plan<HD>::LDF, BI = plan<HD>::BI;
  T *sK = reinterpret_cast<T *>(smem), *sV = sK + 64 * LD, *sQ = sV + 64 * LD, *sO = sQ + BI * LD;
  float *sL = reinterpret_cast<float *>(sO + BI * LD), *sD = sL + BI;
  const int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * 64;
  constexpr int hd = HDR;  // the real head dim (HD = its padded size)
  const int Tn = p.T, L = valid_len(p, b);
  const size_t Dm = (size_t)p.H * hd, D3 = 3 * Dm;
  T *dq_base = reinterpret_cast<T *>(p.dqkv) + (size_t)b * Tn * D3 + h * hd;
  T *dk = dq_base + Dm + (size_t)k0 * D3, *dv = dq_base + 2 * Dm + (size_t)k0 * D3;
  const int rows_here = min(64, Tn - k0);
  if (k0 >= L) {
    zero_rows(dk, D3, rows_here, hd);
    zero_rows(dv, D3, rows_here, hd);
    return;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
  const int kv = min(64, L - k0);
  zero_pad_cols<T, HD, LD>(sK, 128 + 2 * BI, hd);
  const T *base = reinterpret_cast<const T *>(p.qkv) + (size_t)b * Tn * D3 + h * hd;
  const T *gO = reinterpret_cast<const T *>(p.dout) + (size_t)b * Tn * Dm + h * hd;
  const float *lse = p.lse + ((size_t)b * p.H + h) * Tn, *Dr = p.D + ((size_t)b * p.H + h) * Tn;
  load_tile<T, LD>(sK, base + Dm + (size_t)k0 * D3, D3, 64, kv, hd, p.cos, p.sin, k0, 1.0f, true);
  load_tile<T, LD>(sV, base + 2 * Dm + (size_t)k0 * D3, D3, 64, kv, hd, p.cos, p.sin, k0, 1.0f,
                   false);
  // K and V operand fragments stay in registers when they fit (HD <= 64).
  constexpr bool kCache = HD <= 64;
  uint32_t kc[kCache ? HD / 16 : 1][4], vc[kCache ? HD / 16 : 1][4];
  if constexpr (kCache) {
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
      frag_a(kc[kk], sK, LD, warp * 16, kk * 16);
      frag_a(vc[kk], sV, LD, warp * 16, kk * 16);
    }
  }
  float dK[HD / 8][4], dV[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) dK[n][e] = dV[n][e] = 0.0f;
  const float qmult = p.scale * LOG2E_F;
  for (int i0 = 0; i0 < L; i0 += BI) {
    const int qv = min(BI, L - i0);
    __syncthreads();
    load_tile<T, LD>(sQ, base + (size_t)i0 * D3, D3, BI, qv, hd, p.cos, p.sin, i0, qmult, true);
    load_tile<T, LD>(sO, gO + (size_t)i0 * Dm, Dm, BI, qv, hd, p.cos, p.sin, i0, 1.0f, false);
    for (int r = threadIdx.x; r < BI; r += NTHREADS) {
      sL[r] = r < qv ? lse[i0 + r] * LOG2E_F : INFINITY;
      sD[r] = r < qv ? Dr[i0 + r] : 0.0f;
    }
    __syncthreads();
    // S^T (16 keys x BI queries) and dP^T = V dO^T
    float st[BI / 8][4], dpt[BI / 8][4];
#pragma unroll
    for (int j = 0; j < BI / 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) st[j][e] = dpt[j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
      uint32_t ka[4], va[4];
      if constexpr (kCache) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          ka[e] = kc[kk][e];
          va[e] = vc[kk][e];
        }
      } else {
        frag_a(ka, sK, LD, warp * 16, kk * 16);
        frag_a(va, sV, LD, warp * 16, kk * 16);
      }
#pragma unroll
      for (int j = 0; j < BI / 8; j++) {
        uint32_t bq[2], bo[2];
        frag_b_nt(bq, sQ, LD, j * 8, kk * 16);
        frag_b_nt(bo, sO, LD, j * 8, kk * 16);
        mma16816<T>(st[j], ka, bq);
        mma16816<T>(dpt[j], va, bo);
      }
    }
    // P^T and dS^T (columns are queries; invalid ones have lse2 = +inf -> P = 0)
#pragma unroll
    for (int j = 0; j < BI / 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int col = j * 8 + 2 * t + (e & 1);
        const float pv = exp2f(st[j][e] - sL[col]);
        st[j][e] = pv;
        dpt[j][e] = pv * (dpt[j][e] - sD[col]);
      }
    // dV += P^T dO, dK += dS^T Q
#pragma unroll
    for (int kk = 0; kk < BI / 16; kk++) {
      uint32_t pa[4], da[4];
      acc_to_a<T>(pa, st[2 * kk], st[2 * kk + 1]);
      acc_to_a<T>(da, dpt[2 * kk], dpt[2 * kk + 1]);
#pragma unroll
      for (int n = 0; n < HD / 8; n++) {
        uint32_t bo[2], bq[2];
        frag_b_t(bo, sO, LD, kk * 16, n * 8);
        frag_b_t(bq, sQ, LD, kk * 16, n * 8);
        mma16816<T>(dV[n], pa, bo);
        mma16816<T>(dK[n], da, bq);
      }
    }
  }
  // Out through the fp32 staging tile: dv as is, dk with inverse rotary and
  // ln 2 (Q carried log2 e).
  float *sf = reinterpret_cast<float *>(smem);
  __syncthreads();
  stage_acc<HD, LDF>(sf, dV, warp * 16);
  __syncthreads();
  store_tile<T, LDF>(dv, D3, sf, rows_here, kv, hd, p.cos, p.sin, k0, 1.0f, false);
  __syncthreads();
  stage_acc<HD, LDF>(sf, dK, warp * 16);
  __syncthreads();
  store_tile<T, LDF>(dk, D3, sf, rows_here, kv, hd, p.cos, p.sin, k0, LN2_F, true);
}

// dQ for 64 queries; loops over key tiles of BI.
template <typename T, int HD, int HDR>
__global__ void __launch_bounds__(NTHREADS) attn_bwd_dq_mma(attn_params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int LD = plan<HD>::LD, LDF = plan<HD>::LDF, BI = plan<HD>::BI;
  T *sQ = reinterpret_cast<T *>(smem), *sO = sQ + 64 * LD, *sK = sO + 64 * LD, *sV = sK + BI * LD;
  const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * 64;
  constexpr int hd = HDR;  // the real head dim (HD = its padded size)
  const int Tn = p.T, L = valid_len(p, b);
  const size_t Dm = (size_t)p.H * hd, D3 = 3 * Dm;
  T *dq = reinterpret_cast<T *>(p.dqkv) + (size_t)b * Tn * D3 + h * hd + (size_t)q0 * D3;
  const int rows_here = min(64, Tn - q0);
  if (q0 >= L) {
    zero_rows(dq, D3, rows_here, hd);
    return;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int qv = min(64, L - q0);
  zero_pad_cols<T, HD, LD>(sQ, 128 + 2 * BI, hd);
  const T *base = reinterpret_cast<const T *>(p.qkv) + (size_t)b * Tn * D3 + h * hd;
  const T *gO = reinterpret_cast<const T *>(p.dout) + (size_t)b * Tn * Dm + h * hd;
  const float *lse = p.lse + ((size_t)b * p.H + h) * Tn, *Dr = p.D + ((size_t)b * p.H + h) * Tn;
  load_tile<T, LD>(sQ, base + (size_t)q0 * D3, D3, 64, qv, hd, p.cos, p.sin, q0,
                   p.scale * LOG2E_F, true);
  load_tile<T, LD>(sO, gO + (size_t)q0 * Dm, Dm, 64, qv, hd, p.cos, p.sin, q0, 1.0f, false);
  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
  const float l20 = r0 < L ? lse[r0] * LOG2E_F : INFINITY;
  const float l21 = r1 < L ? lse[r1] * LOG2E_F : INFINITY;
  const float D0 = r0 < L ? Dr[r0] : 0.0f, D1 = r1 < L ? Dr[r1] : 0.0f;
  // Q and dO operand fragments stay in registers when they fit (HD <= 64).
  constexpr bool kCache = HD <= 64;
  uint32_t qc[kCache ? HD / 16 : 1][4], oc[kCache ? HD / 16 : 1][4];
  if constexpr (kCache) {
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
      frag_a(qc[kk], sQ, LD, warp * 16, kk * 16);
      frag_a(oc[kk], sO, LD, warp * 16, kk * 16);
    }
  }
  float dQ[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; n++) dQ[n][0] = dQ[n][1] = dQ[n][2] = dQ[n][3] = 0.0f;
  for (int k0 = 0; k0 < L; k0 += BI) {
    const int kv = min(BI, L - k0);
    __syncthreads();
    load_tile<T, LD>(sK, base + Dm + (size_t)k0 * D3, D3, BI, kv, hd, p.cos, p.sin, k0, 1.0f, true);
    load_tile<T, LD>(sV, base + 2 * Dm + (size_t)k0 * D3, D3, BI, kv, hd, p.cos, p.sin, k0, 1.0f,
                     false);
    __syncthreads();
    float s[BI / 8][4], dp[BI / 8][4];
#pragma unroll
    for (int j = 0; j < BI / 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
      uint32_t qa[4], oa[4];
      if constexpr (kCache) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          qa[e] = qc[kk][e];
          oa[e] = oc[kk][e];
        }
      } else {
        frag_a(qa, sQ, LD, warp * 16, kk * 16);
        frag_a(oa, sO, LD, warp * 16, kk * 16);
      }
#pragma unroll
      for (int j = 0; j < BI / 8; j++) {
        uint32_t bk[2], bv[2];
        frag_b_nt(bk, sK, LD, j * 8, kk * 16);
        frag_b_nt(bv, sV, LD, j * 8, kk * 16);
        mma16816<T>(s[j], qa, bk);
        mma16816<T>(dp[j], oa, bv);
      }
    }
#pragma unroll
    for (int j = 0; j < BI / 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int col = j * 8 + 2 * t + (e & 1);
        const bool hi = e >= 2;
        float pv = exp2f(s[j][e] - (hi ? l21 : l20));
        if (col >= kv) pv = 0.0f;
        s[j][e] = pv * (dp[j][e] - (hi ? D1 : D0));  // dS
      }
#pragma unroll
    for (int kk = 0; kk < BI / 16; kk++) {
      uint32_t da[4];
      acc_to_a<T>(da, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int n = 0; n < HD / 8; n++) {
        uint32_t bk[2];
        frag_b_t(bk, sK, LD, kk * 16, n * 8);
        mma16816<T>(dQ[n], da, bk);
      }
    }
  }
  float *sf = reinterpret_cast<float *>(smem);
  __syncthreads();
  stage_acc<HD, LDF>(sf, dQ, warp * 16);
  __syncthreads();
  store_tile<T, LDF>(dq, D3, sf, rows_here, qv, hd, p.cos, p.sin, q0, p.scale, true);
}

// ---- F32: scalar tiled path ----

#define F32_ROWS 64  // threads (rows) per block
#define F32_TILE 32  // rows of the other operand per smem tile
// smem: two [F32_TILE, hd] fp32 tiles (+ lse and D rows in dK/dV): <= 33 KB.
constexpr size_t f32_fwd_bytes(int hd) { return 2 * F32_TILE * (size_t)hd * 4; }
constexpr size_t f32_bwd_bytes(int hd) { return f32_fwd_bytes(hd) + 2 * F32_TILE * 4; }

template <int HD>
__device__ void f32_load_row(float *x, const float *src, bool valid, const float *cs,
                             const float *sn, int pos, float mult, bool rot) {
  if (!valid) {
#pragma unroll
    for (int c = 0; c < HD; c++) x[c] = 0.0f;
    return;
  }
  if (!rot) {
#pragma unroll
    for (int c = 0; c < HD; c++) x[c] = src[c] * mult;
    return;
  }
  constexpr int half = HD / 2;
#pragma unroll
  for (int c = 0; c < half; c++) {
    const float a = src[c], bb = src[c + half];
    const float cv = cs[(size_t)pos * half + c], sv = sn[(size_t)pos * half + c];
    x[c] = (a * cv - bb * sv) * mult;
    x[c + half] = (bb * cv + a * sv) * mult;
  }
}

// Cooperative tile of F32_TILE rows (rows >= nvalid zero), rotated if asked.
template <int HD>
__device__ void f32_load_tile(float *s, const float *src, size_t stride, int nvalid,
                              const float *cs, const float *sn, int t0, float mult, bool rot) {
  constexpr int half = HD / 2;
  if (rot) {
    for (int i = threadIdx.x; i < F32_TILE * half; i += blockDim.x) {
      const int r = i / half, c = i - r * half;
      float y0 = 0.0f, y1 = 0.0f;
      if (r < nvalid) {
        const float a = src[(size_t)r * stride + c], bb = src[(size_t)r * stride + c + half];
        const float cv = cs[(size_t)(t0 + r) * half + c], sv = sn[(size_t)(t0 + r) * half + c];
        y0 = (a * cv - bb * sv) * mult;
        y1 = (bb * cv + a * sv) * mult;
      }
      s[r * HD + c] = y0;
      s[r * HD + c + half] = y1;
    }
  } else {
    for (int i = threadIdx.x; i < F32_TILE * HD; i += blockDim.x) {
      const int r = i / HD, c = i - r * HD;
      s[r * HD + c] = r < nvalid ? src[(size_t)r * stride + c] * mult : 0.0f;
    }
  }
}

template <int HD>
__device__ void f32_store_row(float *dst, const float *x, bool valid, const float *cs,
                              const float *sn, int pos, float mult, bool rot) {
  if (!valid) {
#pragma unroll
    for (int c = 0; c < HD; c++) dst[c] = 0.0f;
    return;
  }
  if (!rot) {
#pragma unroll
    for (int c = 0; c < HD; c++) dst[c] = x[c] * mult;
    return;
  }
  constexpr int half = HD / 2;
#pragma unroll
  for (int c = 0; c < half; c++) {
    const float a = x[c], bb = x[c + half];
    const float cv = cs[(size_t)pos * half + c], sv = sn[(size_t)pos * half + c];
    dst[c] = (a * cv + bb * sv) * mult;
    dst[c + half] = (bb * cv - a * sv) * mult;
  }
}

template <int HD>
__global__ void __launch_bounds__(F32_ROWS) attn_fwd_f32(attn_params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  float *sK = reinterpret_cast<float *>(smem), *sV = sK + F32_TILE * HD;
  const int b = blockIdx.z, h = blockIdx.y, row = blockIdx.x * F32_ROWS + threadIdx.x;
  const int Tn = p.T, L = valid_len(p, b);
  const size_t Dm = (size_t)p.H * HD, D3 = 3 * Dm;
  const float *base = reinterpret_cast<const float *>(p.qkv) + (size_t)b * Tn * D3 + h * HD;
  float *out = reinterpret_cast<float *>(p.out) + (size_t)b * Tn * Dm + h * HD;
  float *lse = p.lse + ((size_t)b * p.H + h) * Tn;
  const bool valid = row < L;
  float q[HD], acc[HD];
  f32_load_row<HD>(q, base + (size_t)row * D3, valid, p.cos, p.sin, row, p.scale * LOG2E_F, true);
#pragma unroll
  for (int c = 0; c < HD; c++) acc[c] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int kend = min(L, blockIdx.x * F32_ROWS < L ? L : 0);  // blocks past L skip the loop
  for (int k0 = 0; k0 < kend; k0 += F32_TILE) {
    const int kv = min(F32_TILE, L - k0);
    __syncthreads();
    f32_load_tile<HD>(sK, base + Dm + (size_t)k0 * D3, D3, kv, p.cos, p.sin, k0, 1.0f, true);
    f32_load_tile<HD>(sV, base + 2 * Dm + (size_t)k0 * D3, D3, kv, p.cos, p.sin, k0, 1.0f, false);
    __syncthreads();
    float s[F32_TILE];
    float mt = m;
#pragma unroll
    for (int j = 0; j < F32_TILE; j++) {
      float d = 0.0f;
#pragma unroll
      for (int c = 0; c < HD; c++) d += q[c] * sK[j * HD + c];
      s[j] = j < kv ? d : -INFINITY;
      mt = fmaxf(mt, s[j]);
    }
    const float a = exp2f(m - mt);
    m = mt;
    l *= a;
#pragma unroll
    for (int c = 0; c < HD; c++) acc[c] *= a;
#pragma unroll
    for (int j = 0; j < F32_TILE; j++) {
      const float pj = exp2f(s[j] - m);
      l += pj;
#pragma unroll
      for (int c = 0; c < HD; c++) acc[c] += pj * sV[j * HD + c];
    }
  }
  if (row < Tn) {
    const float inv = valid ? 1.0f / l : 0.0f;
    f32_store_row<HD>(out + (size_t)row * Dm, acc, valid, p.cos, p.sin, row, inv, false);
    lse[row] = valid ? (m + log2f(l)) * LN2_F : 0.0f;
  }
}

template <int HD>
__global__ void __launch_bounds__(F32_ROWS) attn_bwd_dkdv_f32(attn_params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  float *sQ = reinterpret_cast<float *>(smem), *sO = sQ + F32_TILE * HD, *sL = sO + F32_TILE * HD;
  float *sD = sL + F32_TILE;
  const int b = blockIdx.z, h = blockIdx.y, row = blockIdx.x * F32_ROWS + threadIdx.x;
  const int Tn = p.T, L = valid_len(p, b);
  const size_t Dm = (size_t)p.H * HD, D3 = 3 * Dm;
  const float *base = reinterpret_cast<const float *>(p.qkv) + (size_t)b * Tn * D3 + h * HD;
  const float *gO = reinterpret_cast<const float *>(p.dout) + (size_t)b * Tn * Dm + h * HD;
  float *dbase = reinterpret_cast<float *>(p.dqkv) + (size_t)b * Tn * D3 + h * HD;
  const float *lse = p.lse + ((size_t)b * p.H + h) * Tn, *Dr = p.D + ((size_t)b * p.H + h) * Tn;
  const bool valid = row < L;
  float k[HD], v[HD], dk[HD], dv[HD];
  f32_load_row<HD>(k, base + Dm + (size_t)row * D3, valid, p.cos, p.sin, row, 1.0f, true);
  f32_load_row<HD>(v, base + 2 * Dm + (size_t)row * D3, valid, p.cos, p.sin, row, 1.0f, false);
#pragma unroll
  for (int c = 0; c < HD; c++) dk[c] = dv[c] = 0.0f;
  const float qmult = p.scale * LOG2E_F;
  const int iend = blockIdx.x * F32_ROWS < L ? L : 0;
  for (int i0 = 0; i0 < iend; i0 += F32_TILE) {
    const int qv = min(F32_TILE, L - i0);
    __syncthreads();
    f32_load_tile<HD>(sQ, base + (size_t)i0 * D3, D3, qv, p.cos, p.sin, i0, qmult, true);
    f32_load_tile<HD>(sO, gO + (size_t)i0 * Dm, Dm, qv, p.cos, p.sin, i0, 1.0f, false);
    for (int r = threadIdx.x; r < F32_TILE; r += blockDim.x) {
      sL[r] = r < qv ? lse[i0 + r] * LOG2E_F : INFINITY;
      sD[r] = r < qv ? Dr[i0 + r] : 0.0f;
    }
    __syncthreads();
    if (valid) {
      for (int i = 0; i < qv; i++) {
        float s = 0.0f, dp = 0.0f;
#pragma unroll
        for (int c = 0; c < HD; c++) {
          s += k[c] * sQ[i * HD + c];
          dp += v[c] * sO[i * HD + c];
        }
        const float pv = exp2f(s - sL[i]);
        const float ds = pv * (dp - sD[i]);
#pragma unroll
        for (int c = 0; c < HD; c++) {
          dv[c] += pv * sO[i * HD + c];
          dk[c] += ds * sQ[i * HD + c];
        }
      }
    }
  }
  if (row < Tn) {
    f32_store_row<HD>(dbase + Dm + (size_t)row * D3, dk, valid, p.cos, p.sin, row, LN2_F, true);
    f32_store_row<HD>(dbase + 2 * Dm + (size_t)row * D3, dv, valid, p.cos, p.sin, row, 1.0f,
                      false);
  }
}

template <int HD>
__global__ void __launch_bounds__(F32_ROWS) attn_bwd_dq_f32(attn_params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  float *sK = reinterpret_cast<float *>(smem), *sV = sK + F32_TILE * HD;
  const int b = blockIdx.z, h = blockIdx.y, row = blockIdx.x * F32_ROWS + threadIdx.x;
  const int Tn = p.T, L = valid_len(p, b);
  const size_t Dm = (size_t)p.H * HD, D3 = 3 * Dm;
  const float *base = reinterpret_cast<const float *>(p.qkv) + (size_t)b * Tn * D3 + h * HD;
  const float *gO = reinterpret_cast<const float *>(p.dout) + (size_t)b * Tn * Dm + h * HD;
  float *dbase = reinterpret_cast<float *>(p.dqkv) + (size_t)b * Tn * D3 + h * HD;
  const float *lse = p.lse + ((size_t)b * p.H + h) * Tn, *Dr = p.D + ((size_t)b * p.H + h) * Tn;
  const bool valid = row < L;
  float q[HD], o[HD], dq[HD];
  f32_load_row<HD>(q, base + (size_t)row * D3, valid, p.cos, p.sin, row, p.scale * LOG2E_F, true);
  f32_load_row<HD>(o, gO + (size_t)row * Dm, valid, p.cos, p.sin, row, 1.0f, false);
#pragma unroll
  for (int c = 0; c < HD; c++) dq[c] = 0.0f;
  const float l2 = valid ? lse[row] * LOG2E_F : INFINITY, Dv = valid ? Dr[row] : 0.0f;
  const int kend = blockIdx.x * F32_ROWS < L ? L : 0;
  for (int k0 = 0; k0 < kend; k0 += F32_TILE) {
    const int kv = min(F32_TILE, L - k0);
    __syncthreads();
    f32_load_tile<HD>(sK, base + Dm + (size_t)k0 * D3, D3, kv, p.cos, p.sin, k0, 1.0f, true);
    f32_load_tile<HD>(sV, base + 2 * Dm + (size_t)k0 * D3, D3, kv, p.cos, p.sin, k0, 1.0f, false);
    __syncthreads();
    if (valid) {
      for (int j = 0; j < kv; j++) {
        float s = 0.0f, dp = 0.0f;
#pragma unroll
        for (int c = 0; c < HD; c++) {
          s += q[c] * sK[j * HD + c];
          dp += o[c] * sV[j * HD + c];
        }
        const float ds = exp2f(s - l2) * (dp - Dv);
#pragma unroll
        for (int c = 0; c < HD; c++) dq[c] += ds * sK[j * HD + c];
      }
    }
  }
  if (row < Tn)
    f32_store_row<HD>(dbase + (size_t)row * D3, dq, valid, p.cos, p.sin, row, p.scale, true);
}

// ---- host side ----
#ifndef ESMT_ATTN_EMULATE

esmtb_status launch_err(const char *op) { return cuda_check(cudaGetLastError(), op); }

template <typename KernelT>
esmtb_status set_smem(KernelT kernel, size_t bytes, const char *op) {
  if (bytes <= 48 * 1024) return 0;
  return cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)bytes),
                    op);
}

template <typename T, int HD, int HDR>
esmtb_status fwd_mma(const attn_params &p, cudaStream_t st) {
  const size_t bytes = plan<HD>::fwd_bytes;
  esmtb_status rc = set_smem(attn_fwd_mma<T, HD, HDR>, bytes, "attention_forward: smem");
  if (rc) return rc;
  dim3 grid((p.T + 63) / 64, p.H, p.B);
  attn_fwd_mma<T, HD, HDR><<<grid, NTHREADS, bytes, st>>>(p);
  return launch_err("attention_forward");
}

template <typename T, int HD, int HDR>
esmtb_status bwd_mma(const attn_params &p, cudaStream_t st) {
  const size_t bytes = plan<HD>::bwd_bytes;
  esmtb_status rc = set_smem(attn_bwd_dkdv_mma<T, HD, HDR>, bytes, "attention_backward: smem");
  if (!rc) rc = set_smem(attn_bwd_dq_mma<T, HD, HDR>, bytes, "attention_backward: smem");
  if (rc) return rc;
  dim3 grid((p.T + 63) / 64, p.H, p.B);
  attn_bwd_dkdv_mma<T, HD, HDR><<<grid, NTHREADS, bytes, st>>>(p);
  attn_bwd_dq_mma<T, HD, HDR><<<grid, NTHREADS, bytes, st>>>(p);
  return launch_err("attention_backward");
}

template <int HD>
esmtb_status fwd_f32(const attn_params &p, cudaStream_t st) {
  dim3 grid((p.T + F32_ROWS - 1) / F32_ROWS, p.H, p.B);
  attn_fwd_f32<HD><<<grid, F32_ROWS, f32_fwd_bytes(HD), st>>>(p);
  return launch_err("attention_forward");
}

template <int HD>
esmtb_status bwd_f32(const attn_params &p, cudaStream_t st) {
  dim3 grid((p.T + F32_ROWS - 1) / F32_ROWS, p.H, p.B);
  attn_bwd_dkdv_f32<HD><<<grid, F32_ROWS, f32_bwd_bytes(HD), st>>>(p);
  attn_bwd_dq_f32<HD><<<grid, F32_ROWS, f32_fwd_bytes(HD), st>>>(p);
  return launch_err("attention_backward");
}

template <typename T>
esmtb_status dispatch_mma(const attn_params &p, int backward, cudaStream_t st) {
  switch (p.hd) {
    case 16: return backward ? bwd_mma<T, 16, 16>(p, st) : fwd_mma<T, 16, 16>(p, st);
    case 24: return backward ? bwd_mma<T, 32, 24>(p, st) : fwd_mma<T, 32, 24>(p, st);
    case 32: return backward ? bwd_mma<T, 32, 32>(p, st) : fwd_mma<T, 32, 32>(p, st);
    case 64: return backward ? bwd_mma<T, 64, 64>(p, st) : fwd_mma<T, 64, 64>(p, st);
    default: return backward ? bwd_mma<T, 128, 128>(p, st) : fwd_mma<T, 128, 128>(p, st);
  }
}

esmtb_status dispatch_f32(const attn_params &p, int backward, cudaStream_t st) {
  switch (p.hd) {
    case 16: return backward ? bwd_f32<16>(p, st) : fwd_f32<16>(p, st);
    case 24: return backward ? bwd_f32<24>(p, st) : fwd_f32<24>(p, st);
    case 32: return backward ? bwd_f32<32>(p, st) : fwd_f32<32>(p, st);
    case 64: return backward ? bwd_f32<64>(p, st) : fwd_f32<64>(p, st);
    default: return backward ? bwd_f32<128>(p, st) : fwd_f32<128>(p, st);
  }
}

bool aligned8(const void *ptr) { return ((uintptr_t)ptr & 7u) == 0; }

esmtb_status check_args(esmtb_device *dev, const esmtb_attention_args *a, int backward,
                        cudaStream_t st) {
  const char *op = backward ? "attention_backward" : "attention_forward";
  if (!dev || !a) return cuda_fail(1, "%s: NULL argument", op);
  if (!a->qkv || !a->seq_len || !a->rope_cos || !a->rope_sin || !a->out || !a->lse)
    return cuda_fail(1, "%s: NULL argument", op);
  if (backward && (!a->dout || !a->dqkv)) return cuda_fail(1, "%s: NULL gradient", op);
  if (a->dtype != ESMTB_F32 && a->dtype != ESMTB_F16 && a->dtype != ESMTB_BF16)
    return cuda_fail(8, "%s: dtype %d unsupported (f32, f16, bf16)", op, (int)a->dtype);
  if (a->hd != 16 && a->hd != 24 && a->hd != 32 && a->hd != 64 && a->hd != 128)
    return cuda_fail(8, "%s: head dim %d unsupported (16, 24, 32, 64, 128)", op, a->hd);
  if (a->B <= 0 || a->T <= 0 || a->H <= 0 || a->B > 65535 || a->H > 65535 ||
      (long long)a->T * a->H * a->hd * 3 > INT32_MAX)
    return cuda_fail(1, "%s: bad shape B=%d T=%d H=%d hd=%d", op, a->B, a->T, a->H, a->hd);
  if (!isfinite(a->scale)) return cuda_fail(1, "%s: scale is not finite", op);
  if (!aligned8(a->qkv) || !aligned8(a->out) || (backward && (!aligned8(a->dout) ||
                                                              !aligned8(a->dqkv))))
    return cuda_fail(1, "%s: qkv/out/dout/dqkv must be 8-byte aligned", op);
  if (((uintptr_t)a->rope_cos & 15u) || ((uintptr_t)a->rope_sin & 15u))
    return cuda_fail(1, "%s: rope_cos/rope_sin must be 16-byte aligned", op);
  esmtb_status rc = cuda_check(cudaSetDevice(dev->ordinal), op);
  if (rc) return rc;
  if (a->dtype == ESMTB_BF16) {
    int major = 0;
    rc = cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                           dev->ordinal), op);
    if (rc) return rc;
    if (major < 8) return cuda_fail(8, "%s: bf16 needs compute capability 8.0+", op);
  }
  const char *skip = getenv("ESMT_CUDA_ATTN_NO_SEQ_CHECK");
  if (!(skip && skip[0] == '1')) {
    int32_t small[64];
    int32_t *h = a->B <= 64 ? small : (int32_t *)malloc((size_t)a->B * sizeof(int32_t));
    if (!h) return cuda_fail(2, "%s: out of host memory", op);
    rc = cuda_check(cudaMemcpyAsync(h, a->seq_len, (size_t)a->B * sizeof(int32_t),
                                    cudaMemcpyDeviceToHost, st), op);
    if (!rc) rc = cuda_check(cudaStreamSynchronize(st), op);
    for (int b = 0; !rc && b < a->B; b++)
      if (h[b] < 1 || h[b] > a->T)
        rc = cuda_fail(1, "%s: seq_len[%d] = %d outside [1, %d]", op, b, h[b], a->T);
    if (h != small) free(h);
    if (rc) return rc;
  }
  return 0;
}

attn_params make_params(const esmtb_attention_args *a) {
  attn_params p;
  p.qkv = a->qkv;
  p.out = a->out;
  p.lse = a->lse;
  p.dout = a->dout;
  p.dqkv = a->dqkv;
  p.D = NULL;
  p.seq_len = a->seq_len;
  p.cos = a->rope_cos;
  p.sin = a->rope_sin;
  p.B = a->B;
  p.T = a->T;
  p.H = a->H;
  p.hd = a->hd;
  p.scale = a->scale;
  return p;
}

}  // namespace

extern "C" esmtb_status cuda_attention_forward(esmtb_device *dev, const esmtb_attention_args *a,
                                               esmtb_stream *s) {
  cudaStream_t st = cuda_stream_of(s);
  esmtb_status rc = check_args(dev, a, 0, st);
  if (rc) return rc;
  const attn_params p = make_params(a);
  switch (a->dtype) {
    case ESMTB_F16: return dispatch_mma<__half>(p, 0, st);
    case ESMTB_BF16: return dispatch_mma<__nv_bfloat16>(p, 0, st);
    default: return dispatch_f32(p, 0, st);
  }
}

extern "C" esmtb_status cuda_attention_backward(esmtb_device *dev, const esmtb_attention_args *a,
                                                esmtb_stream *s) {
  cudaStream_t st = cuda_stream_of(s);
  esmtb_status rc = check_args(dev, a, 1, st);
  if (rc) return rc;
  attn_params p = make_params(a);
  const size_t rows = (size_t)a->B * a->H * a->T;
  float *D = NULL;
  rc = cuda_check(cudaMallocAsync((void **)&D, rows * sizeof(float), st),
                  "attention_backward: scratch");
  if (rc) return rc;
  p.D = D;
  const size_t threads = rows * 32;
  const unsigned blocks = (unsigned)((threads + 255) / 256);
  switch (a->dtype) {
    case ESMTB_F16:
      attn_bwd_dot<__half><<<blocks, 256, 0, st>>>(p, D);
      rc = launch_err("attention_backward: rowsum");
      if (!rc) rc = dispatch_mma<__half>(p, 1, st);
      break;
    case ESMTB_BF16:
      attn_bwd_dot<__nv_bfloat16><<<blocks, 256, 0, st>>>(p, D);
      rc = launch_err("attention_backward: rowsum");
      if (!rc) rc = dispatch_mma<__nv_bfloat16>(p, 1, st);
      break;
    default:
      attn_bwd_dot<float><<<blocks, 256, 0, st>>>(p, D);
      rc = launch_err("attention_backward: rowsum");
      if (!rc) rc = dispatch_f32(p, 1, st);
      break;
  }
  esmtb_status rc2 = cuda_check(cudaFreeAsync(D, st), "attention_backward: scratch");
  return rc ? rc : rc2;
}

extern "C" void cuda_fill_attention_ops(esmtb_ops *ops) {
  ops->attention_forward = cuda_attention_forward;
  ops->attention_backward = cuda_attention_backward;
}
#else
}  // namespace
#endif  // ESMT_ATTN_EMULATE
