/* SPDX-License-Identifier: MIT */
/* Code shared by the GPU backends (turing_fp16, ampere_bf16, nccl_dp):
 * device probing, memory, streams/events and the dtype-generic kernels.
 * Each backend links this once (static) and fills its ops table from it. */
#ifndef ESMTRAIN_CUDA_COMMON_H
#define ESMTRAIN_CUDA_COMMON_H

#include "esmtrain/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_HIDDEN __attribute__((visibility("hidden")))

/* The core's services, set by the backend's esmt_backend_init. */
CUDA_HIDDEN extern const esmtb_host *cuda_host;

/* Record an error message through the host and return `status`. */
CUDA_HIDDEN esmtb_status cuda_fail(esmtb_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Fill `out` with every CUDA device. Devices below compute capability
 * min_major.min_minor are listed but do not count as usable. Returns the
 * number of usable devices (0 with out->reason set when there is no driver,
 * no device, or none recent enough for `what`). Never fails the process. */
CUDA_HIDDEN int cuda_probe_devices(esmtb_probe *out, int min_major, int min_minor,
                                   const char *what);

/* Fill the device-management and shared-kernel entries of `ops` (memory,
 * streams, events, scale, sumsq, convert). */
CUDA_HIDDEN void cuda_fill_common_ops(esmtb_ops *ops);

/* Fill the ESM-2 compute ops shared by the single-GPU backends: gemm
 * (cuBLASLt), embed, layernorm, add, gelu_backward, bias_grad, xent and
 * adamw, for f32/f16/bf16 activations. Attention and allreduce are not
 * among them. */
CUDA_HIDDEN void cuda_fill_compute_ops(esmtb_ops *ops);

/* 1 when every op the ESM-2 training step needs is set in `ops`; else 0
 * and the first missing op's name in *missing. */
CUDA_HIDDEN int cuda_ops_complete(const esmtb_ops *ops, const char **missing);

/* What distinguishes one GPU backend from another; everything else about
 * probing, scoring and the ops table is shared (cuda_backend.c). */
typedef struct cuda_backend_desc {
  const char *name;
  const char *description;
  uint32_t caps;
  int min_cc_major, min_cc_minor; /* oldest device it runs on */
  int min_devices;                /* 2 for data parallel */
  /* Score for this machine and job, called only when enough devices are
   * usable; > 0. */
  int (*score)(const esmtb_probe *probe, const esmtb_job *job);
  /* Set the backend's own op entries (kernels); may leave some NULL. */
  void (*fill_ops)(esmtb_ops *ops);
} cuda_backend_desc;

/* esmt_backend_init body: builds the table once from `desc`. */
CUDA_HIDDEN const esmtb_ops *cuda_backend_init(const cuda_backend_desc *desc,
                                               const esmtb_host *host);
/* probe(): devices, availability and the reason when unavailable. */
CUDA_HIDDEN esmtb_status cuda_backend_probe(const cuda_backend_desc *desc, const esmtb_job *job,
                                            esmtb_probe *out);
/* esmt_backend_score body: 0 when unavailable. */
CUDA_HIDDEN int cuda_backend_score(const cuda_backend_desc *desc, const esmtb_job *job);

#ifdef __cplusplus
}
#endif

#endif
