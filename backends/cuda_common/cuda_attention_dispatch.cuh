/* SPDX-License-Identifier: MIT */
// Host side of the 16-bit attention path: the launches of the tensor-core
// kernels (cuda_attention_mma.cuh, cuda_attention_wgmma.cuh) by head dim,
// architecture and backward flavour. Included by one translation unit per
// dtype (cuda_attention_f16.cu, cuda_attention_bf16.cu), so that the two
// sets of kernels compile in parallel; cuda_attention.cu checks arguments
// and calls esmt_attn::attn_mma_f16 / attn_mma_bf16.
#ifndef ESMTRAIN_CUDA_ATTENTION_DISPATCH_CUH
#define ESMTRAIN_CUDA_ATTENTION_DISPATCH_CUH

#include <stdlib.h>

#include "cuda_device.h"
#include "cuda_launch.cuh"
#include "cuda_attention_wgmma.cuh"

namespace esmt_attn {

inline esmtb_status launch_err(const char *op) { return cuda_check(cudaGetLastError(), op); }

template <typename KernelT>
esmtb_status set_smem(KernelT kernel, size_t bytes, const char *op) {
  if (bytes <= 48 * 1024) return 0;
  return cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)bytes),
                    op);
}

template <typename T, int HD, int HDR, bool ASYNC>
esmtb_status fwd_mma(const attn_params &p, cudaStream_t st) {
  const size_t bytes = plan<HD, ASYNC ? 2 : 1>::fwd_bytes;
  esmtb_status rc = set_smem(attn_fwd_mma<T, HD, HDR, ASYNC>, bytes, "attention_forward: smem");
  if (rc) return rc;
  const dim3 grid = attn_grid(p, plan<HD, ASYNC ? 2 : 1>::QR);
  ESMT_LAUNCH(grid, NTHREADS, bytes, st, attn_fwd_mma<T, HD, HDR, ASYNC>)(p);
  return launch_err("attention_forward");
}

// Hopper: the warpgroup-MMA forward (hd 64 and 128; cuda_attention_wgmma.cuh).
template <typename T, int HD>
esmtb_status fwd_wgmma(const attn_params &p, cudaStream_t st) {
  using pl = wg_plan<HD>;
  esmtb_status rc = set_smem(attn_fwd_wgmma<T, HD>, pl::bytes, "attention_forward: smem");
  if (rc) return rc;
  ESMT_LAUNCH(attn_grid(p, pl::QR), pl::THREADS, pl::bytes, st, attn_fwd_wgmma<T, HD>)(p);
  return launch_err("attention_forward");
}

// Non-deterministic backward: dQ summed in fp32 by atomics (scratch
// zeroed here), then scaled, inverse-rotated and stored.
template <typename T, int HD, int HDR, bool ASYNC>
esmtb_status bwd_mma_atomic(attn_params p, cudaStream_t st) {
  using pl = plan<HD, ASYNC ? 2 : 1>;
  const char *op = "attention_backward";
  const size_t n = (size_t)p.B * p.T * p.H * p.hd;
  esmtb_status rc = set_smem(attn_bwd_dkdvq_mma<T, HD, HDR, ASYNC>, pl::dkdvq_bytes,
                             "attention_backward: smem");
  if (rc) return rc;
  rc = cuda_scratch((void **)&p.dq_acc, n * sizeof(float), st, op);
  if (rc) return rc;
  rc = cuda_check(cudaMemsetAsync(p.dq_acc, 0, n * sizeof(float), st), "attention_backward: dQ sums");
  if (!rc) {
    const dim3 grid = attn_grid(p, 64);
    ESMT_LAUNCH(grid, NTHREADS, pl::dkdvq_bytes, st, attn_bwd_dkdvq_mma<T, HD, HDR, ASYNC>)(p);
    ESMT_LAUNCH(grid, NTHREADS, pl::stage_bytes, st, attn_bwd_dq_store<T, HD>)(p);
    rc = launch_err(op);
  }
  esmtb_status rc2 = cuda_check(cudaFreeAsync(p.dq_acc, st), "attention_backward: scratch");
  return rc ? rc : rc2;
}

template <typename T, int HD, int HDR, bool ASYNC>
esmtb_status bwd_mma(const attn_params &p, cudaStream_t st) {
  if (p.nondeterministic) return bwd_mma_atomic<T, HD, HDR, ASYNC>(p, st);
  using pl = plan<HD, ASYNC ? 2 : 1>;
  esmtb_status rc = set_smem(attn_bwd_dkdv_mma<T, HD, HDR, ASYNC>, pl::dkdv_bytes,
                             "attention_backward: smem");
  if (!rc) rc = set_smem(attn_bwd_dq_mma<T, HD, HDR, ASYNC>, pl::dq_bytes,
                         "attention_backward: smem");
  if (rc) return rc;
  const dim3 grid = attn_grid(p, 64);
  ESMT_LAUNCH(grid, NTHREADS, pl::dkdv_bytes, st, attn_bwd_dkdv_mma<T, HD, HDR, ASYNC>)(p);
  ESMT_LAUNCH(grid, NTHREADS, pl::dq_bytes, st, attn_bwd_dq_mma<T, HD, HDR, ASYNC>)(p);
  return launch_err("attention_backward");
}

template <typename T, bool ASYNC>
esmtb_status dispatch_hd(const attn_params &p, int backward, bool wgmma, cudaStream_t st) {
  if (wgmma && !backward && p.hd == 64) return fwd_wgmma<T, 64>(p, st);
  if (wgmma && !backward && p.hd == 128) return fwd_wgmma<T, 128>(p, st);
  switch (p.hd) {
    case 16: return backward ? bwd_mma<T, 16, 16, ASYNC>(p, st) : fwd_mma<T, 16, 16, ASYNC>(p, st);
    case 24: return backward ? bwd_mma<T, 32, 24, ASYNC>(p, st) : fwd_mma<T, 32, 24, ASYNC>(p, st);
    case 32: return backward ? bwd_mma<T, 32, 32, ASYNC>(p, st) : fwd_mma<T, 32, 32, ASYNC>(p, st);
    case 64: return backward ? bwd_mma<T, 64, 64, ASYNC>(p, st) : fwd_mma<T, 64, 64, ASYNC>(p, st);
    default:
      return backward ? bwd_mma<T, 128, 128, ASYNC>(p, st) : fwd_mma<T, 128, 128, ASYNC>(p, st);
  }
}

// The warpgroup-MMA forward runs on compute capability 9.0 exactly (the
// sm_90a binary; later GPUs run the compute_90 PTX, which has no wgmma)
// when ESMT_CUDA_ATTN_WGMMA=1. Opt-in until a GPU run has passed
// test_gpu_attention with it (it is proven under the emulator only:
// docs/attention-model.md, section 10); then this becomes the default on 9.0.
inline bool use_wgmma(int major, int minor) {
  const char *e = getenv("ESMT_CUDA_ATTN_WGMMA");
  return major == 9 && minor == 0 && e && e[0] == '1';
}

// 16-bit path: rotary once (Q pre-scaled, K) into stream-ordered scratch,
// then the kernels; cp.async double-buffering on sm_80+ (sm_75 has no
// cp.async: plain copies into one buffer); wgmma forward on sm_90.
template <typename T>
esmtb_status dispatch_mma(attn_params p, int backward, int major, int minor, cudaStream_t st) {
  const bool async = major >= 8, wgmma = use_wgmma(major, minor);
  const char *op = backward ? "attention_backward" : "attention_forward";
  const size_t n = (size_t)p.B * p.T * p.H * p.hd;
  T *qk = NULL;
  esmtb_status rc = cuda_scratch((void **)&qk, 2 * n * sizeof(T), st, op);
  if (rc) return rc;
  p.qr = qk;
  p.kr = qk + n;
  ESMT_LAUNCH(attn_grid(p, 64), NTHREADS, 0, st, attn_rotate_qk<T>)(p);
  rc = launch_err(backward ? "attention_backward: rotary" : "attention_forward: rotary");
  if (!rc)
    rc = async ? dispatch_hd<T, true>(p, backward, wgmma, st) : dispatch_hd<T, false>(p, backward, false, st);
  esmtb_status rc2 = cuda_check(cudaFreeAsync(qk, st), backward ? "attention_backward: scratch"
                                                                : "attention_forward: scratch");
  return rc ? rc : rc2;
}

// One entry per dtype, defined in cuda_attention_{f16,bf16}.cu: the rotary
// pass, then forward (out, lse) or backward (dqkv) of the 16-bit kernels.
esmtb_status attn_mma_f16(const attn_params &p, int backward, int major, int minor,
                          cudaStream_t st);
esmtb_status attn_mma_bf16(const attn_params &p, int backward, int major, int minor,
                           cudaStream_t st);

}  // namespace esmt_attn

#endif
