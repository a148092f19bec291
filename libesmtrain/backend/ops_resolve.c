// SPDX-License-Identifier: MIT
/* A plugin's esmtb_backend and its groups (ABI 2) into the core's flat
 * esmtb_ops (ops_table.h): every check of the plugin's tables is here, so
 * the rest of the core sees one table whose missing ops are NULL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_table.h"

/* The least each table may be: its layout at ABI 2.0. */
#define BACKEND_MIN_SIZE (offsetof(esmtb_backend, group) + sizeof(void *))
#define DEVICE_MIN_SIZE (offsetof(esmtb_device_ops, event_sync) + sizeof(void *))
#define COMPUTE_MIN_SIZE (offsetof(esmtb_compute_ops, convert) + sizeof(void *))
#define OPTIMIZER_MIN_SIZE (offsetof(esmtb_optimizer_ops, lion) + sizeof(void *))
#define COMM_MIN_SIZE (offsetof(esmtb_comm_ops, allgather) + sizeof(void *))

/* Whether group table g (whose struct_size is what the plugin was built
 * with) covers a field appended after 2.0. */
#define GROUP_HAS(g, type, field) ((g)->struct_size >= offsetof(type, field) + sizeof(void *))

/* The group `name`, or NULL when the backend lacks it or hands out a
 * table that is not that group's `version` or is too short (refused with
 * a reason in `why` when `required`). */
static const void *find_group(const esmtb_backend *b, const char *name, uint32_t version,
                              size_t min_size, int required, char *why, size_t cap) {
  const uint32_t *head = b->group(name, version); /* {struct_size, version} */
  const char *problem = NULL;
  if (!head)
    problem = "is missing";
  else if (head[1] != version)
    problem = "has another version";
  else if (head[0] < min_size)
    problem = "is too short";
  if (!problem) return head;
  if (required)
    snprintf(why, cap, "refused: its required group '%s' (version %u, at least %zu bytes) %s",
             name, (unsigned)version, min_size, problem);
  return NULL;
}

esmt_status esmt_ops_resolve(const esmtb_backend *b, esmtb_ops *out, char *why, size_t cap) {
  if (b->abi_major != ESMTB_ABI_MAJOR) {
    snprintf(why, cap,
             "refused: built for backend ABI %u.%u, this library speaks %d.%d (major differs)",
             b->abi_major, b->abi_minor, ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR);
    return ESMT_ERR_ABI;
  }
  if (b->struct_size < BACKEND_MIN_SIZE) {
    snprintf(why, cap, "refused: esmtb_backend is %u bytes, smaller than the %zu of ABI %d.0",
             b->struct_size, (size_t)BACKEND_MIN_SIZE, ESMTB_ABI_MAJOR);
    return ESMT_ERR_ABI;
  }
  if (!b->name || !b->probe || !b->group) {
    snprintf(why, cap, "refused: esmtb_backend lacks a name, probe or group");
    return ESMT_ERR_ABI;
  }
  const esmtb_device_ops *dev = find_group(b, ESMTB_GROUP_DEVICE, ESMTB_DEVICE_OPS_VERSION,
                                           DEVICE_MIN_SIZE, 1, why, cap);
  const esmtb_compute_ops *cmp = dev ? find_group(b, ESMTB_GROUP_COMPUTE,
                                                  ESMTB_COMPUTE_OPS_VERSION, COMPUTE_MIN_SIZE,
                                                  1, why, cap) : NULL;
  if (!dev || !cmp) return ESMT_ERR_ABI;
  const esmtb_optimizer_ops *opt = find_group(b, ESMTB_GROUP_OPTIMIZER,
                                              ESMTB_OPTIMIZER_OPS_VERSION, OPTIMIZER_MIN_SIZE,
                                              0, why, cap);
  const esmtb_comm_ops *comm = find_group(b, ESMTB_GROUP_COMM, ESMTB_COMM_OPS_VERSION,
                                          COMM_MIN_SIZE, 0, why, cap);

  memset(out, 0, sizeof *out);
  out->abi_major = b->abi_major;
  out->abi_minor = b->abi_minor;
  out->struct_size = sizeof *out;
  out->caps = b->caps;
  out->name = b->name;
  out->description = b->description ? b->description : "";
  out->probe = b->probe;

  out->open = dev->open;
  out->close = dev->close;
  out->mem_info = dev->mem_info;
  out->pci_bus_id = dev->pci_bus_id;
  out->alloc = dev->alloc;
  out->free = dev->free;
  out->memset_async = dev->memset_async;
  out->copy_async = dev->copy_async;
  out->stream_create = dev->stream_create;
  out->stream_destroy = dev->stream_destroy;
  out->stream_sync = dev->stream_sync;
  out->event_create = dev->event_create;
  out->event_destroy = dev->event_destroy;
  out->event_record = dev->event_record;
  out->stream_wait_event = dev->stream_wait_event;
  out->event_sync = dev->event_sync;
  if (GROUP_HAS(dev, esmtb_device_ops, event_elapsed)) {
    out->timing_event_create = dev->timing_event_create;
    out->event_elapsed = dev->event_elapsed;
  }

  out->gemm = cmp->gemm;
  out->embed_forward = cmp->embed_forward;
  out->embed_backward = cmp->embed_backward;
  out->layernorm_forward = cmp->layernorm_forward;
  out->layernorm_backward = cmp->layernorm_backward;
  out->add = cmp->add;
  out->gelu_backward = cmp->gelu_backward;
  out->bias_grad = cmp->bias_grad;
  out->attention_forward = cmp->attention_forward;
  out->attention_backward = cmp->attention_backward;
  out->xent = cmp->xent;
  out->sumsq = cmp->sumsq;
  out->scale = cmp->scale;
  out->convert = cmp->convert;
  if (cmp->struct_size >= offsetof(esmtb_compute_ops, attention_probs) + sizeof(void *))
    out->attention_probs = cmp->attention_probs; /* ABI 2.2 */
  if (cmp->struct_size >= offsetof(esmtb_compute_ops, dropout) + sizeof(void *))
    out->dropout = cmp->dropout; /* ABI 2.3 */

  if (opt) {
    out->adamw = opt->adamw;
    out->lion = opt->lion;
  }
  if (comm) {
    out->allreduce = comm->allreduce;
    out->comm_unique_id = comm->comm_unique_id;
    out->comm_init = comm->comm_init;
    out->comm_release = comm->comm_release;
    out->reduce_scatter = comm->reduce_scatter;
    out->allgather = comm->allgather;
  }
  return ESMT_OK;
}

const esmtb_ops *esmt_ops_from_init(esmtb_init_fn init, const esmtb_host *host, char *why,
                                    size_t cap) {
  const esmtb_backend *b = init ? init(host) : NULL;
  if (!b) {
    snprintf(why, cap, "%s", init ? "initialisation failed" : "no " ESMTB_INIT_SYMBOL);
    return NULL;
  }
  esmtb_ops *ops = malloc(sizeof *ops);
  if (!ops) {
    snprintf(why, cap, "out of memory");
    return NULL;
  }
  if (esmt_ops_resolve(b, ops, why, cap) != ESMT_OK) {
    free(ops);
    return NULL;
  }
  return ops;
}
