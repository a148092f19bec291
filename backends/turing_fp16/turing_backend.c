/* SPDX-License-Identifier: MIT */
/* turing_fp16.so: fp16 tensor cores on sm_75+, with the optimizer offloaded
 * to the host when the planner says so. The compute ops are cuda_common's
 * (cuda_fill_compute_ops, f16/f32, attention included); probe() reports
 * any op still missing. */
#include "cuda_common.h"

/* Preferred on Turing; on sm_80+ ampere_bf16 (ESMTB_SCORE_AMPERE) wins. */
static int turing_score(const esmtb_probe *p, const esmtb_job *job) {
  (void)job;
  int best_major = 0;
  for (int i = 0; i < p->device_count; i++)
    if (p->devices[i].cc_major > best_major) best_major = p->devices[i].cc_major;
  return best_major >= 8 ? ESMTB_SCORE_TURING_ON_SM80 : ESMTB_SCORE_TURING;
}

static const cuda_backend_desc k_desc = {
    .name = "turing_fp16",
    .description = "fp16 tensor cores (sm_75+), fp32 master weights, CPU optimizer offload",
    .caps = ESMTB_CAP_F16 | ESMTB_CAP_F32,
    .min_cc_major = 7, .min_cc_minor = 5,
    .min_devices = 1,
    .score = turing_score,
    .fill_ops = cuda_fill_compute_ops,
};

static esmtb_status turing_probe(const esmtb_job *job, esmtb_probe *out) {
  return cuda_backend_probe(&k_desc, job, out);
}

ESMTB_EXPORT const esmtb_backend *esmt_backend_init(const esmtb_host *host) {
  esmtb_backend *b = cuda_backend_init(&k_desc, host);
  b->probe = turing_probe;
  return b;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  return cuda_backend_score(&k_desc, job);
}
