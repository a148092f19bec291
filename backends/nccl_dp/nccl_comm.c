/* SPDX-License-Identifier: MIT */
/* See nccl_comm.h.
 *
 * The communicator is non-blocking (ncclConfig_t.blocking = 0) so that no
 * NCCL call can hang the process: after each call the communicator's state
 * is polled (ncclCommGetAsyncError) for at most timeout_s. Waits on a
 * stream or event of a device with a communicator poll the stream and the
 * communicator instead of blocking in cudaStreamSynchronize (an NCCL kernel
 * waiting for a dead peer never finishes): an NCCL error, or no completion
 * within timeout_s, aborts the communicator (ncclCommAbort stops its
 * kernels) and fails with a message. Any later allreduce fails at once.
 * The ABI 1.3 reduce_scatter/allgather (ZeRO-1) work the same way.
 * NCCL_DEBUG and the other NCCL_* variables reach NCCL untouched. */
#define _POSIX_C_SOURCE 200809L
#include "nccl_comm.h"

#include <nccl.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_device.h"

/* esmt_status values (the public header is not included by backends) */
enum { ST_INVALID = 1, ST_NOMEM = 2, ST_BACKEND = 6, ST_STATE = 12 };

typedef struct nccl_state {
  ncclComm_t comm;           /* NULL once aborted */
  int rank, world;
  double timeout_s;          /* 0 = wait forever */
  const char *(*peer_failed)(void *user); /* the core's view of the peers, or NULL */
  void *peer_failed_user;
  double last_peer_check;
  unsigned long long calls;  /* allreduce calls, for messages */
  char why[256];             /* why it was aborted */
} nccl_state;

static void (*base_close)(esmtb_device *);
static esmtb_status (*base_stream_sync)(esmtb_device *, esmtb_stream *);
static esmtb_status (*base_event_sync)(esmtb_device *, esmtb_event *);

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Yield for the first 10 ms (most waits are short and their latency is
 * step time, as with cudaStreamSynchronize's spin), then sleep 20 us
 * between polls. */
static void nap(double waited) {
  if (waited < 1e-2) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
}

static nccl_state *state_of(esmtb_device *dev) { return dev ? (nccl_state *)dev->ext : NULL; }

static int timed_out(const nccl_state *s, double t0) {
  return s->timeout_s > 0 && now_s() - t0 > s->timeout_s;
}

/* Tear the communicator down without waiting for peers; `why` is kept for
 * later calls. */
static void kill_comm(nccl_state *s, const char *why) {
  if (!s->comm) return;
  snprintf(s->why, sizeof s->why, "%s", why);
  ncclCommAbort(s->comm);
  s->comm = NULL;
}

/* An NCCL failure: a message naming the call, then abort. */
static esmtb_status nccl_failed(nccl_state *s, ncclResult_t r, const char *what) {
  const char *detail = s->comm ? ncclGetLastError(s->comm) : NULL;
  esmtb_status st = cuda_fail(ST_BACKEND, "NCCL %s (rank %d of %d): %s%s%s", what, s->rank,
                              s->world, ncclGetErrorString(r), detail && *detail ? ": " : "",
                              detail ? detail : "");
  kill_comm(s, "an earlier NCCL error");
  return st;
}

static esmtb_status nccl_timeout(nccl_state *s, const char *what) {
  esmtb_status st = cuda_fail(ST_BACKEND,
                              "NCCL %s (rank %d of %d): no progress in %.0f s: a peer died, hangs "
                              "or cannot be reached (ESMTRAIN_COMM_TIMEOUT sets the limit; "
                              "NCCL_DEBUG=INFO shows NCCL's view)",
                              what, s->rank, s->world, s->timeout_s);
  kill_comm(s, "a timeout");
  return st;
}

/* Every 5 ms: does the core know of a failed peer? Then abort. */
static esmtb_status peers_gone(nccl_state *s, const char *what) {
  const double t = now_s();
  if (!s->peer_failed || t - s->last_peer_check < 5e-3) return 0;
  s->last_peer_check = t;
  const char *why = s->peer_failed(s->peer_failed_user);
  if (!why) return 0;
  esmtb_status st = cuda_fail(ST_BACKEND, "NCCL %s (rank %d of %d) abandoned: %s", what, s->rank,
                              s->world, why);
  kill_comm(s, "a peer failed");
  return st;
}

/* After a non-blocking call: wait until the communicator leaves
 * ncclInProgress. */
static esmtb_status settle(nccl_state *s, ncclResult_t r, const char *what) {
  const double t0 = now_s();
  while (r == ncclInProgress) {
    if (timed_out(s, t0)) return nccl_timeout(s, what);
    esmtb_status gone = peers_gone(s, what);
    if (gone) return gone;
    nap(now_s() - t0);
    ncclResult_t q = ncclCommGetAsyncError(s->comm, &r);
    if (q != ncclSuccess) r = q;
  }
  return r == ncclSuccess ? 0 : nccl_failed(s, r, what);
}

static esmtb_status dead(const nccl_state *s, const char *what) {
  return cuda_fail(ST_BACKEND, "NCCL %s (rank %d of %d): the communicator was shut "
                   "down after %s", what, s->rank, s->world, s->why);
}

static esmtb_status n_unique_id(esmtb_device *dev, void *buf, size_t cap, size_t *len) {
  (void)dev;
  ncclUniqueId id;
  if (!buf || !len || cap < sizeof id)
    return cuda_fail(ST_INVALID, "comm_unique_id: needs %zu bytes, got %zu", sizeof id,
                     cap);
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess)
    return cuda_fail(ST_BACKEND, "NCCL ncclGetUniqueId: %s", ncclGetErrorString(r));
  memcpy(buf, &id, sizeof id);
  *len = sizeof id;
  return 0;
}

static esmtb_status n_comm_init(esmtb_device *dev, const esmtb_comm_init_args *a) {
  ncclUniqueId id;
  if (!dev || !a || a->struct_size < offsetof(esmtb_comm_init_args, peer_failed) || !a->unique_id || a->id_bytes != sizeof id ||
      a->world < 1 || a->rank < 0 || a->rank >= a->world)
    return cuda_fail(ST_INVALID, "comm_init: bad arguments (rank %d of %d, id of %zu "
                     "bytes; NCCL's is %zu)", a ? a->rank : -1, a ? a->world : -1,
                     a ? a->id_bytes : 0, sizeof id);
  if (dev->ext) return cuda_fail(ST_STATE, "comm_init: the device already has one");
  nccl_state *s = calloc(1, sizeof *s);
  if (!s) return cuda_fail(ST_NOMEM, "comm_init: out of host memory");
  s->rank = a->rank;
  s->world = a->world;
  s->timeout_s = a->timeout_s > 0 ? a->timeout_s : 0;
  if (a->struct_size >= offsetof(esmtb_comm_init_args, peer_failed_user) + sizeof(void *)) {
    s->peer_failed = a->peer_failed;
    s->peer_failed_user = a->peer_failed_user;
  }
  memcpy(&id, a->unique_id, sizeof id);
  cudaSetDevice(dev->ordinal);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&s->comm, a->world, id, a->rank, &cfg);
  esmtb_status st;
  if (r != ncclSuccess && r != ncclInProgress) {
    /* nothing to poll: the handle may not exist */
    st = cuda_fail(ST_BACKEND, "NCCL ncclCommInitRankConfig (rank %d of %d, GPU %d): %s",
                   a->rank, a->world, dev->ordinal, ncclGetErrorString(r));
    if (s->comm) ncclCommAbort(s->comm);
    free(s);
    return st;
  }
  if ((st = settle(s, r, "communicator setup"))) {
    free(s);
    return st;
  }
  dev->ext = s;
  return 0;
}

static ncclDataType_t nccl_type(esmtb_dtype t, int *ok) {
  *ok = 1;
  switch (t) {
  case ESMTB_F32: return ncclFloat32;
  case ESMTB_F16: return ncclFloat16;
  case ESMTB_BF16: return ncclBfloat16;
  default: *ok = 0; return ncclFloat32;
  }
}

static esmtb_status n_allreduce(esmtb_device *dev, const esmtb_allreduce_args *a,
                                esmtb_stream *stream) {
  cuda_use_device(dev);
  nccl_state *s = state_of(dev);
  if (!s) return cuda_fail(ST_STATE, "allreduce: comm_init was not called");
  if (!a || a->struct_size < sizeof *a)
    return cuda_fail(ST_INVALID, "allreduce: bad arguments");
  if (!s->comm) return dead(s, "allreduce");
  int ok;
  ncclDataType_t t = nccl_type(a->dtype, &ok);
  if (!ok) return cuda_fail(ST_INVALID, "allreduce: dtype %d is not F32/F16/BF16",
                            (int)a->dtype);
  if (a->n == 0) return 0;
  s->calls++;
  ncclResult_t r = ncclAllReduce(a->buf, a->buf, a->n, t, ncclSum, s->comm, cuda_stream_of(stream));
  return settle(s, r, "allreduce");
}

/* ABI 1.3 (ZeRO-1): rank r owns [offsets[r], offsets[r+1]) of buf. Equal
 * parts take NCCL's ring ncclReduceScatter / ncclAllGather in place (rank
 * r's part at buf + r * part); uneven parts (a gradient bucket across shard
 * boundaries, the shorter last shard) one ncclReduce / ncclBroadcast per
 * owner, rooted there, in one group. */
static esmtb_status check_shard_args(nccl_state *s, const esmtb_shard_args *a, const char *what,
                                     ncclDataType_t *t, size_t *es, int *equal) {
  if (!s) return cuda_fail(ST_STATE, "%s: comm_init was not called", what);
  if (!a || a->struct_size < sizeof *a || !a->offsets || a->world != s->world ||
      a->offsets[0] != 0 || a->offsets[a->world] != a->n)
    return cuda_fail(ST_INVALID, "%s: bad arguments (world %d, the communicator's %d)", what,
                     a ? a->world : -1, s->world);
  if (!s->comm) return dead(s, what);
  int ok;
  *t = nccl_type(a->dtype, &ok);
  if (!ok) return cuda_fail(ST_INVALID, "%s: dtype %d is not F32/F16/BF16", what, (int)a->dtype);
  *es = a->dtype == ESMTB_F32 ? 4 : 2;
  const size_t part = a->offsets[1];
  *equal = 1;
  for (int j = 0; j < a->world; j++) {
    if (a->offsets[j + 1] < a->offsets[j])
      return cuda_fail(ST_INVALID, "%s: offsets decrease at rank %d", what, j);
    if (a->offsets[j + 1] - a->offsets[j] != part) *equal = 0;
  }
  return 0;
}

static esmtb_status group_end(nccl_state *s, ncclResult_t r, const char *what) {
  ncclResult_t e = ncclGroupEnd();
  if (r == ncclSuccess || r == ncclInProgress) r = e;
  return settle(s, r, what);
}

static esmtb_status n_reduce_scatter(esmtb_device *dev, const esmtb_shard_args *a,
                                     esmtb_stream *stream) {
  cuda_use_device(dev);
  nccl_state *s = state_of(dev);
  ncclDataType_t t;
  size_t es;
  int equal;
  esmtb_status st = check_shard_args(s, a, "reduce_scatter", &t, &es, &equal);
  if (st || a->n == 0) return st;
  s->calls++;
  cudaStream_t cs = cuda_stream_of(stream);
  char *b = a->buf;
  if (equal) {
    const size_t part = a->offsets[1];
    ncclResult_t r = ncclReduceScatter(b, b + (size_t)s->rank * part * es, part, t, ncclSum,
                                       s->comm, cs);
    return settle(s, r, "reduce_scatter");
  }
  ncclResult_t r = ncclGroupStart();
  for (int j = 0; j < a->world && (r == ncclSuccess || r == ncclInProgress); j++) {
    const size_t o = a->offsets[j], n = a->offsets[j + 1] - o;
    if (n) r = ncclReduce(b + o * es, b + o * es, n, t, ncclSum, j, s->comm, cs);
  }
  return group_end(s, r, "reduce_scatter");
}

static esmtb_status n_allgather(esmtb_device *dev, const esmtb_shard_args *a,
                                esmtb_stream *stream) {
  cuda_use_device(dev);
  nccl_state *s = state_of(dev);
  ncclDataType_t t;
  size_t es;
  int equal;
  esmtb_status st = check_shard_args(s, a, "allgather", &t, &es, &equal);
  if (st || a->n == 0) return st;
  s->calls++;
  cudaStream_t cs = cuda_stream_of(stream);
  char *b = a->buf;
  if (equal) {
    const size_t part = a->offsets[1];
    ncclResult_t r = ncclAllGather(b + (size_t)s->rank * part * es, b, part, t, s->comm, cs);
    return settle(s, r, "allgather");
  }
  ncclResult_t r = ncclGroupStart();
  for (int j = 0; j < a->world && (r == ncclSuccess || r == ncclInProgress); j++) {
    const size_t o = a->offsets[j], n = a->offsets[j + 1] - o;
    if (n) r = ncclBroadcast(b + o * es, b + o * es, n, t, j, s->comm, cs);
  }
  return group_end(s, r, "allgather");
}

/* Poll `done` (cudaStreamQuery / cudaEventQuery) and the communicator. */
typedef cudaError_t (*query_fn)(void *);
static cudaError_t q_stream(void *p) { return cudaStreamQuery((cudaStream_t)p); }
static cudaError_t q_event(void *p) { return cudaEventQuery((cudaEvent_t)p); }

static esmtb_status watch(nccl_state *s, query_fn q, void *what_obj, const char *what) {
  const double t0 = now_s();
  for (;;) {
    cudaError_t e = q(what_obj);
    if (e == cudaSuccess) return 0;
    if (e != cudaErrorNotReady) {
      cudaGetLastError();
      return cuda_fail(ST_BACKEND, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    ncclResult_t ae = ncclSuccess;
    if (ncclCommGetAsyncError(s->comm, &ae) != ncclSuccess || (ae != ncclSuccess && ae != ncclInProgress))
      return nccl_failed(s, ae, what);
    if (timed_out(s, t0)) return nccl_timeout(s, what);
    esmtb_status gone = peers_gone(s, what);
    if (gone) return gone;
    nap(now_s() - t0);
  }
}

static esmtb_status n_stream_sync(esmtb_device *dev, esmtb_stream *st) {
  cuda_use_device(dev);
  nccl_state *s = state_of(dev);
  if (!s || !s->comm) return base_stream_sync(dev, st);
  return watch(s, q_stream, (void *)cuda_stream_of(st), "stream_sync");
}

static esmtb_status n_event_sync(esmtb_device *dev, esmtb_event *ev) {
  cuda_use_device(dev);
  nccl_state *s = state_of(dev);
  if (!s || !s->comm) return base_event_sync(dev, ev);
  return watch(s, q_event, (void *)ev, "event_sync");
}

/* Finalize (it waits for the communicator's queued work, bounded by the
 * timeout) and destroy; with `abort`, or after a failure or timeout, abort
 * instead, so that nothing later (cudaFree, close) waits on an NCCL kernel.
 * The core's peer_failed is never called again: its user data may go. */
static void release(nccl_state *s, int abort, const char *why) {
  s->peer_failed = NULL;
  if (s->comm && !abort) {
    ncclResult_t r = ncclCommFinalize(s->comm);
    if (settle(s, r, "finalize") == 0) {
      ncclCommDestroy(s->comm);
      s->comm = NULL;
      snprintf(s->why, sizeof s->why, "%s", why);
    }
  }
  kill_comm(s, why);
}

static void n_comm_release(esmtb_device *dev, int abort) {
  nccl_state *s = state_of(dev);
  if (!s) return;
  cudaSetDevice(dev->ordinal);
  release(s, abort, abort ? "this rank gave up (comm_release)" : "comm_release");
}

static void n_close(esmtb_device *dev) {
  nccl_state *s = state_of(dev);
  if (s) {
    cudaSetDevice(dev->ordinal);
    release(s, 0, "close");
    free(s);
    dev->ext = NULL;
  }
  base_close(dev);
}

void nccl_fill_comm_ops(cuda_tables *t) {
  esmtb_device_ops *d = &t->device;
  base_close = d->close;
  base_stream_sync = d->stream_sync;
  base_event_sync = d->event_sync;
  d->close = n_close;
  d->stream_sync = n_stream_sync;
  d->event_sync = n_event_sync;
  t->has_comm = 1;
  t->comm.allreduce = n_allreduce;
  t->comm.reduce_scatter = n_reduce_scatter;
  t->comm.allgather = n_allgather;
  t->comm.comm_unique_id = n_unique_id;
  t->comm.comm_init = n_comm_init;
  t->comm.comm_release = n_comm_release;
}
