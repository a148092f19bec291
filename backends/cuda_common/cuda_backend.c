/* SPDX-License-Identifier: MIT */
/* Probe, score and ops-table assembly shared by every GPU backend. */
#include <stdio.h>
#include <string.h>

#include "cuda_common.h"

static esmtb_ops g_ops;
static int g_ops_ready;

const esmtb_ops *cuda_backend_init(const cuda_backend_desc *desc, const esmtb_host *host) {
  cuda_host = host;
  if (!g_ops_ready) {
    memset(&g_ops, 0, sizeof g_ops);
    g_ops.abi_major = ESMTB_ABI_MAJOR;
    g_ops.abi_minor = ESMTB_ABI_MINOR;
    g_ops.struct_size = sizeof g_ops;
    g_ops.caps = desc->caps | ESMTB_CAP_VARLEN; /* the shared embed/attention take segments */
    g_ops.name = desc->name;
    g_ops.description = desc->description;
    cuda_fill_common_ops(&g_ops);
    if (desc->fill_ops) desc->fill_ops(&g_ops);
    g_ops_ready = 1;
  }
  return &g_ops;
}

esmtb_status cuda_backend_probe(const cuda_backend_desc *desc, const esmtb_job *job,
                                esmtb_probe *out) {
  if (!out) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s probe: out is NULL", desc->name);
  int usable = cuda_probe_devices(out, desc->min_cc_major, desc->min_cc_minor, desc->name);
  const char *missing = NULL;
  if (usable < desc->min_devices) {
    if (usable > 0)
      snprintf(out->reason, sizeof out->reason, "%s needs %d or more GPUs of compute capability "
               "%d.%d+, found %d", desc->name, desc->min_devices, desc->min_cc_major,
               desc->min_cc_minor, usable);
    out->available = 0;
    out->score = 0;
  } else if (g_ops_ready && !cuda_ops_complete(&g_ops, &missing)) {
    /* The devices are fine but this build lacks training kernels. */
    snprintf(out->reason, sizeof out->reason,
             "%d usable GPU(s), but this build of %s does not implement op '%s' yet",
             usable, desc->name, missing);
    out->available = 0;
    out->score = 0;
  } else {
    out->available = 1;
    out->score = desc->score(out, job);
    if (out->score <= 0) out->available = 0;
  }
  return 0;
}

int cuda_backend_score(const cuda_backend_desc *desc, const esmtb_job *job) {
  esmtb_probe p;
  cuda_backend_probe(desc, job, &p);
  return p.available ? p.score : 0;
}
