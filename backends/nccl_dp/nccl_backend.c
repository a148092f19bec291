/* SPDX-License-Identifier: MIT */
/* nccl_dp.so: data parallel over GPUs and nodes, one process per GPU. Each
 * rank computes with cuda_common's kernels, as the single-GPU backends do
 * (bf16 on sm_80+, f16 otherwise), and sums gradients with NCCL
 * (nccl_comm.c). The core bootstraps the communicator over its TCP
 * communicator through its "comm" group. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>

#include "cuda_common.h"
#include "nccl_comm.h"

/* First choice with 2+ GPUs; on one GPU it only runs when asked for by
 * name (ESMTRAIN_BACKEND=nccl_dp, e.g. the world-size-1 overhead check),
 * so ampere_bf16 / turing_fp16 win there. */
static int nccl_score(const esmtb_probe *p, const esmtb_job *job) {
  (void)job;
  return p->device_count >= 2 ? ESMTB_SCORE_NCCL_DP_MULTI_GPU : ESMTB_SCORE_NCCL_DP_ONE_GPU;
}

static void fill_ops(cuda_tables *t) {
  cuda_fill_compute_ops(t);
  nccl_fill_comm_ops(t);
}

static cuda_backend_desc g_desc = {
    .name = "nccl_dp",
    .description = "data parallel over GPUs and nodes with NCCL (one process per GPU)",
    .caps = ESMTB_CAP_MULTI_DEVICE | ESMTB_CAP_F32 | ESMTB_CAP_F16,
    .min_cc_major = 7, .min_cc_minor = 5,
    .min_devices = 1,
    .score = nccl_score,
    .fill_ops = fill_ops,
};

/* BF16 when every GPU here is sm_80+ (the ranks of one job should agree;
 * the core checks that the weights, hence the dtype, match at start). */
static uint32_t gpu_caps(void) {
  int n = 0, all_bf16 = 1;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return g_desc.caps;
  }
  for (int i = 0; i < n; i++) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i) != cudaSuccess ||
        major < 8)
      all_bf16 = 0;
  }
  return g_desc.caps | (all_bf16 ? ESMTB_CAP_BF16 : 0u);
}

static esmtb_status nccl_probe(const esmtb_job *job, esmtb_probe *out) {
  esmtb_status st = cuda_backend_probe(&g_desc, job, out);
  int version = 0;
  if (st == 0 && out->available && ncclGetVersion(&version) != ncclSuccess) {
    out->available = 0;
    out->score = 0;
    snprintf(out->reason, sizeof out->reason, "the NCCL library does not answer");
  }
  return st;
}

ESMTB_EXPORT const esmtb_backend *esmt_backend_init(const esmtb_host *host) {
  static int caps_known;
  if (!caps_known) {
    g_desc.caps = gpu_caps();
    caps_known = 1;
  }
  esmtb_backend *b = cuda_backend_init(&g_desc, host);
  b->probe = nccl_probe;
  return b;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  esmtb_probe p;
  nccl_probe(job, &p);
  return p.available ? p.score : 0;
}
