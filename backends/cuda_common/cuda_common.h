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

/* A GPU backend's ABI 2 tables (static storage in cuda_backend.c); the
 * optional groups are handed out only when has_* is set. */
typedef struct cuda_tables {
  esmtb_backend backend;
  esmtb_device_ops device;
  esmtb_compute_ops compute;
  esmtb_optimizer_ops optimizer;
  esmtb_comm_ops comm;
  int has_comm;
} cuda_tables;

/* Fill the device group and the shared kernels of the compute group
 * (scale, sumsq, convert). */
CUDA_HIDDEN void cuda_fill_common_ops(cuda_tables *t);

/* Fill the ESM-2 compute ops shared by the single-GPU backends: gemm
 * (cuBLASLt), embed, layernorm, add, gelu_backward, bias_grad, xent, dropout and
 * the optimizer group (adamw, lion), for f32/f16/bf16 activations. Attention and allreduce are not
 * among them. */
CUDA_HIDDEN void cuda_fill_compute_ops(cuda_tables *t);

/* 1 when every op the ESM-2 training step needs is set in `t`; else 0
 * and the first missing op's name in *missing. */
CUDA_HIDDEN int cuda_ops_complete(const cuda_tables *t, const char **missing);

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
  void (*fill_ops)(cuda_tables *t);
} cuda_backend_desc;

/* esmt_backend_init body: builds the tables once from `desc`; the caller
 * sets the returned backend's probe. */
CUDA_HIDDEN esmtb_backend *cuda_backend_init(const cuda_backend_desc *desc,
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
