/* SPDX-License-Identifier: MIT */
// attention_probs (backend ABI 2.2, inference only): the softmax
// probabilities of the forward written out as fp32 [B, H, T, T]. Q and K
// come from the forward's own rotary pass (attn_rotate_qk: rot(q) * scale
// * log2 e and rot(k), rounded to the storage dtype as the 16-bit forward
// has them); a block owns one query row of one head of one sequence and
// runs three passes over its keys: scores (fp32 dot products, stored in
// the output row) and their maximum, exp2 and their sum, normalisation.
// Straightforward rather than fast: maps are for analysis and contacts.
// Included by cuda_attention.cu inside namespace esmt_attn.
#ifndef ESMTRAIN_CUDA_ATTENTION_PROBS_CUH
#define ESMTRAIN_CUDA_ATTENTION_PROBS_CUH

#include "cuda_attention_device.cuh"

namespace esmt_attn {

#define PROBS_THREADS 128

// Block-wide max (is_max) or sum of v over PROBS_THREADS threads.
__device__ __forceinline__ float probs_reduce(float *sh, float v, bool is_max) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = PROBS_THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s)
      sh[threadIdx.x] = is_max ? fmaxf(sh[threadIdx.x], sh[threadIdx.x + s])
                               : sh[threadIdx.x] + sh[threadIdx.x + s];
    __syncthreads();
  }
  const float r = sh[0];
  __syncthreads();  // sh is reused by the next reduction
  return r;
}

// Grid (query rows: T, or max_len when packed; H; rows or segments).
template <typename T>
__global__ void __launch_bounds__(PROBS_THREADS) attn_probs(attn_params p, float *probs) {
  __shared__ float sh[PROBS_THREADS];
  const int i = blockIdx.x, h = blockIdx.y;
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int L = sq.L;
  if (i >= L) return;  // the whole block: padding rows stay zero
  const int hd = p.hd;
  const size_t Dm = (size_t)p.H * hd;
  const T *q = reinterpret_cast<const T *>(p.qr) + (sq.tok0 + i) * Dm + (size_t)h * hd;
  const T *k = reinterpret_cast<const T *>(p.kr) + sq.tok0 * Dm + (size_t)h * hd;
  const size_t b = sq.tok0 / (size_t)p.T, t0 = sq.tok0 - b * (size_t)p.T;
  float *row = probs + ((b * p.H + h) * p.T + t0 + i) * p.T + t0;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < L; j += PROBS_THREADS) {
    float s = 0.0f, x[4], y[4];
    for (int c = 0; c < hd; c += 4) {
      ld4(q + c, x);
      ld4(k + (size_t)j * Dm + c, y);
      s += x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3];
    }
    row[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = probs_reduce(sh, mx, true);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < L; j += PROBS_THREADS) {
    const float e = exp2f(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / probs_reduce(sh, sum, false);
  for (int j = threadIdx.x; j < L; j += PROBS_THREADS) row[j] *= inv;
}

}  // namespace esmt_attn

#endif
