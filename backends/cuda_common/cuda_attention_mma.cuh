// Tensor-core (mma.sync, F16/BF16) attention kernels: forward, and the
// deterministic two-kernel backward (dK/dV, then dQ). See the algorithm
// notes at the top of cuda_attention.cu.
#ifndef ESMTRAIN_CUDA_ATTENTION_MMA_CUH
#define ESMTRAIN_CUDA_ATTENTION_MMA_CUH

#include "cuda_attention_device.cuh"

namespace esmt_attn {

// ---- forward (tensor cores) ----

template <typename T, int HD, int HDR>
__global__ void __launch_bounds__(NTHREADS) attn_fwd_mma(attn_params p) {
  ESMT_DYNAMIC_SMEM(smem);
  constexpr int LD = plan<HD>::LD;
  T *sQ = reinterpret_cast<T *>(smem), *sK = sQ + 64 * LD, *sV = sK + 64 * LD;
  const int h = blockIdx.y, q0 = blockIdx.x * 64;
  constexpr int hd = HDR;  // the real head dim (HD = its padded size)
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int Tn = sq.rows, L = sq.L;
  if ((int)blockIdx.x * 64 >= Tn) return;  // past a short packed sequence
  const size_t Dm = (size_t)p.H * hd, D3 = 3 * Dm;
  T *out = reinterpret_cast<T *>(p.out) + sq.tok0 * Dm + h * hd;
  float *lse = p.lse + sq.lse0;
  const int rows_here = min(64, Tn - q0);
  if (q0 >= L) {  // padding only: zeros
    zero_rows(out + (size_t)q0 * Dm, Dm, rows_here, hd);
    for (int r = threadIdx.x; r < rows_here; r += NTHREADS) lse[q0 + r] = 0.0f;
    return;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  zero_pad_cols<T, HD, LD>(sQ, 3 * 64, hd);
  const T *base = reinterpret_cast<const T *>(p.qkv) + sq.tok0 * D3 + h * hd;
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

// dK, dV for 64 keys; loops over query tiles of BI.
template <typename T, int HD, int HDR>
__global__ void __launch_bounds__(NTHREADS) attn_bwd_dkdv_mma(attn_params p) {
  ESMT_DYNAMIC_SMEM(smem);
  constexpr int LD = plan<HD>::LD, LDF = plan<HD>::LDF, BI = plan<HD>::BI;
  T *sK = reinterpret_cast<T *>(smem), *sV = sK + 64 * LD, *sQ = sV + 64 * LD, *sO = sQ + BI * LD;
  float *sL = reinterpret_cast<float *>(sO + BI * LD), *sD = sL + BI;
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
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
  const int kv = min(64, L - k0);
  zero_pad_cols<T, HD, LD>(sK, 128 + 2 * BI, hd);
  const T *base = reinterpret_cast<const T *>(p.qkv) + sq.tok0 * D3 + h * hd;
  const T *gO = reinterpret_cast<const T *>(p.dout) + sq.tok0 * Dm + h * hd;
  const float *lse = p.lse + sq.lse0, *Dr = p.D + sq.lse0;
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
  ESMT_DYNAMIC_SMEM(smem);
  constexpr int LD = plan<HD>::LD, LDF = plan<HD>::LDF, BI = plan<HD>::BI;
  T *sQ = reinterpret_cast<T *>(smem), *sO = sQ + 64 * LD, *sK = sO + 64 * LD, *sV = sK + BI * LD;
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
  zero_pad_cols<T, HD, LD>(sQ, 128 + 2 * BI, hd);
  const T *base = reinterpret_cast<const T *>(p.qkv) + sq.tok0 * D3 + h * hd;
  const T *gO = reinterpret_cast<const T *>(p.dout) + sq.tok0 * Dm + h * hd;
  const float *lse = p.lse + sq.lse0, *Dr = p.D + sq.lse0;
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

}  // namespace esmt_attn

#endif
