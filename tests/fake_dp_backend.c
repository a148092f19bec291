/* SPDX-License-Identifier: MIT */
/* See fake_dp_backend.h. */
#define _GNU_SOURCE
#include "fake_dp_backend.h"
#include "backend_tables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "model.h"
#include "tcp_comm.h"

static const esmtb_ops *g_cpu;
static esmtb_ops g_ops;
static char g_dir[512];
static esmt_comm *g_comm; /* the fake "NCCL" communicator */
static const float *g_grads;
static uint64_t g_total;
static fake_call g_calls[8192];
static int g_n;
static const char *(*g_peer_failed)(void *user);
static void *g_peer_user;
static int g_peer_checks;

static void note(fake_call c) {
  if (g_n < (int)(sizeof g_calls / sizeof g_calls[0])) g_calls[g_n++] = c;
}

static esmtb_status f_unique_id(esmtb_device *d, void *buf, size_t cap, size_t *len) {
  (void)d;
  static int serial;
  char id[600];
  int n = snprintf(id, sizeof id, "%s/fake-nccl-%d-%d", g_dir, (int)getpid(), serial++);
  if ((size_t)n + 1 > cap) return 1;
  memcpy(buf, id, (size_t)n + 1);
  *len = (size_t)n + 1;
  note((fake_call){.kind = FAKE_ID});
  return 0;
}

static esmtb_status f_comm_init(esmtb_device *d, const esmtb_comm_init_args *a) {
  (void)d;
  const char *path = a->unique_id;
  if (a->id_bytes < 2 || path[a->id_bytes - 1] != '\0') return 1;
  uint64_t token = 1469598103934665603ull;
  for (const char *p = path; *p; p++) token = (token ^ (unsigned char)*p) * 1099511628211ull;
  esmt_comm_options o = {a->rank, a->world, NULL, 0, path, token, a->timeout_s > 0 ? a->timeout_s : 20};
  note((fake_call){.kind = FAKE_INIT, .rank = a->rank, .world = a->world});
  g_peer_failed = a->peer_failed;
  g_peer_user = a->peer_failed_user;
  return (esmtb_status)esmt_comm_create(&g_comm, &o);
}

static void f_comm_release(esmtb_device *d, int abort) {
  (void)d;
  g_peer_failed = NULL; /* the core's data may go now */
  if (!abort) {
    esmt_comm_destroy(g_comm);
    g_comm = NULL;
    return;
  }
  note((fake_call){.kind = FAKE_ABORT});
  if (g_comm) esmt_comm_abort(g_comm, "fake comm_release(abort)");
}

static esmtb_status f_allreduce(esmtb_device *d, const esmtb_allreduce_args *a, esmtb_stream *s) {
  (void)d;
  const float *f = a->buf;
  int64_t lo = -1, hi = -1;
  if (g_grads && f >= g_grads && f + a->n <= g_grads + g_total) {
    lo = f - g_grads;
    hi = lo + (int64_t)a->n;
  }
  note((fake_call){.kind = FAKE_ALLREDUCE, .stream = s, .dtype = a->dtype, .lo = lo, .hi = hi});
  if (!g_comm) return 12;
  if (a->dtype != ESMTB_F32) return 8; /* the core only sums fp32 gradients */
  return (esmtb_status)esmt_comm_allreduce_sum(g_comm, a->buf, a->n, ESMT_COMM_F32);
}

static void range_of(const void *buf, size_t n, int64_t *lo, int64_t *hi) {
  const float *f = buf;
  *lo = -1;
  *hi = (int64_t)n;
  if (g_grads && f >= g_grads && f + n <= g_grads + g_total) {
    *lo = f - g_grads;
    *hi = *lo + (int64_t)n;
  }
}

static esmtb_status shard_call(const esmtb_shard_args *a, esmtb_stream *s, int kind) {
  int64_t lo, hi;
  range_of(a->buf, a->n, &lo, &hi);
  note((fake_call){.kind = kind, .stream = s, .dtype = a->dtype, .lo = lo, .hi = hi});
  if (!g_comm) return 12;
  if (a->dtype != ESMTB_F32) return 8;
  const int W = esmt_comm_world_size(g_comm);
  if (a->world != W) return 1;
  uint64_t off[65];
  if (W > 64) return 1;
  for (int j = 0; j <= W; j++) off[j] = a->offsets[j];
  return kind == FAKE_REDUCE_SCATTER
             ? (esmtb_status)esmt_comm_reduce_scatter_sum(g_comm, a->buf, a->n, off, ESMT_COMM_F32)
             : (esmtb_status)esmt_comm_allgather_shards(g_comm, a->buf, a->n, off, sizeof(float));
}

static esmtb_status f_reduce_scatter(esmtb_device *d, const esmtb_shard_args *a, esmtb_stream *s) {
  (void)d;
  return shard_call(a, s, FAKE_REDUCE_SCATTER);
}

static esmtb_status f_allgather(esmtb_device *d, const esmtb_shard_args *a, esmtb_stream *s) {
  (void)d;
  return shard_call(a, s, FAKE_ALLGATHER);
}

static esmtb_status f_event_record(esmtb_device *d, esmtb_event *e, esmtb_stream *s) {
  note((fake_call){.kind = FAKE_RECORD, .stream = s, .event = e});
  return g_cpu->event_record(d, e, s);
}

static esmtb_status f_stream_wait_event(esmtb_device *d, esmtb_stream *s, esmtb_event *e) {
  note((fake_call){.kind = FAKE_WAIT, .stream = s, .event = e});
  return g_cpu->stream_wait_event(d, s, e);
}

/* Waits on a stream other than the model's ask the core about the peers,
 * as nccl_dp's do while NCCL works. */
static esmtb_status f_stream_sync(esmtb_device *d, esmtb_stream *s) {
  if (s && g_peer_failed) {
    g_peer_checks++;
    const char *why = g_peer_failed(g_peer_user);
    if (why) return esmt_fail(ESMT_ERR_BACKEND, "fake stream_sync abandoned: %s", why);
  }
  return g_cpu->stream_sync(d, s);
}

int fake_dp_peer_checks(void) { return g_peer_checks; }

static void f_close(esmtb_device *d) {
  esmt_comm_destroy(g_comm);
  g_comm = NULL;
  g_cpu->close(d);
}

const esmtb_ops *fake_dp_ops(const esmtb_ops *cpu, const char *dir) {
  g_cpu = cpu;
  snprintf(g_dir, sizeof g_dir, "%s", dir);
  static test_backend_tables t;
  test_tables_split(cpu, &t);
  t.backend.name = "fake_dp";
  /* fp32 only: a device backend with half caps would make AUTO precision
   * pick bf16, and the comparison with the cpu TCP path is in fp32 */
  t.backend.caps = (cpu->caps & ~(uint32_t)(ESMTB_CAP_HOST_ADDRESSABLE | ESMTB_CAP_F16 |
                                            ESMTB_CAP_BF16)) |
                   ESMTB_CAP_MULTI_DEVICE;
  t.has_comm = 1;
  t.comm.comm_unique_id = f_unique_id;
  t.comm.comm_init = f_comm_init;
  t.comm.comm_release = f_comm_release;
  t.comm.allreduce = f_allreduce;
  t.comm.reduce_scatter = f_reduce_scatter;
  t.comm.allgather = f_allgather;
  t.device.event_record = f_event_record;
  t.device.stream_wait_event = f_stream_wait_event;
  t.device.close = f_close;
  t.device.stream_sync = f_stream_sync;
  test_tables_resolve(&t, &g_ops);
  g_n = 0;
  g_peer_checks = 0;
  g_peer_failed = NULL;
  return &g_ops;
}

void fake_dp_watch(const float *grads, uint64_t total) {
  g_grads = grads;
  g_total = total;
}

const fake_call *fake_dp_calls(int *n) {
  *n = g_n;
  return g_calls;
}

static int g_zero;
void fake_dp_expect_zero(int on) { g_zero = on; }

static char g_problem[512];
#define PROBLEM(...) (snprintf(g_problem, sizeof g_problem, __VA_ARGS__), g_problem)

/* ZeRO-2's slots: per update (one backward per rank here) the parts'
 * reduce-scatters, each after a model -> comm event, cover `total`; the
 * model stream waits for the comm stream; then the weights' allgather. */
static const char *check_zero2(const fake_call *c, int i, const void *comm_stream,
                               uint64_t total, int steps, int *groups) {
  for (int s = 0; s < steps; s++) {
    uint64_t covered = 0;
    int parts = 0, model_waits = 0;
    for (; i < g_n && c[i].kind != FAKE_ALLGATHER; i++) {
      if (c[i].kind == FAKE_WAIT && c[i].stream == NULL) model_waits++;
      if (c[i].kind == FAKE_ALLREDUCE) return PROBLEM("step %d: an all-reduce at call %d", s, i);
      if (c[i].kind != FAKE_REDUCE_SCATTER) continue;
      if (i < 2 || c[i - 2].kind != FAKE_RECORD || c[i - 1].kind != FAKE_WAIT ||
          c[i - 2].stream != NULL || c[i - 1].stream != comm_stream ||
          c[i - 2].event != c[i - 1].event)
        return PROBLEM("step %d: reduce-scatter at call %d not after a model -> comm event", s, i);
      if (c[i].stream != comm_stream || c[i].dtype != ESMTB_F32)
        return PROBLEM("step %d: reduce-scatter %d: stream %p dtype %d", s, i, c[i].stream,
                       c[i].dtype);
      covered += (uint64_t)(c[i].lo < 0 ? c[i].hi : c[i].hi - c[i].lo); /* range_of's n */
      parts++;
    }
    if (covered != total)
      return PROBLEM("step %d: the parts reduce-scattered cover %llu of %llu", s,
                     (unsigned long long)covered, (unsigned long long)total);
    if (!model_waits) return PROBLEM("step %d: the model stream never waits for the comm stream", s);
    if (i >= g_n || c[i].stream != comm_stream || c[i].lo != -1 || c[i].hi != (int64_t)total)
      return PROBLEM("step %d: call %d is not the weights' allgather on the comm stream", s, i);
    i++;
    if (s == 0) *groups = parts;
  }
  return NULL;
}

/* ZeRO-3: every reduce-scatter (gradient parts) and all-gather (a layer's
 * weights into a slot, the end parts after an update) runs on the comm
 * stream right after a model -> comm event; the reduce-scatters cover
 * `total` once per update; the model stream waits for the comm stream at
 * least once per all-gather (before the slot is read). */
static const char *check_zero3(const fake_call *c, int i, const void *comm_stream,
                               uint64_t total, int steps, int *groups) {
  uint64_t covered = 0;
  int parts = 0, gathers = 0, model_waits = 0;
  for (; i < g_n; i++) {
    if (c[i].kind == FAKE_WAIT && c[i].stream == NULL) model_waits++;
    if (c[i].kind == FAKE_ALLREDUCE) return PROBLEM("an all-reduce at call %d", i);
    if (c[i].kind != FAKE_REDUCE_SCATTER && c[i].kind != FAKE_ALLGATHER) continue;
    if (i < 2 || c[i - 2].kind != FAKE_RECORD || c[i - 1].kind != FAKE_WAIT ||
        c[i - 2].stream != NULL || c[i - 1].stream != comm_stream ||
        c[i - 2].event != c[i - 1].event || c[i].stream != comm_stream)
      return PROBLEM("collective at call %d (kind %d) not on the comm stream after a model -> "
                     "comm event", i, c[i].kind);
    if (c[i].kind == FAKE_ALLGATHER) {
      gathers++;
      continue;
    }
    covered += (uint64_t)(c[i].lo < 0 ? c[i].hi : c[i].hi - c[i].lo); /* range_of's n */
    parts++;
  }
  if (covered != (uint64_t)steps * total)
    return PROBLEM("the parts reduce-scattered cover %llu of %d x %llu",
                   (unsigned long long)covered, steps, (unsigned long long)total);
  if (gathers < steps || model_waits < gathers)
    return PROBLEM("%d weight all-gathers, %d model-stream waits", gathers, model_waits);
  *groups = parts / steps;
  return NULL;
}

const char *fake_dp_check(int rank, int world, uint64_t total, uint64_t bucket, int steps,
                          int *groups) {
  const fake_call *c = g_calls;
  int i = 0, ids = 0;
  *groups = 0;
  for (; i < g_n && c[i].kind != FAKE_INIT; i++) {
    if (c[i].kind == FAKE_ID) ids++;
    else return PROBLEM("call %d (kind %d) before comm_init", i, c[i].kind);
  }
  if (ids != (rank == 0)) return PROBLEM("rank %d made %d ids", rank, ids);
  if (i == g_n) return PROBLEM("no comm_init");
  if (c[i].rank != rank || c[i].world != world)
    return PROBLEM("comm_init as rank %d of %d", c[i].rank, c[i].world);
  i++;
  if (i >= g_n || c[i].kind != FAKE_ALLREDUCE || c[i].lo != -1 || c[i].dtype != ESMTB_F32)
    return PROBLEM("call %d is not the one-float test all-reduce", i);
  const void *comm_stream = c[i].stream;
  if (!comm_stream) return PROBLEM("the test all-reduce ran on the model's stream");
  i++;
  if (g_zero >= 3) return check_zero3(c, i, comm_stream, total, steps, groups);
  if (g_zero >= 2) return check_zero2(c, i, comm_stream, total, steps, groups);
  const uint64_t per_step = (total + bucket - 1) / bucket;
  for (int s = 0; s < steps; s++) {
    uint64_t next_hi = total, made = 0;
    int step_groups = 0;
    while (made < per_step) {
      /* a RECORD on the model stream, the comm stream's WAIT on it, then all-reduces */
      if (i + 1 >= g_n || c[i].kind != FAKE_RECORD || c[i + 1].kind != FAKE_WAIT)
        return PROBLEM("step %d: call %d is not an event record + wait before all-reduces", s, i);
      if (c[i].stream != NULL || c[i + 1].stream != comm_stream || c[i].event != c[i + 1].event)
        return PROBLEM("step %d: the event at call %d is not model stream -> comm stream", s, i);
      i += 2;
      step_groups++;
      int n = 0;
      const int bucket_kind = g_zero ? FAKE_REDUCE_SCATTER : FAKE_ALLREDUCE;
      for (; i < g_n && c[i].kind == bucket_kind; i++, n++) {
        if (c[i].stream != comm_stream || c[i].dtype != ESMTB_F32)
          return PROBLEM("step %d: all-reduce %d: stream %p dtype %d", s, i, c[i].stream,
                         c[i].dtype);
        const uint64_t want_lo = next_hi > bucket ? next_hi - bucket : 0;
        if (c[i].hi != (int64_t)next_hi || c[i].lo != (int64_t)want_lo)
          return PROBLEM("step %d: bucket %llu is [%lld, %lld), want [%llu, %llu)", s,
                         (unsigned long long)made, (long long)c[i].lo, (long long)c[i].hi,
                         (unsigned long long)want_lo, (unsigned long long)next_hi);
        next_hi = want_lo;
        made++;
      }
      if (!n) return PROBLEM("step %d: an event with no all-reduce after it (call %d)", s, i);
    }
    if (next_hi != 0) return PROBLEM("step %d: gradients below %llu not summed", s,
                                     (unsigned long long)next_hi);
    if (g_zero) { /* the updated shards to everyone: the weights, not the gradients */
      for (; i < g_n && c[i].kind != FAKE_ALLGATHER && c[i].kind != FAKE_RECORD; i++) {}
      if (i < g_n && c[i].kind == FAKE_RECORD) i += 2; /* ordered after AdamW */
      if (i >= g_n || c[i].kind != FAKE_ALLGATHER || c[i].stream != comm_stream ||
          c[i].dtype != ESMTB_F32 || c[i].lo != -1 || c[i].hi != (int64_t)total)
        return PROBLEM("step %d: call %d is not the weights' allgather on the comm stream", s, i);
      i++;
    }
    if (s == 0) *groups = step_groups;
  }
  for (; i < g_n; i++)
    if (c[i].kind == FAKE_ALLREDUCE) return PROBLEM("extra all-reduce at call %d", i);
  return NULL;
}
