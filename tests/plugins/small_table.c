/* SPDX-License-Identifier: MIT */
/* Test plugin: right ABI major but an ops table shorter than ABI 1.0's. */
#include "esmtrain/backend.h"

static esmtb_ops g_ops;

ESMTB_EXPORT const esmtb_ops *esmt_backend_init(const esmtb_host *host) {
  (void)host;
  g_ops.abi_major = ESMTB_ABI_MAJOR;
  g_ops.struct_size = 64; /* truncated */
  g_ops.name = "small_table";
  return &g_ops;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  (void)job;
  return 1000;
}
