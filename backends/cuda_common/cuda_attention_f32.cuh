/* SPDX-License-Identifier: MIT */
// F32 attention kernels (no tensor cores): one thread per query row
// (forward, dQ) or key row (dK/dV), 32-row smem tiles of the other operand.
#ifndef ESMTRAIN_CUDA_ATTENTION_F32_CUH
#define ESMTRAIN_CUDA_ATTENTION_F32_CUH

#include "cuda_attention_device.cuh"

namespace esmt_attn {

// ---- F32: scalar tiled path ----

#define F32_ROWS 64  // threads (rows) per block
#define F32_TILE 32  // rows of the other operand per smem tile
#define F32_CHUNK 8  // keys per online-softmax step in the forward
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
  ESMT_DYNAMIC_SMEM(smem);
  float *sK = reinterpret_cast<float *>(smem), *sV = sK + F32_TILE * HD;
  const int h = blockIdx.y, row = blockIdx.x * F32_ROWS + threadIdx.x;
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int Tn = sq.rows, L = sq.L;
  if ((int)blockIdx.x * F32_ROWS >= Tn) return;  // past a short packed sequence
  const size_t Dm = (size_t)p.H * HD, D3 = 3 * Dm;
  const float *base = reinterpret_cast<const float *>(p.qkv) + sq.tok0 * D3 + h * HD;
  float *out = reinterpret_cast<float *>(p.out) + sq.tok0 * Dm + h * HD;
  float *lse = p.lse + sq.lse0;
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
    // Keys in chunks of F32_CHUNK, each an online-softmax step: the chunk's
    // scores stay in registers, and the loop over chunks is not unrolled
    // (unrolling the whole tile at HD = 128 made this kernel a minute of
    // nvcc front-end time per architecture). Every chunk holds a valid key.
#pragma unroll 1
    for (int j0 = 0; j0 < kv; j0 += F32_CHUNK) {
      float s[F32_CHUNK];
      float mt = m;
#pragma unroll
      for (int j = 0; j < F32_CHUNK; j++) {
        float d = 0.0f;
#pragma unroll
        for (int c = 0; c < HD; c++) d += q[c] * sK[(j0 + j) * HD + c];
        s[j] = j0 + j < kv ? d : -INFINITY;
        mt = fmaxf(mt, s[j]);
      }
      const float a = exp2f(m - mt);
      m = mt;
      l *= a;
#pragma unroll
      for (int c = 0; c < HD; c++) acc[c] *= a;
#pragma unroll
      for (int j = 0; j < F32_CHUNK; j++) {
        const float pj = exp2f(s[j] - m);
        l += pj;
#pragma unroll
        for (int c = 0; c < HD; c++) acc[c] += pj * sV[(j0 + j) * HD + c];
      }
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
  ESMT_DYNAMIC_SMEM(smem);
  float *sQ = reinterpret_cast<float *>(smem), *sO = sQ + F32_TILE * HD, *sL = sO + F32_TILE * HD;
  float *sD = sL + F32_TILE;
  const int h = blockIdx.y, row = blockIdx.x * F32_ROWS + threadIdx.x;
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int Tn = sq.rows, L = sq.L;
  if ((int)blockIdx.x * F32_ROWS >= Tn) return;  // past a short packed sequence
  const size_t Dm = (size_t)p.H * HD, D3 = 3 * Dm;
  const float *base = reinterpret_cast<const float *>(p.qkv) + sq.tok0 * D3 + h * HD;
  const float *gO = reinterpret_cast<const float *>(p.dout) + sq.tok0 * Dm + h * HD;
  float *dbase = reinterpret_cast<float *>(p.dqkv) + sq.tok0 * D3 + h * HD;
  const float *lse = p.lse + sq.lse0, *Dr = p.D + sq.lse0;
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
  ESMT_DYNAMIC_SMEM(smem);
  float *sK = reinterpret_cast<float *>(smem), *sV = sK + F32_TILE * HD;
  const int h = blockIdx.y, row = blockIdx.x * F32_ROWS + threadIdx.x;
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int Tn = sq.rows, L = sq.L;
  if ((int)blockIdx.x * F32_ROWS >= Tn) return;  // past a short packed sequence
  const size_t Dm = (size_t)p.H * HD, D3 = 3 * Dm;
  const float *base = reinterpret_cast<const float *>(p.qkv) + sq.tok0 * D3 + h * HD;
  const float *gO = reinterpret_cast<const float *>(p.dout) + sq.tok0 * Dm + h * HD;
  float *dbase = reinterpret_cast<float *>(p.dqkv) + sq.tok0 * D3 + h * HD;
  const float *lse = p.lse + sq.lse0, *Dr = p.D + sq.lse0;
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

}  // namespace esmt_attn

#endif
