/* SPDX-License-Identifier: MIT */
/* Test plugin: claims a future backend ABI major, so the core must refuse it. */
#include "esmtrain/backend.h"

static const esmtb_ops g_ops = {
    .abi_major = ESMTB_ABI_MAJOR + 98,
    .abi_minor = 0,
    .struct_size = sizeof(esmtb_ops),
    .name = "bad_abi",
    .description = "test plugin with a wrong ABI major",
};

ESMTB_EXPORT const esmtb_ops *esmt_backend_init(const esmtb_host *host) {
  (void)host;
  return &g_ops;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  (void)job;
  return 1000;
}
