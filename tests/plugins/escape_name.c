/* SPDX-License-Identifier: MIT */
/* Test plugin: a name, description and probe reason holding terminal
 * escapes (ESC [31m: red; OSC 0: the window title). Whoever prints them
 * must escape them. Never available. */
#include <stdio.h>
#include <string.h>

#include "esmtrain/backend.h"

static esmtb_backend g_backend;
/* Empty groups: the registry lists it; it is never opened. */
static const esmtb_device_ops g_device = {sizeof g_device, ESMTB_DEVICE_OPS_VERSION};
static const esmtb_compute_ops g_compute = {sizeof g_compute, ESMTB_COMPUTE_OPS_VERSION};

static const void *group(const char *name, uint32_t version) {
  if (!strcmp(name, ESMTB_GROUP_DEVICE) && version == ESMTB_DEVICE_OPS_VERSION) return &g_device;
  if (!strcmp(name, ESMTB_GROUP_COMPUTE) && version == ESMTB_COMPUTE_OPS_VERSION)
    return &g_compute;
  return NULL;
}

static esmtb_status probe(const esmtb_job *job, esmtb_probe *out) {
  (void)job;
  out->available = 0;
  out->score = 0;
  snprintf(out->reason, sizeof out->reason, "no device \x1b[31mhere\x1b[0m");
  return ESMTB_OK;
}

ESMTB_EXPORT const esmtb_backend *esmt_backend_init(const esmtb_host *host) {
  (void)host;
  g_backend.abi_major = ESMTB_ABI_MAJOR;
  g_backend.abi_minor = ESMTB_ABI_MINOR;
  g_backend.struct_size = sizeof g_backend;
  g_backend.name = "esc\x1b[31mred";
  g_backend.description = "\x1b]0;renamed window\x07" "a test backend";
  g_backend.probe = probe;
  g_backend.group = group;
  return &g_backend;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  (void)job;
  return 0;
}
