/* SPDX-License-Identifier: MIT */
/* Test plugin: right ABI major but an esmtb_backend shorter than ABI 2.0's
 * (it ends before the group lookup). */
#include "esmtrain/backend.h"

static esmtb_backend g_backend;

ESMTB_EXPORT const esmtb_backend *esmt_backend_init(const esmtb_host *host) {
  (void)host;
  g_backend.abi_major = ESMTB_ABI_MAJOR;
  g_backend.struct_size = 40; /* truncated */
  g_backend.name = "small_table";
  return &g_backend;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  (void)job;
  return 1000;
}
