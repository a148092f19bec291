/* SPDX-License-Identifier: MIT */
/* One MPI communicator: create/destroy and the plugin table the core
 * loads. Failure handling (the abort channel, the dead state and its
 * message) is in mpi_comm_abort.c. */
#define _POSIX_C_SOURCE 200809L
#include "mpi_comm_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/comm_text.h"

/* ---- create / destroy ------------------------------------------------------ */

/* $ESMTRAIN_MPI_PIECE_BYTES: smaller messages (tests, tuning); every rank
 * must use the same (the operation header checks). */
static int piece_from_env(size_t *out, char *err, size_t cap) {
  *out = MC_PIECE_MAX;
  const char *v = getenv("ESMTRAIN_MPI_PIECE_BYTES");
  if (!v || !*v) return 0;
  char *end = NULL;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || !end || *end || x < 4096 || x > MC_PIECE_MAX) {
    snprintf(err, cap, "ESMTRAIN_MPI_PIECE_BYTES=%s is not a byte count from 4096 to %zu", v,
             MC_PIECE_MAX);
    return 1;
  }
  *out = (size_t)x & ~(size_t)7; /* whole f64 elements */
  return 0;
}

/* MPI_Comm_idup of MPI_COMM_WORLD, waiting at most timeout_s for every rank.
 * The handle lives on the heap: on a timeout the request cannot be freed
 * (a nonblocking collective), and MPI may write it later. */
static int dup_world(MPI_Comm *out, double timeout_s, char *err, size_t cap) {
  MPI_Comm *tmp = malloc(sizeof *tmp);
  if (!tmp) {
    snprintf(err, cap, "out of memory creating the MPI communicator");
    return 1;
  }
  MPI_Request rq;
  int rc = MPI_Comm_idup(MPI_COMM_WORLD, tmp, &rq), done = 0;
  double deadline = mc_now() + timeout_s;
  while (rc == MPI_SUCCESS && !done) {
    rc = MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done) break;
    if (mc_now() > deadline) {
      snprintf(err, cap,
               "timed out after %g s waiting for every rank to create the MPI communicator (a "
               "rank did not start it, or is stuck)",
               timeout_s);
      mc_runtime_note_hazard(timeout_s);
      return 1; /* tmp is MPI's now */
    }
    mc_nap(100000);
  }
  if (rc != MPI_SUCCESS) {
    char e[MPI_MAX_ERROR_STRING + 1];
    mc_error_string(rc, e, sizeof e);
    snprintf(err, cap, "MPI_Comm_idup failed: %s", e);
    free(tmp);
    return 1;
  }
  *out = *tmp;
  free(tmp);
  return 0;
}

static void free_comm(mpi_comm *c) {
  /* A dead communicator's MPI communicators are never freed: a failed
   * collective leaves messages in flight (headers, data, the other ranks'
   * abort notices), and once freed on every rank, MPI reuses the context
   * id for the next communicator, where those stale messages would be
   * matched (Open MPI queues early messages for a context id that does
   * not exist yet) - a fresh communicator would fail with an old abort.
   * Kept, their id is never reused; the cost is two handles per failure. */
  if (!c->dead && c->data != MPI_COMM_NULL) MPI_Comm_free(&c->data);
  if (!c->dead && c->ctl != MPI_COMM_NULL) MPI_Comm_free(&c->ctl);
  for (int i = 0; i < 2; i++) {
    free(c->batch[i].req);
    free(c->batch[i].peer);
    free(c->batch[i].is_recv);
  }
  free(c->indices);
  free(c->statuses);
  if (c->leaked) return; /* abandoned requests may still write scratch, hdrs, abort_in */
  free(c->hdrs);
  free(c->scratch);
  free(c);
}

static void *mc_create(double timeout_s, char *err, size_t cap) {
  char spare[8];
  if (!err || !cap) {
    err = spare;
    cap = sizeof spare;
  }
  err[0] = '\0';
  if (!(timeout_s > 0 && timeout_s <= 1e6)) {
    snprintf(err, cap, "MPI communicator: timeout must be between 0 and 1e6 seconds");
    return NULL;
  }
  size_t piece = 0;
  if (piece_from_env(&piece, err, cap) || mc_runtime_start(err, cap)) return NULL;
  mpi_comm *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, cap, "out of memory creating the MPI communicator");
    return NULL;
  }
  c->data = c->ctl = MPI_COMM_NULL;
  c->abort_req = MPI_REQUEST_NULL;
  c->timeout_s = timeout_s;
  c->piece_max = piece;
  c->step = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c->world);
  if (dup_world(&c->data, timeout_s, err, cap) || dup_world(&c->ctl, timeout_s, err, cap)) {
    free_comm(c);
    return NULL;
  }
  MPI_Comm_set_errhandler(c->data, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(c->ctl, MPI_ERRORS_RETURN);
  /* A step posts at most one send and one receive per peer. */
  int cap_req = 2 * (c->world - 1) + 2;
  int ok = 1;
  for (int i = 0; i < 2; i++) {
    mc_batch *b = &c->batch[i];
    b->req = malloc((size_t)cap_req * sizeof *b->req);
    b->peer = malloc((size_t)cap_req * sizeof *b->peer);
    b->is_recv = malloc((size_t)cap_req);
    b->cap = cap_req;
    ok = ok && b->req && b->peer && b->is_recv;
  }
  c->indices = malloc((size_t)cap_req * sizeof *c->indices);
  c->statuses = malloc((size_t)cap_req * sizeof *c->statuses);
  c->hdrs = calloc((size_t)c->world, sizeof *c->hdrs);
  if (!ok || !c->indices || !c->statuses || !c->hdrs) {
    snprintf(err, cap, "out of memory creating the MPI communicator");
    free_comm(c);
    return NULL;
  }
  int rc = MPI_Irecv(c->abort_in, MC_MSG_MAX, MPI_CHAR, MPI_ANY_SOURCE, MC_TAG_ABORT, c->ctl,
                     &c->abort_req);
  if (rc != MPI_SUCCESS) {
    char e[MPI_MAX_ERROR_STRING + 1];
    mc_error_string(rc, e, sizeof e);
    snprintf(err, cap, "MPI communicator: posting the abort receive failed: %s", e);
    c->abort_req = MPI_REQUEST_NULL;
    free_comm(c);
    return NULL;
  }
  return c;
}

/* MPI is not finalised here (mpi_comm_runtime.c says why: at exit). */
static void mc_destroy(void *s) {
  mpi_comm *c = s;
  if (!c) return;
  if (c->abort_req != MPI_REQUEST_NULL) {
    MPI_Cancel(&c->abort_req);
    double deadline = mc_now() + 1.0;
    int done = 0;
    while (MPI_Test(&c->abort_req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
           mc_now() < deadline)
      mc_nap(50000);
    if (!done && c->abort_req != MPI_REQUEST_NULL) {
      MPI_Request_free(&c->abort_req);
      c->leaked = 1;
    }
  }
  mc_release(c); /* nothing is outstanding unless a failure left it */
  free_comm(c);
}

/* ---- the rest of the table --------------------------------------------------- */

static int mc_rank(const void *s) { return s ? ((const mpi_comm *)s)->rank : -1; }
static int mc_world_size(const void *s) { return s ? ((const mpi_comm *)s)->world : 0; }

static int mc_abort(void *s, const char *reason) {
  mpi_comm *c = s;
  if (c->dead) return MC_OK; /* peers already know */
  char why[MC_MSG_MAX];
  snprintf(why, sizeof why, "%s", reason && *reason ? reason : "aborted (no reason given)");
  const char *saved = c->op;
  int saved_state = c->op_state;
  mc_kill(c, MC_ERR_IO, c->rank, why, 1);
  /* Locally it reads as this rank's own doing, without an op prefix. */
  snprintf(c->dead_msg, sizeof c->dead_msg, "this rank aborted the communicator: %s", why);
  c->op = saved;
  c->op_state = saved_state;
  return MC_OK;
}

static int mc_check_peers(void *s) {
  mpi_comm *c = s;
  return mc_poll_abort(c) ? c->dead_status : MC_OK;
}

static void mc_set_step(void *s, int64_t step) {
  if (s) ((mpi_comm *)s)->step = step;
}

static void mc_describe_last(const void *s, char *buf, size_t cap) {
  const mpi_comm *c = s;
  if (!c) esmt_comm_describe_op(buf, cap, NULL, 0, -1, 0, 0);
  else esmt_comm_describe_op(buf, cap, c->op, c->seq, c->step, c->op_bytes, c->op_state);
}

static const char *mc_last_error(const void *s) {
  const mpi_comm *c = s;
  return !c ? "no MPI communicator" : c->dead ? c->dead_msg : "";
}

static const esmt_comm_plugin k_plugin = {
    .abi_version = ESMT_COMM_PLUGIN_ABI,
    .struct_size = sizeof(esmt_comm_plugin),
    .name = "mpi",
    .describe = mc_describe,
    .create = mc_create,
    .destroy = mc_destroy,
    .rank = mc_rank,
    .world_size = mc_world_size,
    .allreduce_sum = mc_allreduce_sum,
    .reduce_scatter_sum = mc_reduce_scatter_sum,
    .allgather_shards = mc_allgather_shards,
    .broadcast = mc_broadcast,
    .allgather = mc_allgather,
    .barrier = mc_barrier,
    .abort = mc_abort,
    .check_peers = mc_check_peers,
    .set_step = mc_set_step,
    .describe_last = mc_describe_last,
    .last_error = mc_last_error,
};

/* The one exported symbol (ESMT_COMM_PLUGIN_SYMBOL). */
__attribute__((visibility("default"))) const esmt_comm_plugin *esmt_comm_plugin_get(void);
const esmt_comm_plugin *esmt_comm_plugin_get(void) { return &k_plugin; }
