// SPDX-License-Identifier: MIT
#include "backend_tables.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

static const test_backend_tables *g_tables;

static const void *tables_group(const char *name, uint32_t version) {
  const test_backend_tables *t = g_tables;
  if (!strcmp(name, ESMTB_GROUP_DEVICE) && version == t->device.version) return &t->device;
  if (!strcmp(name, ESMTB_GROUP_COMPUTE) && version == t->compute.version) return &t->compute;
  if (!strcmp(name, ESMTB_GROUP_OPTIMIZER) && t->has_optimizer &&
      version == t->optimizer.version)
    return &t->optimizer;
  if (!strcmp(name, ESMTB_GROUP_COMM) && t->has_comm && version == t->comm.version)
    return &t->comm;
  return NULL;
}

void test_tables_split(const esmtb_ops *f, test_backend_tables *t) {
  memset(t, 0, sizeof *t);
  t->backend = (esmtb_backend){ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR, sizeof t->backend, f->caps,
                               f->name, f->description, f->probe, tables_group};
  t->device = (esmtb_device_ops){sizeof t->device, ESMTB_DEVICE_OPS_VERSION,
                                 f->open, f->close, f->mem_info, f->pci_bus_id,
                                 f->alloc, f->free, f->memset_async, f->copy_async,
                                 f->stream_create, f->stream_destroy, f->stream_sync,
                                 f->event_create, f->event_destroy, f->event_record,
                                 f->stream_wait_event, f->event_sync,
                                 f->timing_event_create, f->event_elapsed};
  t->compute = (esmtb_compute_ops){sizeof t->compute, ESMTB_COMPUTE_OPS_VERSION,
                                   f->gemm, f->embed_forward, f->embed_backward,
                                   f->layernorm_forward, f->layernorm_backward, f->add,
                                   f->gelu_backward, f->bias_grad, f->attention_forward,
                                   f->attention_backward, f->xent, f->sumsq, f->scale,
                                   f->convert, f->attention_probs, f->dropout};
  t->optimizer = (esmtb_optimizer_ops){sizeof t->optimizer, ESMTB_OPTIMIZER_OPS_VERSION,
                                       f->adamw, f->lion};
  t->comm = (esmtb_comm_ops){sizeof t->comm, ESMTB_COMM_OPS_VERSION, f->allreduce,
                             f->comm_unique_id, f->comm_init, f->comm_release,
                             f->reduce_scatter, f->allgather};
  t->has_optimizer = f->adamw || f->lion;
  t->has_comm = f->allreduce || f->comm_unique_id;
}

const esmtb_ops *test_tables_resolve(const test_backend_tables *t, esmtb_ops *out) {
  char why[256];
  g_tables = t;
  if (esmt_ops_resolve(&t->backend, out, why, sizeof why) != ESMT_OK)
    fail_msg("%s: %s", t->backend.name, why);
  return out;
}
