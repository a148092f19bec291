/* SPDX-License-Identifier: MIT */
/* ampere_bf16.so: bf16 on sm_80+ with flash-style attention. The compute
 * ops are cuda_common's (cuda_fill_compute_ops, bf16/f16/f32); probe()
 * reports any op still missing. */
#include "cuda_common.h"

static int ampere_score(const esmtb_probe *p, const esmtb_job *job) {
  (void)p; (void)job;
  return ESMTB_SCORE_AMPERE;
}

static const cuda_backend_desc k_desc = {
    .name = "ampere_bf16",
    .description = "bf16 tensor cores (sm_80+), flash-style attention, fused AdamW",
    .caps = ESMTB_CAP_BF16 | ESMTB_CAP_F16 | ESMTB_CAP_F32,
    .min_cc_major = 8, .min_cc_minor = 0,
    .min_devices = 1,
    .score = ampere_score,
    .fill_ops = cuda_fill_compute_ops,
};

static esmtb_status ampere_probe(const esmtb_job *job, esmtb_probe *out) {
  return cuda_backend_probe(&k_desc, job, out);
}

ESMTB_EXPORT const esmtb_backend *esmt_backend_init(const esmtb_host *host) {
  esmtb_backend *b = cuda_backend_init(&k_desc, host);
  b->probe = ampere_probe;
  return b;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  return cuda_backend_score(&k_desc, job);
}
