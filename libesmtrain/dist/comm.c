/* SPDX-License-Identifier: MIT */
/* See comm.h: every call's arguments are checked here, once for all
 * transports, then handed to the TCP ring or the plugin's table. A plugin's
 * failure text becomes this thread's last error. */
#define _POSIX_C_SOURCE 200809L
#include "comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

esmt_comm_fault_fn esmt_comm_test_fault;

/* Count a collective of kind op; the test hook sees it before any byte moves. */
static void fault_point(esmt_comm *c, esmt_comm_op op) {
  const uint64_t nth = ++c->calls[op];
  if (esmt_comm_test_fault) esmt_comm_test_fault(c, op, nth);
}

/* The plugin's status and its message as this thread's error. */
static esmt_status plugin_result(const esmt_comm *c, int st) {
  if (st == ESMT_OK) return ESMT_OK;
  const char *msg = c->plugin->last_error(c->state);
  return esmt_fail((esmt_status)st, "%s", msg && *msg ? msg : "MPI communicator failed");
}

static esmt_status check_dtype(esmt_comm_dtype dtype, const void *buf, size_t count,
                               const char *fn) {
  ESMT_CHECK_ARG(dtype == ESMT_COMM_F32 || dtype == ESMT_COMM_F64 || dtype == ESMT_COMM_I64, fn,
                 "unknown dtype");
  const size_t es = esmt_comm_dtype_size(dtype);
  ESMT_CHECK_ARG(buf || count == 0, fn, "NULL buffer");
  ESMT_CHECK_ARG(count <= SIZE_MAX / es, fn, "count too large");
  ESMT_CHECK_ARG(((uintptr_t)buf % es) == 0, fn, "buffer not aligned to its element size");
  return ESMT_OK;
}

static esmt_status check_shards(const esmt_comm *c, const uint64_t *off, size_t count,
                                const char *fn) {
  const int W = esmt_comm_world_size(c);
  ESMT_CHECK_ARG(off && off[0] == 0 && off[W] == count, fn,
                 "shard offsets must run from 0 to count");
  for (int k = 0; k < W; k++)
    ESMT_CHECK_ARG(off[k] <= off[k + 1], fn, "shard offsets must not decrease");
  return ESMT_OK;
}

esmt_status esmt_comm_create(esmt_comm **out, const esmt_comm_options *opt) {
  ESMT_CHECK_ARG(out && opt, "esmt_comm_create", "NULL argument");
  *out = NULL;
  esmt_comm *c = calloc(1, sizeof *c);
  if (!c) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_comm_create: out of memory");
  esmt_status st = esmt_tcp_comm_create(&c->tcp, opt);
  if (st) {
    free(c);
    return st;
  }
  *out = c;
  return ESMT_OK;
}

void esmt_comm_destroy(esmt_comm *c) {
  if (!c) return;
  if (c->tcp) esmt_tcp_comm_destroy(c->tcp);
  else if (c->plugin) c->plugin->destroy(c->state);
  free(c);
}

int esmt_comm_rank(const esmt_comm *c) {
  if (!c) return -1;
  return c->tcp ? esmt_tcp_comm_rank(c->tcp) : c->plugin->rank(c->state);
}

int esmt_comm_world_size(const esmt_comm *c) {
  if (!c) return 0;
  return c->tcp ? esmt_tcp_comm_world_size(c->tcp) : c->plugin->world_size(c->state);
}

const char *esmt_comm_kind_name(const esmt_comm *c) {
  return !c ? "none" : c->tcp ? "tcp" : c->plugin->name;
}

void esmt_comm_describe(const esmt_comm *c, char *buf, size_t cap) {
  if (!buf || !cap) return;
  if (!c) snprintf(buf, cap, "no communicator");
  else if (c->tcp) snprintf(buf, cap, "TCP ring%s%s", c->note[0] ? "; " : "", c->note);
  else snprintf(buf, cap, "MPI (%s)", c->plugin->describe());
}

esmt_status esmt_comm_allreduce_sum(esmt_comm *c, void *buf, size_t count, esmt_comm_dtype dtype) {
  const char *fn = "esmt_comm_allreduce_sum";
  ESMT_CHECK_ARG(c, fn, "NULL communicator");
  esmt_status st = check_dtype(dtype, buf, count, fn);
  if (st) return st;
  fault_point(c, ESMT_COMM_OP_ALLREDUCE);
  if (c->tcp) return esmt_tcp_comm_allreduce_sum(c->tcp, buf, count, dtype);
  return plugin_result(c, c->plugin->allreduce_sum(c->state, buf, count, (int)dtype));
}

esmt_status esmt_comm_reduce_scatter_sum(esmt_comm *c, void *buf, size_t count,
                                         const uint64_t *off, esmt_comm_dtype dtype) {
  const char *fn = "esmt_comm_reduce_scatter_sum";
  ESMT_CHECK_ARG(c, fn, "NULL communicator");
  esmt_status st = check_dtype(dtype, buf, count, fn);
  if (!st) st = check_shards(c, off, count, fn);
  if (st) return st;
  fault_point(c, ESMT_COMM_OP_REDUCE_SCATTER);
  if (c->tcp) return esmt_tcp_comm_reduce_scatter_sum(c->tcp, buf, count, off, dtype);
  return plugin_result(c, c->plugin->reduce_scatter_sum(c->state, buf, count, off, (int)dtype));
}

esmt_status esmt_comm_allgather_shards(esmt_comm *c, void *buf, size_t count,
                                       const uint64_t *off, size_t elem_size) {
  const char *fn = "esmt_comm_allgather_shards";
  ESMT_CHECK_ARG(c, fn, "NULL communicator");
  ESMT_CHECK_ARG(elem_size > 0 && count <= SIZE_MAX / elem_size, fn, "bad size");
  ESMT_CHECK_ARG(buf || count == 0, fn, "NULL buffer");
  esmt_status st = check_shards(c, off, count, fn);
  if (st) return st;
  fault_point(c, ESMT_COMM_OP_ALLGATHER_SHARDS);
  if (c->tcp) return esmt_tcp_comm_allgather_shards(c->tcp, buf, count, off, elem_size);
  return plugin_result(c, c->plugin->allgather_shards(c->state, buf, count, off, elem_size));
}

esmt_status esmt_comm_broadcast(esmt_comm *c, void *buf, size_t nbytes, int root) {
  const char *fn = "esmt_comm_broadcast";
  ESMT_CHECK_ARG(c, fn, "NULL communicator");
  ESMT_CHECK_ARG(buf || nbytes == 0, fn, "NULL buffer");
  const int W = esmt_comm_world_size(c);
  if (root < 0 || root >= W)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: root %d is not in 0..%d", fn, root, W - 1);
  fault_point(c, ESMT_COMM_OP_BROADCAST);
  if (c->tcp) return esmt_tcp_comm_broadcast(c->tcp, buf, nbytes, root);
  return plugin_result(c, c->plugin->broadcast(c->state, buf, nbytes, root));
}

esmt_status esmt_comm_allgather(esmt_comm *c, const void *send, size_t nbytes, void *recv) {
  const char *fn = "esmt_comm_allgather";
  ESMT_CHECK_ARG(c, fn, "NULL communicator");
  ESMT_CHECK_ARG((send && recv) || nbytes == 0, fn, "NULL buffer");
  ESMT_CHECK_ARG(nbytes <= SIZE_MAX / (size_t)esmt_comm_world_size(c), fn, "size too large");
  fault_point(c, ESMT_COMM_OP_ALLGATHER);
  if (c->tcp) return esmt_tcp_comm_allgather(c->tcp, send, nbytes, recv);
  return plugin_result(c, c->plugin->allgather(c->state, send, nbytes, recv));
}

esmt_status esmt_comm_barrier(esmt_comm *c) {
  ESMT_CHECK_ARG(c, "esmt_comm_barrier", "NULL communicator");
  fault_point(c, ESMT_COMM_OP_BARRIER);
  if (c->tcp) return esmt_tcp_comm_barrier(c->tcp);
  return plugin_result(c, c->plugin->barrier(c->state));
}

esmt_status esmt_comm_abort(esmt_comm *c, const char *reason) {
  ESMT_CHECK_ARG(c, "esmt_comm_abort", "NULL communicator");
  if (c->tcp) return esmt_tcp_comm_abort(c->tcp, reason);
  c->plugin->abort(c->state, reason); /* like TCP's: the local error is not this call's */
  esmt_clear_error();
  return ESMT_OK;
}

esmt_status esmt_comm_check_peers(esmt_comm *c) {
  ESMT_CHECK_ARG(c, "esmt_comm_check_peers", "NULL communicator");
  if (c->tcp) return esmt_tcp_comm_check_peers(c->tcp);
  return plugin_result(c, c->plugin->check_peers(c->state));
}

void esmt_comm_set_step(esmt_comm *c, int64_t step) {
  if (!c) return;
  if (c->tcp) esmt_tcp_comm_set_step(c->tcp, step);
  else c->plugin->set_step(c->state, step);
}

void esmt_comm_describe_last(const esmt_comm *c, char *buf, size_t cap) {
  if (!buf || cap == 0) return;
  if (!c) snprintf(buf, cap, "no operation yet");
  else if (c->tcp) esmt_tcp_comm_describe_last(c->tcp, buf, cap);
  else c->plugin->describe_last(c->state, buf, cap);
}
