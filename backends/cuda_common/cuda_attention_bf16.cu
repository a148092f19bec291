/* SPDX-License-Identifier: MIT */
// The bf16 tensor-core attention kernels and their launches (one
// translation unit per dtype: see cuda_attention_dispatch.cuh).
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_attention_dispatch.cuh"

namespace esmt_attn {

esmtb_status attn_mma_bf16(const attn_params &p, int backward, int major, int minor, cudaStream_t st) {
  return dispatch_mma<__nv_bfloat16>(p, backward, major, minor, st);
}

}  // namespace esmt_attn
