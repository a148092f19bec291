/* SPDX-License-Identifier: MIT */
/* Test plugin: a name, description and probe reason holding terminal
 * escapes (ESC [31m: red; OSC 0: the window title). Whoever prints them
 * must escape them. Never available. */
#include <stdio.h>

#include "esmtrain/backend.h"

static esmtb_ops g_ops;

static esmtb_status probe(const esmtb_job *job, esmtb_probe *out) {
  (void)job;
  out->available = 0;
  out->score = 0;
  snprintf(out->reason, sizeof out->reason, "no device \x1b[31mhere\x1b[0m");
  return ESMTB_OK;
}

ESMTB_EXPORT const esmtb_ops *esmt_backend_init(const esmtb_host *host) {
  (void)host;
  g_ops.abi_major = ESMTB_ABI_MAJOR;
  g_ops.abi_minor = ESMTB_ABI_MINOR;
  g_ops.struct_size = sizeof g_ops;
  g_ops.name = "esc\x1b[31mred";
  g_ops.description = "\x1b]0;renamed window\x07" "a test backend";
  g_ops.probe = probe;
  return &g_ops;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  (void)job;
  return 0;
}
