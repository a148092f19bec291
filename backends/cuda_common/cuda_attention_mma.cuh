/* SPDX-License-Identifier: MIT */
// Tensor-core (mma.sync, F16/BF16) attention kernels: forward, the
// deterministic two-kernel backward (dK/dV, then dQ) and the optional
// non-deterministic one (dK/dV with atomic dQ, then dQ's store). See the
// algorithm notes at the top of cuda_attention.cu.
#ifndef ESMTRAIN_CUDA_ATTENTION_MMA_CUH
#define ESMTRAIN_CUDA_ATTENTION_MMA_CUH

#include "cuda_attention_device.cuh"

namespace esmt_attn {

// The host launches the ASYNC (cp.async) variants on sm_80+ only and the
// others on sm_75 only (cuda_attention.cu), so in each architecture's
// binary the other variant is a stub: no dead code for ptxas to allocate.
#if defined(__CUDA_ARCH__) && !defined(ESMT_CUDA_EMULATE)
#define ESMT_ATTN_ARCH_STUB(ASYNC)                    \
  if constexpr ((ASYNC) != (__CUDA_ARCH__ >= 800)) { \
    __trap();                                         \
    return;                                           \
  }
#else
#define ESMT_ATTN_ARCH_STUB(ASYNC)
#endif

// The streamed tiles of every kernel's loop (K/V in forward and dQ; Q, dO,
// lse, D in dK/dV), tile i0 of `step` rows. On sm_80+ (ASYNC) the next
// tile is issued into the other buffer and this one waited for (this
// thread's copies; the caller's __syncthreads makes everyone's visible);
// on sm_75 the one buffer is refilled after a barrier. `load(i, buf)`
// copies tile i into buffer buf.
template <bool ASYNC, typename Load>
__device__ __forceinline__ void fetch_tile(int i0, int step, int L, int buf, Load &&load) {
  if constexpr (ASYNC) {
    if (i0 + step < L) {
      load(i0 + step, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();  // tile i0's copies (and any earlier group) landed
    } else {
      cp_async_wait<0>();
    }
  } else if (i0 > 0) {
    __syncthreads();  // sm_75, one buffer: the previous tile is consumed
    load(i0, 0);
  }
}

// End of a loop iteration on sm_80+: the buffer of tile i0 is consumed
// before the next iteration's cp.async into it (after the last tile the
// kernel's own barrier before the staging tile does it); flip buffers.
template <bool ASYNC>
__device__ __forceinline__ void retire_tile(int i0, int step, int L, int &buf) {
  if constexpr (ASYNC) {
    if (i0 + step < L) __syncthreads();
    buf ^= 1;
  }
}

// ---- forward (tensor cores) ----

// The online softmax of one key tile for a thread's two rows (g and g + 8
// of a 16-row block; s[j] holds keys 8j + 2t, 8j + 2t + 1 of each, the
// mma.sync and wgmma accumulator layout alike): keys >= kv masked, running
// max m and sum l updated, s replaced by exp2(s - max), o rescaled.
template <int BK, int HD>
__device__ __forceinline__ void softmax_tile(float (&s)[BK / 8][4], float (&o)[HD / 8][4],
                                             float (&m)[2], float (&l)[2], int kv, int t) {
  if (kv < BK) {
#pragma unroll
    for (int j = 0; j < BK / 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        if (j * 8 + 2 * t + (e & 1) >= kv) s[j][e] = -INFINITY;
  }
  float mx0 = m[0], mx1 = m[1];
#pragma unroll
  for (int j = 0; j < BK / 8; j++) {
    mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
    mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
  }
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
  // Key k0 is valid, so mx0/mx1 are finite; exp2(-inf) = 0 on the first tile.
  const float a0 = exp2f(m[0] - mx0), a1 = exp2f(m[1] - mx1);
  m[0] = mx0;
  m[1] = mx1;
  float rs0 = 0.0f, rs1 = 0.0f;
#pragma unroll
  for (int j = 0; j < BK / 8; j++) {
    s[j][0] = exp2f(s[j][0] - mx0);
    s[j][1] = exp2f(s[j][1] - mx0);
    s[j][2] = exp2f(s[j][2] - mx1);
    s[j][3] = exp2f(s[j][3] - mx1);
    rs0 += s[j][0] + s[j][1];
    rs1 += s[j][2] + s[j][3];
  }
  l[0] = l[0] * a0 + rs0;
  l[1] = l[1] * a1 + rs1;
#pragma unroll
  for (int n = 0; n < HD / 8; n++) {
    o[n][0] *= a0; o[n][1] *= a0;
    o[n][2] *= a1; o[n][3] *= a1;
  }
}

// The forward's result for a thread's rows r0 and r0 + 8 (absolute in the
// sequence): O / l (0 past L) for its columns of each 8-column block, and
// the lse (thread t == 0 of the quad; 0 past L); rows >= Tn are not stored.
template <typename T, int HD>
__device__ __forceinline__ void store_fwd_rows(T *out, size_t Dm, float *lse,
                                               const float (&o)[HD / 8][4], const float (&m)[2],
                                               const float (&l)[2], int r0, int Tn, int L, int hd,
                                               int t) {
  float l0 = l[0], l1 = l[1];
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  const int r1 = r0 + 8;
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
    if (r0 < Tn) lse[r0] = r0 < L ? (m[0] + log2f(l0)) * LN2_F : 0.0f;
    if (r1 < Tn) lse[r1] = r1 < L ? (m[1] + log2f(l1)) * LN2_F : 0.0f;
  }
}

// A warp owns MT = QR / 64 row blocks of 16 queries (QR = plan<>::QR query
// rows a block): with MT = 2 every K and V fragment loaded from shared
// memory feeds two MMAs, half the shared-memory traffic per MMA of MT = 1.
template <typename T, int HD, int HDR, bool ASYNC>
__global__ void __launch_bounds__(NTHREADS, (plan<HD, ASYNC ? 2 : 1>::fwd_blocks))
    attn_fwd_mma(attn_params p) {
  ESMT_ATTN_ARCH_STUB(ASYNC)
  ESMT_DYNAMIC_SMEM(smem);
  constexpr int NB = ASYNC ? 2 : 1;
  // BK keys per tile: 32 at HD = 128 with two buffers, else 64.
  constexpr int LD = plan<HD, NB>::LD, BK = plan<HD, NB>::BK, TILE = BK * LD;
  constexpr int QR = plan<HD, NB>::QR, MT = QR / 64;
  // sm_75: Q (QR rows), then the (K, V) buffer (BK rows each). sm_80+: two
  // (K, V) buffers, Q staged in the second (QR x LD = 2 BK x LD in every
  // plan) and moved to registers before the loop first fills that buffer:
  // the smem of two 128-row blocks then fits sm_86/89's 100 KB a SM.
  constexpr bool QALIAS = ASYNC;
  static_assert(!QALIAS || QR * LD <= 2 * TILE, "Q is staged in one (K, V) buffer");
  T *const s0 = reinterpret_cast<T *>(smem);
  T *sKV = QALIAS ? s0 : s0 + QR * LD, *sQ = QALIAS ? s0 + 2 * TILE : s0;
  const int h = blockIdx.y, q0 = blockIdx.x * QR;
  constexpr int hd = HDR;  // the real head dim (HD = its padded size)
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int Tn = sq.rows, L = sq.L;
  if (q0 >= Tn) return;  // past a short packed sequence
  const size_t Dm = (size_t)p.H * hd, D3 = 3 * Dm;
  T *out = reinterpret_cast<T *>(p.out) + sq.tok0 * Dm + h * hd;
  float *lse = p.lse + sq.lse0;
  const int rows_here = min(QR, Tn - q0);
  if (q0 >= L) {  // padding only: zeros
    zero_rows(out + (size_t)q0 * Dm, Dm, rows_here, hd);
    for (int r = threadIdx.x; r < rows_here; r += NTHREADS) lse[q0 + r] = 0.0f;
    return;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int wr0 = warp * 16 * MT;  // this warp's first row in the tile
  // A warp whose rows all lie past L computes nothing (zeros are written
  // for them below); it still takes part in the loads and barriers.
  const bool busy = q0 + wr0 < L;
  zero_pad_cols<T, HD, LD>(s0, (QALIAS ? 0 : QR) + 2 * NB * BK, hd);
  const T *qr = reinterpret_cast<const T *>(p.qr) + sq.tok0 * Dm + h * hd;
  const T *kr = reinterpret_cast<const T *>(p.kr) + sq.tok0 * Dm + h * hd;
  const T *vg = reinterpret_cast<const T *>(p.qkv) + sq.tok0 * D3 + 2 * Dm + h * hd;
  const bool v16 = p.v16 != 0;
  auto load_kv = [&](int k0, int buf) {
    T *sK = sKV + buf * 2 * TILE;
    const int kv = min(BK, L - k0);
    copy_tile<T, LD, ASYNC>(sK, kr + (size_t)k0 * Dm, Dm, BK, kv, hd, true);
    copy_tile<T, LD, ASYNC>(sK + TILE, vg + (size_t)k0 * D3, D3, BK, kv, hd, v16);
  };
  // Q (pre-rotated and pre-scaled) and the first K/V tile: one cp.async group.
  copy_tile<T, LD, ASYNC>(sQ, qr + (size_t)q0 * Dm, Dm, QR, min(QR, L - q0), hd, true);
  load_kv(0, 0);
  if constexpr (ASYNC) cp_async_commit();
  uint32_t qf[MT][HD / 16][4];
  // Q fragments into registers (sm_80+ now: before tile 1 overwrites sQ;
  // sm_75 in the first iteration, after its barrier)
  auto load_qf = [&]() {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk++) frag_a(qf[mt][kk], sQ, LD, wr0 + mt * 16, kk * 16);
  };
  if constexpr (QALIAS) {
    cp_async_wait<0>();
    __syncthreads();  // everyone's copies of Q (and tile 0) are visible
    load_qf();
    __syncthreads();  // every warp has read Q: tile 1 may be copied over it
  }
  float o[MT][HD / 8][4];
  // Running max and sum of rows g and g + 8 of each row block.
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
#pragma unroll
    for (int n = 0; n < HD / 8; n++) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }
  int buf = 0;
  for (int k0 = 0; k0 < L; k0 += BK) {
    const int kv = min(BK, L - k0);
    fetch_tile<ASYNC>(k0, BK, L, buf, load_kv);
    __syncthreads();  // everyone's copies of this tile (and Q) are visible
    if (busy) {
      if (!QALIAS && k0 == 0) load_qf();
      const T *sK = sKV + buf * 2 * TILE, *sV = sK + TILE;
      float s[MT][BK / 8][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int j = 0; j < BK / 8; j++) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
        for (int j = 0; j < BK / 8; j += 2) {
          uint32_t bf[2][2];  // keys 8j .. 8j + 15: one ldmatrix.x4
          frag_b_nt2<ASYNC>(bf, sK, LD, j * 8, kk * 16);
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            mma16816<T>(s[mt][j], qf[mt][kk], bf[0]);
            mma16816<T>(s[mt][j + 1], qf[mt][kk], bf[1]);
          }
        }
#pragma unroll
      for (int mt = 0; mt < MT; mt++) softmax_tile<BK, HD>(s[mt], o[mt], m[mt], l[mt], kv, t);
      const int ksteps = (kv + 15) >> 4;  // 16-key steps holding a valid key
#pragma unroll
      for (int kk = 0; kk < BK / 16; kk++) {
        if (kk < ksteps) {
          uint32_t pa[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; mt++) acc_to_a<T>(pa[mt], s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
          for (int n = 0; n < HD / 8; n += 2) {
            uint32_t bf[2][2];
            frag_b_t2<ASYNC>(bf, sV, LD, kk * 16, n * 8);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
              mma16816<T>(o[mt][n], pa[mt], bf[0]);
              mma16816<T>(o[mt][n + 1], pa[mt], bf[1]);
            }
          }
        }
      }
    }
    retire_tile<ASYNC>(k0, BK, L, buf);
  }
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
    store_fwd_rows<T, HD>(out, Dm, lse, o[mt], m[mt], l[mt], q0 + wr0 + mt * 16 + g, Tn, L, hd, t);
}

// ---- backward ----

// 16-byte vector atomics (atomicAdd(float4 *)) exist from compute
// capability 9.0: a constant per architecture in a real build, the
// emulated device's in the emulated one (which faults them below sm_90).
#if defined(ESMT_CUDA_EMULATE)
#define ESMT_ATTN_VEC_ATOMICS (::cuemu::device_arch() >= 90)
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define ESMT_ATTN_VEC_ATOMICS true
#else
#define ESMT_ATTN_VEC_ATOMICS false
#endif

// p[0..3] += v in one vector atomic (p 16-byte aligned). Only reached
// where ESMT_ATTN_VEC_ATOMICS holds; below sm_90 the overload does not
// exist, so the branch that calls it must still compile there.
__device__ __forceinline__ void atomic_add4(float *p, float4 v) {
#if defined(ESMT_CUDA_EMULATE) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
  atomicAdd(reinterpret_cast<float4 *>(p), v);
#else
  (void)p;
  (void)v;
  __trap();
#endif
}

// The non-deterministic backward's dQ step for one query tile of BI rows:
// dQ[i0 + r] += sum over this block's 64 keys of dS[r][key] K[key] (FA2's
// fifth GEMM), added into `acc` (fp32 rows Dm apart, from query i0) with
// fp32 atomics: the order in which key blocks add up varies from run to
// run. dS comes from sdS, [key][query] with leading dim LDS (so A is
// loaded transposed), K from sK. The BI x HD tile is split over the 4
// warps: BI/16 row blocks, each row block's columns over 4/(BI/16) warps.
template <typename T, int HD, int BI, int LD, int LDS, bool ASYNC>
__device__ __forceinline__ void dq_tile_atomic(float *acc, size_t Dm, const T *sdS, const T *sK,
                                               int qv, int hd) {
  constexpr int RB = BI / 16, WPR = 4 / RB, NW = HD / 8 / WPR;
  static_assert(RB * WPR == 4 && NW >= 1 && NW * WPR * 8 == HD, "dQ tile split");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int rb = warp / WPR, n0 = (warp % WPR) * NW;
  float d[NW][4];
#pragma unroll
  for (int n = 0; n < NW; n++) d[n][0] = d[n][1] = d[n][2] = d[n][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < 64 / 16; kk++) {
    uint32_t a[4];
    frag_a_t(a, sdS, LDS, rb * 16, kk * 16);
    if constexpr (NW == 1) {
      uint32_t b[2];
      frag_b_t(b, sK, LD, kk * 16, n0 * 8);
      mma16816<T>(d[0], a, b);
    } else {
#pragma unroll
      for (int n = 0; n < NW; n += 2) {
        uint32_t b[2][2];
        frag_b_t2<ASYNC>(b, sK, LD, kk * 16, (n0 + n) * 8);
        mma16816<T>(d[n], a, b[0]);
        mma16816<T>(d[n + 1], a, b[1]);
      }
    }
  }
  // A thread holds columns (c, c + 1) of rows r0 and r1. Each atomic is
  // an L2 operation, and they bound this kernel: with vector atomics, lane
  // pairs (t, t ^ 1) trade halves so that each adds 4 adjacent columns of
  // one row in one 16-byte atomic (c of the even lane is a multiple of 4):
  // the even lane row r0, columns c .. c + 3, the odd one row r1, c - 2 ..
  // c + 1. Otherwise four scalar atomics: the exchange costs registers,
  // and within this kernel's launch bounds it fits on sm_90 at hd 16 and
  // 64 only (it spilled at hd 32 and 128 there, and at 64 on sm_80-89).
  const int r0 = rb * 16 + g, r1 = r0 + 8;
  const bool odd = t & 1;
#pragma unroll
  for (int n = 0; n < NW; n++) {
    if ((n0 + n) * 8 >= hd) break;  // hd 24 padded to 32 (uniform in the warp)
    if ((HD == 16 || HD == 64) && ESMT_ATTN_VEC_ATOMICS) {
      const float o0 = __shfl_xor_sync(0xffffffffu, odd ? d[n][0] : d[n][2], 1);
      const float o1 = __shfl_xor_sync(0xffffffffu, odd ? d[n][1] : d[n][3], 1);
      const int row = odd ? r1 : r0, c4 = (n0 + n) * 8 + 4 * (t >> 1);
      if (row < qv)
        atomic_add4(acc + (size_t)row * Dm + c4, odd ? make_float4(o0, o1, d[n][2], d[n][3])
                                                     : make_float4(d[n][0], d[n][1], o0, o1));
    } else {
      const int col = (n0 + n) * 8 + 2 * t;
      if (r0 < qv) {
        atomicAdd(acc + (size_t)r0 * Dm + col, d[n][0]);
        atomicAdd(acc + (size_t)r0 * Dm + col + 1, d[n][1]);
      }
      if (r1 < qv) {
        atomicAdd(acc + (size_t)r1 * Dm + col, d[n][2]);
        atomicAdd(acc + (size_t)r1 * Dm + col + 1, d[n][3]);
      }
    }
  }
}

// dK, dV for 64 keys; loops over query tiles of BJ. With DQA (the
// non-deterministic backward, attn_bwd_dkdvq_mma) it also adds each
// tile's dQ share into p.dq_acc (dq_tile_atomic) and no dQ kernel runs:
// 5 tile GEMMs instead of 7.
template <typename T, int HD, int HDR, bool ASYNC, bool DQA>
__device__ __forceinline__ void bwd_dkdv(const attn_params &p, unsigned char *smem) {
  constexpr int NB = ASYNC ? 2 : 1;
  constexpr int LD = plan<HD, NB>::LD, LDF = plan<HD, NB>::LDF, BI = plan<HD, NB>::BJ;
  constexpr int LDS = plan<HD, NB>::LDS;
  // K, V (64 rows), then NB buffers of (Q, dO) tiles, then NB of (lse2, D),
  // then (DQA) dS of one tile, [key][query]
  T *sK = reinterpret_cast<T *>(smem), *sV = sK + 64 * LD, *sQO = sV + 64 * LD;
  float *sLD = reinterpret_cast<float *>(sQO + NB * 2 * BI * LD);
  T *sdS = reinterpret_cast<T *>(sLD + NB * 2 * BI);
  const int h = blockIdx.y, k0 = blockIdx.x * 64;
  constexpr int hd = HDR;  // the real head dim (HD = its padded size)
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int Tn = sq.rows, L = sq.L;
  if ((int)blockIdx.x * 64 >= Tn) return;  // past a short packed sequence
  const size_t Dm = (size_t)p.H * hd, D3 = 3 * Dm;
  T *dq_base = reinterpret_cast<T *>(p.dqkv) + sq.tok0 * D3 + h * hd;
  T *dk = dq_base + Dm + (size_t)k0 * D3, *dv = dq_base + 2 * Dm + (size_t)k0 * D3;
  const int rows_here = min(64, Tn - k0);
  if (k0 >= L) {
    zero_rows(dk, D3, rows_here, hd);
    zero_rows(dv, D3, rows_here, hd);
    return;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int kv = min(64, L - k0);
  zero_pad_cols<T, HD, LD>(sK, 128 + NB * 2 * BI, hd);
  const T *qr = reinterpret_cast<const T *>(p.qr) + sq.tok0 * Dm + h * hd;
  const T *kr = reinterpret_cast<const T *>(p.kr) + sq.tok0 * Dm + h * hd;
  const T *vg = reinterpret_cast<const T *>(p.qkv) + sq.tok0 * D3 + 2 * Dm + h * hd;
  const T *gO = reinterpret_cast<const T *>(p.dout) + sq.tok0 * Dm + h * hd;
  const float *lse = p.lse + sq.lse0, *Dr = p.D + sq.lse0;
  const bool v16 = p.v16 != 0, o16 = p.o16 != 0;
  // Query tile i0 into buffer `buf`: Q, dO by copies; lse (as log2) and D by
  // plain stores (visible after the same barrier).
  auto load_q = [&](int i0, int buf) {
    T *q = sQO + buf * 2 * BI * LD;
    float *l2 = sLD + buf * 2 * BI;
    const int qv = min(BI, L - i0);
    copy_tile<T, LD, ASYNC>(q, qr + (size_t)i0 * Dm, Dm, BI, qv, hd, true);
    copy_tile<T, LD, ASYNC>(q + BI * LD, gO + (size_t)i0 * Dm, Dm, BI, qv, hd, o16);
    for (int r = threadIdx.x; r < BI; r += NTHREADS) {
      l2[r] = r < qv ? lse[i0 + r] * LOG2E_F : INFINITY;
      l2[BI + r] = r < qv ? Dr[i0 + r] : 0.0f;
    }
  };
  copy_tile<T, LD, ASYNC>(sK, kr + (size_t)k0 * Dm, Dm, 64, kv, hd, true);
  copy_tile<T, LD, ASYNC>(sV, vg + (size_t)k0 * D3, D3, 64, kv, hd, v16);
  if constexpr (ASYNC) cp_async_commit();
  load_q(0, 0);
  if constexpr (ASYNC) cp_async_commit();
  // K and V operand fragments stay in registers when they fit: HD <= 64 on
  // sm_75; on sm_80+ HD <= 32 only, because at HD = 64 their 32 registers
  // would break the 168-register budget of 3 blocks per SM (ldmatrix.x4
  // reloads them in one instruction per fragment). With DQA the dQ
  // step's accumulators need those registers: the cache spilled at HD = 32
  // on sm_80+ (128 registers, 4 blocks/SM) and at HD = 64 on sm_75.
  constexpr bool kCache = HD <= (ASYNC ? (DQA ? 16 : 32) : (DQA ? 32 : 64));
  uint32_t kc[kCache ? HD / 16 : 1][4], vc[kCache ? HD / 16 : 1][4];
  if constexpr (kCache) {
    if constexpr (ASYNC) cp_async_wait<1>();  // K, V landed (the Q tile may not have)
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
  int buf = 0;
  for (int i0 = 0; i0 < L; i0 += BI) {
    fetch_tile<ASYNC>(i0, BI, L, buf, load_q);
    __syncthreads();  // query tile i0 is visible to all
    const T *sQ = sQO + buf * 2 * BI * LD, *sO = sQ + BI * LD;
    const float *sL = sLD + buf * 2 * BI, *sD = sL + BI;
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
      for (int j = 0; j < BI / 8; j += 2) {
        uint32_t bq[2][2], bo[2][2];
        frag_b_nt2<ASYNC>(bq, sQ, LD, j * 8, kk * 16);
        frag_b_nt2<ASYNC>(bo, sO, LD, j * 8, kk * 16);
        mma16816<T>(st[j], ka, bq[0]);
        mma16816<T>(st[j + 1], ka, bq[1]);
        mma16816<T>(dpt[j], va, bo[0]);
        mma16816<T>(dpt[j + 1], va, bo[1]);
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
    if constexpr (DQA) {
      // dS^T rounded as the dK GEMM rounds it; keys past kv (zero K, V
      // rows, P^T not 0 there) must add nothing to dQ: zeros
      const int kr0 = warp * 16 + g, kr1 = kr0 + 8;
#pragma unroll
      for (int j = 0; j < BI / 8; j++) {
        const int col = j * 8 + 2 * t;
        *reinterpret_cast<uint32_t *>(sdS + kr0 * LDS + col) =
            kr0 < kv ? dt<T>::pack(dpt[j][0], dpt[j][1]) : 0u;
        *reinterpret_cast<uint32_t *>(sdS + kr1 * LDS + col) =
            kr1 < kv ? dt<T>::pack(dpt[j][2], dpt[j][3]) : 0u;
      }
    }
    // dV += P^T dO, dK += dS^T Q
#pragma unroll
    for (int kk = 0; kk < BI / 16; kk++) {
      uint32_t pa[4], da[4];
      acc_to_a<T>(pa, st[2 * kk], st[2 * kk + 1]);
      acc_to_a<T>(da, dpt[2 * kk], dpt[2 * kk + 1]);
#pragma unroll
      for (int n = 0; n < HD / 8; n += 2) {
        uint32_t bo[2][2], bq[2][2];
        frag_b_t2<ASYNC>(bo, sO, LD, kk * 16, n * 8);
        frag_b_t2<ASYNC>(bq, sQ, LD, kk * 16, n * 8);
        mma16816<T>(dV[n], pa, bo[0]);
        mma16816<T>(dV[n + 1], pa, bo[1]);
        mma16816<T>(dK[n], da, bq[0]);
        mma16816<T>(dK[n + 1], da, bq[1]);
      }
    }
    if constexpr (DQA) {
      __syncthreads();  // every warp's dS rows are in sdS
      // (the next tile's writes to sdS come after retire_tile's barrier,
      // or sm_75's barrier before its refill)
      dq_tile_atomic<T, HD, BI, LD, LDS, ASYNC>(p.dq_acc + (sq.tok0 + i0) * Dm + h * hd, Dm,
                                                sdS, sK, min(BI, L - i0), hd);
    }
    retire_tile<ASYNC>(i0, BI, L, buf);
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

template <typename T, int HD, int HDR, bool ASYNC>
__global__ void __launch_bounds__(NTHREADS, (plan<HD, ASYNC ? 2 : 1>::dkdv_blocks))
    attn_bwd_dkdv_mma(attn_params p) {
  ESMT_ATTN_ARCH_STUB(ASYNC)
  ESMT_DYNAMIC_SMEM(smem);
  bwd_dkdv<T, HD, HDR, ASYNC, false>(p, smem);
}

// dK, dV and (atomically) dQ: the non-deterministic backward.
template <typename T, int HD, int HDR, bool ASYNC>
__global__ void __launch_bounds__(NTHREADS, (plan<HD, ASYNC ? 2 : 1>::dkdvq_blocks))
    attn_bwd_dkdvq_mma(attn_params p) {
  ESMT_ATTN_ARCH_STUB(ASYNC)
  ESMT_DYNAMIC_SMEM(smem);
  bwd_dkdv<T, HD, HDR, ASYNC, true>(p, smem);
}

// After attn_bwd_dkdvq_mma: dq = inverse rotary of scale * dq_acc (fp32,
// [tokens][H][hd]) in the dtype, zeros on rows past L; through the same
// staging tile and store as the dQ kernel's. Grid as the attention
// kernels' for 64-row blocks.
template <typename T, int HD>
__global__ void __launch_bounds__(NTHREADS) attn_bwd_dq_store(attn_params p) {
  ESMT_DYNAMIC_SMEM(smem);
  constexpr int LDF = plan<HD, 1>::LDF;  // the staging tile's row (plan<>::stage_bytes)
  const int h = blockIdx.y, q0 = blockIdx.x * 64;
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int Tn = sq.rows, L = sq.L, hd = p.hd;
  if (q0 >= Tn) return;  // past a short packed sequence
  const size_t Dm = (size_t)p.H * hd, D3 = 3 * Dm;
  T *dq = reinterpret_cast<T *>(p.dqkv) + sq.tok0 * D3 + h * hd + (size_t)q0 * D3;
  const int rows_here = min(64, Tn - q0);
  if (q0 >= L) {
    zero_rows(dq, D3, rows_here, hd);
    return;
  }
  const int qv = min(64, L - q0), n4 = hd >> 2;
  const float *acc = p.dq_acc + (sq.tok0 + q0) * Dm + h * hd;
  float *sf = reinterpret_cast<float *>(smem);
  for (int i = threadIdx.x; i < qv * n4; i += NTHREADS) {
    const int r = i / n4, c = (i - r * n4) * 4;
    *reinterpret_cast<float4 *>(sf + r * LDF + c) =
        *reinterpret_cast<const float4 *>(acc + (size_t)r * Dm + c);
  }
  __syncthreads();
  store_tile<T, LDF>(dq, D3, sf, rows_here, qv, hd, p.cos, p.sin, q0, p.scale, true);
}

// dQ for 64 queries; loops over key tiles of BI.
template <typename T, int HD, int HDR, bool ASYNC>
__global__ void __launch_bounds__(NTHREADS, (plan<HD, ASYNC ? 2 : 1>::dq_blocks))
    attn_bwd_dq_mma(attn_params p) {
  ESMT_ATTN_ARCH_STUB(ASYNC)
  ESMT_DYNAMIC_SMEM(smem);
  constexpr int NB = ASYNC ? 2 : 1;
  constexpr int LD = plan<HD, NB>::LD, LDF = plan<HD, NB>::LDF, BI = plan<HD, NB>::BI;
  // Q, dO (64 rows), then NB buffers of (K, V) tiles
  T *sQ = reinterpret_cast<T *>(smem), *sO = sQ + 64 * LD, *sKV = sO + 64 * LD;
  const int h = blockIdx.y, q0 = blockIdx.x * 64;
  constexpr int hd = HDR;  // the real head dim (HD = its padded size)
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int Tn = sq.rows, L = sq.L;
  if ((int)blockIdx.x * 64 >= Tn) return;  // past a short packed sequence
  const size_t Dm = (size_t)p.H * hd, D3 = 3 * Dm;
  T *dq = reinterpret_cast<T *>(p.dqkv) + sq.tok0 * D3 + h * hd + (size_t)q0 * D3;
  const int rows_here = min(64, Tn - q0);
  if (q0 >= L) {
    zero_rows(dq, D3, rows_here, hd);
    return;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int qv = min(64, L - q0);
  zero_pad_cols<T, HD, LD>(sQ, 128 + NB * 2 * BI, hd);
  const T *qr = reinterpret_cast<const T *>(p.qr) + sq.tok0 * Dm + h * hd;
  const T *kr = reinterpret_cast<const T *>(p.kr) + sq.tok0 * Dm + h * hd;
  const T *vg = reinterpret_cast<const T *>(p.qkv) + sq.tok0 * D3 + 2 * Dm + h * hd;
  const T *gO = reinterpret_cast<const T *>(p.dout) + sq.tok0 * Dm + h * hd;
  const float *lse = p.lse + sq.lse0, *Dr = p.D + sq.lse0;
  const bool v16 = p.v16 != 0, o16 = p.o16 != 0;
  auto load_kv = [&](int k0, int buf) {
    T *sK = sKV + buf * 2 * BI * LD;
    const int kv = min(BI, L - k0);
    copy_tile<T, LD, ASYNC>(sK, kr + (size_t)k0 * Dm, Dm, BI, kv, hd, true);
    copy_tile<T, LD, ASYNC>(sK + BI * LD, vg + (size_t)k0 * D3, D3, BI, kv, hd, v16);
  };
  copy_tile<T, LD, ASYNC>(sQ, qr + (size_t)q0 * Dm, Dm, 64, qv, hd, true);
  copy_tile<T, LD, ASYNC>(sO, gO + (size_t)q0 * Dm, Dm, 64, qv, hd, o16);
  if constexpr (ASYNC) cp_async_commit();
  load_kv(0, 0);
  if constexpr (ASYNC) cp_async_commit();
  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
  const float l20 = r0 < L ? lse[r0] * LOG2E_F : INFINITY;
  const float l21 = r1 < L ? lse[r1] * LOG2E_F : INFINITY;
  const float D0 = r0 < L ? Dr[r0] : 0.0f, D1 = r1 < L ? Dr[r1] : 0.0f;
  // Q and dO operand fragments stay in registers when they fit: HD <= 64 on
  // sm_75, HD <= 32 on sm_80+ (at HD = 64 their 32 registers would break the
  // 128-register budget of 4 blocks per SM; ldmatrix.x4 reloads them).
  constexpr bool kCache = HD <= (ASYNC ? 32 : 64);
  uint32_t qc[kCache ? HD / 16 : 1][4], oc[kCache ? HD / 16 : 1][4];
  if constexpr (kCache) {
    if constexpr (ASYNC) cp_async_wait<1>();  // Q, dO landed (the K/V tile may not have)
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
  int buf = 0;
  for (int k0 = 0; k0 < L; k0 += BI) {
    const int kv = min(BI, L - k0);
    fetch_tile<ASYNC>(k0, BI, L, buf, load_kv);
    __syncthreads();  // key tile k0 is visible to all
    const T *sK = sKV + buf * 2 * BI * LD, *sV = sK + BI * LD;
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
      for (int j = 0; j < BI / 8; j += 2) {
        uint32_t bk[2][2], bv[2][2];
        frag_b_nt2<ASYNC>(bk, sK, LD, j * 8, kk * 16);
        frag_b_nt2<ASYNC>(bv, sV, LD, j * 8, kk * 16);
        mma16816<T>(s[j], qa, bk[0]);
        mma16816<T>(s[j + 1], qa, bk[1]);
        mma16816<T>(dp[j], oa, bv[0]);
        mma16816<T>(dp[j + 1], oa, bv[1]);
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
      for (int n = 0; n < HD / 8; n += 2) {
        uint32_t bk[2][2];
        frag_b_t2<ASYNC>(bk, sK, LD, kk * 16, n * 8);
        mma16816<T>(dQ[n], da, bk[0]);
        mma16816<T>(dQ[n + 1], da, bk[1]);
      }
    }
    retire_tile<ASYNC>(k0, BI, L, buf);
  }
  float *sf = reinterpret_cast<float *>(smem);
  __syncthreads();
  stage_acc<HD, LDF>(sf, dQ, warp * 16);
  __syncthreads();
  store_tile<T, LDF>(dq, D3, sf, rows_here, qv, hd, p.cos, p.sin, q0, p.scale, true);
}

}  // namespace esmt_attn

#endif
