/* nccl_dp.so: data parallel over 2+ GPUs with NCCL, wrapping the best
 * single-GPU backend per rank. The communicator and wrapping arrive with
 * the nccl_dp issue; today it probes devices and the NCCL library. */
#include <nccl.h>
#include <stdio.h>

#include "cuda_common.h"

static int nccl_score(const esmtb_probe *p, const esmtb_job *job) {
  (void)job;
  return p->device_count >= 2 ? 200 : 0;
}

static const cuda_backend_desc k_desc = {
    .name = "nccl_dp",
    .description = "data parallel over GPUs and nodes with NCCL",
    .caps = ESMTB_CAP_MULTI_DEVICE | ESMTB_CAP_F32,
    .min_cc_major = 7, .min_cc_minor = 5,
    .min_devices = 2,
    .score = nccl_score,
    .fill_ops = NULL,
};

static esmtb_status nccl_probe(const esmtb_job *job, esmtb_probe *out) {
  esmtb_status st = cuda_backend_probe(&k_desc, job, out);
  int version = 0;
  if (st == 0 && out->available && ncclGetVersion(&version) != ncclSuccess) {
    out->available = 0;
    out->score = 0;
    snprintf(out->reason, sizeof out->reason, "the NCCL library does not answer");
  }
  return st;
}

ESMTB_EXPORT const esmtb_ops *esmt_backend_init(const esmtb_host *host) {
  esmtb_ops *ops = (esmtb_ops *)cuda_backend_init(&k_desc, host);
  ops->probe = nccl_probe;
  return ops;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  esmtb_probe p;
  nccl_probe(job, &p);
  return p.available ? p.score : 0;
}
