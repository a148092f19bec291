/* SPDX-License-Identifier: MIT */
/* Flash-style attention core for the GPU backends (cuda_attention.cu):
 * esmtb_attention_args semantics exactly as include/esmtrain/backend.h
 * states them. Shared by turing_fp16 and ampere_bf16. */
#ifndef ESMTRAIN_CUDA_ATTENTION_H
#define ESMTRAIN_CUDA_ATTENTION_H

#include "cuda_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Forward: out, lse. F16 and F32 on sm_75+, BF16 on sm_80+; hd in
 * {16, 24, 32, 64, 128}. */
CUDA_HIDDEN esmtb_status cuda_attention_forward(esmtb_device *dev, const esmtb_attention_args *a,
                                                esmtb_stream *s);
/* Backward: all of dqkv. Deterministic (no atomics) unless the args set
 * nondeterministic (ABI 1.6): then dQ is summed with fp32 atomics. */
CUDA_HIDDEN esmtb_status cuda_attention_backward(esmtb_device *dev, const esmtb_attention_args *a,
                                                 esmtb_stream *s);
/* ABI 2.2, inference only: the forward's softmax probabilities as fp32
 * [B, H, T, T] into a->probs (cuda_attention_probs.cuh). */
CUDA_HIDDEN esmtb_status cuda_attention_probs(esmtb_device *dev, const esmtb_attention_args *a,
                                              esmtb_stream *s);
/* ops->attention_forward / attention_backward / attention_probs. */
CUDA_HIDDEN void cuda_fill_attention_ops(esmtb_compute_ops *ops);

#ifdef __cplusplus
}
#endif

#endif
