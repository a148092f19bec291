/* SPDX-License-Identifier: MIT */
/* Probe, score and ops-table assembly shared by every GPU backend. */
#include <stdio.h>
#include <string.h>

#include "cuda_common.h"

static cuda_tables g_tables;
static int g_ops_ready;

static const void *cuda_group(const char *name, uint32_t version) {
  if (!strcmp(name, ESMTB_GROUP_DEVICE) && version == ESMTB_DEVICE_OPS_VERSION)
    return &g_tables.device;
  if (!strcmp(name, ESMTB_GROUP_COMPUTE) && version == ESMTB_COMPUTE_OPS_VERSION)
    return &g_tables.compute;
  if (!strcmp(name, ESMTB_GROUP_OPTIMIZER) && version == ESMTB_OPTIMIZER_OPS_VERSION)
    return &g_tables.optimizer;
  if (!strcmp(name, ESMTB_GROUP_COMM) && version == ESMTB_COMM_OPS_VERSION && g_tables.has_comm)
    return &g_tables.comm;
  return NULL;
}

esmtb_backend *cuda_backend_init(const cuda_backend_desc *desc, const esmtb_host *host) {
  cuda_host = host;
  if (!g_ops_ready) {
    cuda_tables *t = &g_tables;
    memset(t, 0, sizeof *t);
    t->backend.abi_major = ESMTB_ABI_MAJOR;
    t->backend.abi_minor = ESMTB_ABI_MINOR;
    t->backend.struct_size = sizeof t->backend;
    t->backend.caps = desc->caps | ESMTB_CAP_VARLEN; /* the shared embed/attention take segments */
    t->backend.name = desc->name;
    t->backend.description = desc->description;
    t->backend.group = cuda_group;
    t->device.struct_size = sizeof t->device;
    t->device.version = ESMTB_DEVICE_OPS_VERSION;
    t->compute.struct_size = sizeof t->compute;
    t->compute.version = ESMTB_COMPUTE_OPS_VERSION;
    t->optimizer.struct_size = sizeof t->optimizer;
    t->optimizer.version = ESMTB_OPTIMIZER_OPS_VERSION;
    t->comm.struct_size = sizeof t->comm;
    t->comm.version = ESMTB_COMM_OPS_VERSION;
    cuda_fill_common_ops(t);
    if (desc->fill_ops) desc->fill_ops(t);
    g_ops_ready = 1;
  }
  return &g_tables.backend;
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
  } else if (g_ops_ready && !cuda_ops_complete(&g_tables, &missing)) {
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
