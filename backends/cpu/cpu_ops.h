/* SPDX-License-Identifier: MIT */
/* The CPU backend's device object and the op entry points, one file per op
 * family (ops_*.c). All math is fp32; F16/BF16 activations are widened to
 * fp32 and results rounded back (cpu_half.h). */
#ifndef ESMTRAIN_CPU_OPS_H
#define ESMTRAIN_CPU_OPS_H

#include "esmtrain/backend.h"

#define CPU_HIDDEN __attribute__((visibility("hidden")))

struct esmtb_device {
  int num_threads;             /* threads for OpenMP loops and OpenBLAS */
  uint64_t memory_limit;       /* bytes, 0 = none */
  uint64_t allocated;          /* live bytes from alloc() */
};

/* The host services handed to esmt_backend_init (for set_error/log). */
CPU_HIDDEN extern const esmtb_host *cpu_host;

/* Report an error through the host and return `status`. */
CPU_HIDDEN esmtb_status cpu_fail(esmtb_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* OpenBLAS entry points, resolved by cpu_blas_load() (cpu_blas.c). */
#include <cblas.h>
typedef void (*cpu_sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE,
                             const enum CBLAS_TRANSPOSE, const blasint, const blasint,
                             const blasint, const float, const float *, const blasint,
                             const float *, const blasint, const float, float *, const blasint);
CPU_HIDDEN extern cpu_sgemm_fn cpu_sgemm;
CPU_HIDDEN esmtb_status cpu_blas_load(void);
/* Why the last cpu_blas_load failed (for the probe's reason). */
CPU_HIDDEN const char *cpu_blas_load_error(void);
CPU_HIDDEN void cpu_blas_set_threads(int n);
/* OpenBLAS's kernel family in use ("SkylakeX"). */
CPU_HIDDEN const char *cpu_blas_core(void);

CPU_HIDDEN esmtb_status cpu_gemm(esmtb_device *dev, const esmtb_gemm_args *a, esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_embed_forward(esmtb_device *dev, const esmtb_embed_args *a,
                                          esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_embed_backward(esmtb_device *dev, const esmtb_embed_args *a,
                                           esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_layernorm_forward(esmtb_device *dev, const esmtb_layernorm_args *a,
                                              esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_layernorm_backward(esmtb_device *dev, const esmtb_layernorm_args *a,
                                               esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_add(esmtb_device *dev, const esmtb_add_args *a, esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_gelu_backward(esmtb_device *dev, const esmtb_gelu_backward_args *a,
                                          esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_bias_grad(esmtb_device *dev, const esmtb_bias_grad_args *a,
                                      esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_attention_forward(esmtb_device *dev, const esmtb_attention_args *a,
                                              esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_attention_backward(esmtb_device *dev, const esmtb_attention_args *a,
                                               esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_attention_probs(esmtb_device *dev, const esmtb_attention_args *a,
                                            esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_xent(esmtb_device *dev, const esmtb_xent_args *a, esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_adamw(esmtb_device *dev, const esmtb_adamw_args *a, esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_lion(esmtb_device *dev, const esmtb_lion_args *a, esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_sumsq(esmtb_device *dev, const esmtb_sumsq_args *a, esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_scale(esmtb_device *dev, const esmtb_scale_args *a, esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_convert(esmtb_device *dev, const esmtb_convert_args *a,
                                    esmtb_stream *s);
CPU_HIDDEN esmtb_status cpu_dropout(esmtb_device *dev, const esmtb_dropout_args *a,
                                    esmtb_stream *s);

#endif
