/* SPDX-License-Identifier: MIT */
/* Test plugin: claims a future backend ABI major, so the core must refuse it. */
#include "esmtrain/backend.h"

static const esmtb_backend g_backend = {
    .abi_major = ESMTB_ABI_MAJOR + 98,
    .abi_minor = 0,
    .struct_size = sizeof(esmtb_backend),
    .name = "bad_abi",
    .description = "test plugin with a wrong ABI major",
};

ESMTB_EXPORT const esmtb_backend *esmt_backend_init(const esmtb_host *host) {
  (void)host;
  return &g_backend;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  (void)job;
  return 1000;
}
