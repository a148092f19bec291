/* SPDX-License-Identifier: MIT */
/* Collectives over the ring (see tcp_comm_internal.h). Each operation
 * starts by passing a 32-byte header (op, sequence number, size, root or
 * type) to the next rank, so ranks that disagree on what comes next fail
 * with both operations named instead of exchanging garbage. */
#define _POSIX_C_SOURCE 200809L
#include "tcp_comm_internal.h"

#include "esmtrain/comm_ring.h"
#include "esmtrain/comm_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_ALLREDUCE = 1, OP_BROADCAST, OP_ALLGATHER, OP_BARRIER, OP_REDUCE_SCATTER,
       OP_ALLGATHER_SHARDS, OP_COUNT };
static const char *const k_op_names[] = {"?",       "allreduce",      "broadcast",
                                         "allgather", "barrier",      "reduce_scatter",
                                         "allgather_shards"};

#define BCAST_CHUNK ((size_t)1 << 20)

static esmt_status op_begin(esmt_tcp_comm *c, int op, size_t bytes, int64_t extra) {
  if (c->dead) return comm_dead_error(c);
  c->op = k_op_names[op];
  c->seq++;
  c->op_bytes = bytes;
  c->op_state = 1;
  if (c->world == 1) return ESMT_OK;
  unsigned char mine[32], theirs[32];
  comm_put_u64(mine, COMM_MAGIC);
  comm_put_u64(mine + 8, ((uint64_t)op << 32) | (uint32_t)extra);
  comm_put_u64(mine + 16, c->seq);
  comm_put_u64(mine + 24, bytes);
  c->in_header = 1;
  esmt_status st = comm_xfer(c, mine, 32, theirs, 32, 0);
  c->in_header = 0;
  if (st != ESMT_OK) return st;
  if (memcmp(mine, theirs, 32) != 0) {
    int prev = (c->rank + c->world - 1) % c->world;
    uint64_t kind = comm_get_u64(theirs + 8);
    int pop = (int)(kind >> 32);
    char why[400];
    snprintf(why, sizeof why,
             "collective mismatch: rank %d called %s #%llu (%zu bytes, arg %lld) but rank %d "
             "called %s #%llu (%llu bytes, arg %lld); every rank must call the same "
             "collectives in the same order",
             c->rank, k_op_names[op], (unsigned long long)c->seq, bytes, (long long)extra, prev,
             pop >= 1 && pop < OP_COUNT ? k_op_names[pop] : "(garbage)",
             (unsigned long long)comm_get_u64(theirs + 16), (unsigned long long)comm_get_u64(theirs + 24),
             (long long)(int32_t)(uint32_t)kind);
    return comm_kill(c, c->rank, why, 1, -1);
  }
  return ESMT_OK;
}

static esmt_status op_end(esmt_tcp_comm *c, esmt_status st) {
  c->op_state = st == ESMT_OK ? 2 : 3;
  return st;
}

/* The ring's W segments: ring segment j is block (j - shift) mod W of the
 * buffer, the blocks given by `off` (W+1 element offsets) or balanced when
 * off is NULL. After the reduce-scatter half rank r holds the finished sum
 * of ring segment r+1: shift 0 (allreduce) leaves it there for the
 * all-gather half; shift 1 (ZeRO shards) makes it block r. */
typedef struct ring_segs {
  const uint64_t *off;
  size_t count, es;
  int W, shift;
} ring_segs;

static void ring_seg(const ring_segs *g, int j, size_t *o, size_t *n) {
  int k = ((j - g->shift) % g->W + g->W) % g->W;
  size_t a, b;
  esmt_comm_block(g->off, g->count, g->W, k, &a, &b);
  *o = a * g->es;
  *n = (b - a) * g->es;
}

/* Segment j starts at rank j and is summed in ring order j, j+1, ..., j-1:
 * a fixed order for a given W and segmentation. */
static esmt_status ring_reduce_scatter(esmt_tcp_comm *c, unsigned char *b, const ring_segs *g,
                                       esmt_comm_dtype dtype) {
  esmt_status st = ESMT_OK;
  int W = c->world, r = c->rank;
  for (int s = 0; st == ESMT_OK && s < W - 1; s++) {
    size_t so, sn, ro, rn;
    ring_seg(g, r - s, &so, &sn);
    ring_seg(g, r - s - 1, &ro, &rn);
    st = comm_xfer(c, b + so, sn, b + ro, rn, dtype);
  }
  return st;
}

/* Rank r starts with the finished ring segment r+1 and passes finished
 * segments on: copies, so every rank ends with the same bits. */
static esmt_status ring_all_gather(esmt_tcp_comm *c, unsigned char *b, const ring_segs *g) {
  esmt_status st = ESMT_OK;
  int W = c->world, r = c->rank;
  for (int s = 0; st == ESMT_OK && s < W - 1; s++) {
    size_t so, sn, ro, rn;
    ring_seg(g, r + 1 - s, &so, &sn);
    ring_seg(g, r - s, &ro, &rn);
    st = comm_xfer(c, b + so, sn, b + ro, rn, 0);
  }
  return st;
}

esmt_status esmt_tcp_comm_allreduce_sum(esmt_tcp_comm *c, void *buf, size_t count, esmt_comm_dtype dtype) {
  const size_t es = esmt_comm_dtype_size(dtype);
  esmt_status st = op_begin(c, OP_ALLREDUCE, count * es, dtype);
  if (st != ESMT_OK || c->world == 1) return op_end(c, st);
  ring_segs g = {NULL, count, es, c->world, 0};
  st = ring_reduce_scatter(c, buf, &g, dtype);
  if (st == ESMT_OK) st = ring_all_gather(c, buf, &g);
  return op_end(c, st);
}

esmt_status esmt_tcp_comm_reduce_scatter_sum(esmt_tcp_comm *c, void *buf, size_t count,
                                         const uint64_t *off, esmt_comm_dtype dtype) {
  const size_t es = esmt_comm_dtype_size(dtype);
  esmt_status st = op_begin(c, OP_REDUCE_SCATTER, count * es, dtype);
  if (st != ESMT_OK || c->world == 1) return op_end(c, st);
  ring_segs g = {off, count, es, c->world, 1};
  return op_end(c, ring_reduce_scatter(c, buf, &g, dtype));
}

esmt_status esmt_tcp_comm_allgather_shards(esmt_tcp_comm *c, void *buf, size_t count,
                                       const uint64_t *off, size_t elem_size) {
  esmt_status st = op_begin(c, OP_ALLGATHER_SHARDS, count * elem_size, (int64_t)elem_size);
  if (st != ESMT_OK || c->world == 1) return op_end(c, st);
  ring_segs g = {off, count, elem_size, c->world, 1};
  return op_end(c, ring_all_gather(c, buf, &g));
}

esmt_status esmt_tcp_comm_broadcast(esmt_tcp_comm *c, void *buf, size_t nbytes, int root) {
  esmt_status st = op_begin(c, OP_BROADCAST, nbytes, root);
  if (st != ESMT_OK || c->world == 1) return op_end(c, st);
  /* Pipelined along the ring from the root: receive chunk i while
   * forwarding chunk i-1. The rank before the root only receives. */
  unsigned char *b = buf;
  int d = (c->rank - root + c->world) % c->world;
  int forwards = d != c->world - 1, receives = d != 0;
  size_t nchunks = (nbytes + BCAST_CHUNK - 1) / BCAST_CHUNK;
  for (size_t i = 0; st == ESMT_OK && i <= nchunks; i++) {
    size_t so = (i - 1) * BCAST_CHUNK, ro = i * BCAST_CHUNK;
    size_t sn = (i >= 1 && forwards) ? (nbytes - so < BCAST_CHUNK ? nbytes - so : BCAST_CHUNK) : 0;
    size_t rn = (i < nchunks && receives) ? (nbytes - ro < BCAST_CHUNK ? nbytes - ro : BCAST_CHUNK)
                                          : 0;
    if (!receives && i < nchunks) { /* the root sends everything at once */
      st = comm_xfer(c, b, nbytes, NULL, 0, 0);
      break;
    }
    st = comm_xfer(c, sn ? b + so : NULL, sn, rn ? b + ro : NULL, rn, 0);
  }
  return op_end(c, st);
}

esmt_status esmt_tcp_comm_allgather(esmt_tcp_comm *c, const void *send, size_t nbytes, void *recv) {
  esmt_status st = op_begin(c, OP_ALLGATHER, nbytes, 0);
  if (st != ESMT_OK) return op_end(c, st);
  unsigned char *out = recv;
  int W = c->world, r = c->rank;
  if (nbytes) memmove(out + (size_t)r * nbytes, send, nbytes);
  for (int s = 0; st == ESMT_OK && s < W - 1; s++) {
    int sj = (r - s + W) % W, rj = (r - s - 1 + W) % W;
    st = comm_xfer(c, out + (size_t)sj * nbytes, nbytes, out + (size_t)rj * nbytes, nbytes, 0);
  }
  return op_end(c, st);
}

esmt_status esmt_tcp_comm_barrier(esmt_tcp_comm *c) {
  esmt_status st = op_begin(c, OP_BARRIER, 0, 0);
  /* W-1 rounds of one byte: after them every rank has (transitively)
   * heard from every other, so all have entered the barrier. */
  unsigned char tx = 1, rx = 0;
  for (int s = 0; st == ESMT_OK && s < c->world - 1; s++) st = comm_xfer(c, &tx, 1, &rx, 1, 0);
  return op_end(c, st);
}

esmt_status esmt_tcp_comm_abort(esmt_tcp_comm *c, const char *reason) {
  if (c->dead) return ESMT_OK; /* peers already know */
  char why[COMM_MSG_MAX];
  snprintf(why, sizeof why, "%s", reason && *reason ? reason : "aborted (no reason given)");
  const char *saved = c->op;
  int64_t saved_state = c->op_state;
  comm_kill(c, c->rank, why, 1, -1);
  /* The local message says this rank aborted, without an op prefix. */
  snprintf(c->dead_msg, sizeof c->dead_msg, "this rank aborted the communicator: %s", why);
  c->op = saved;
  c->op_state = (int)saved_state;
  esmt_clear_error();
  return ESMT_OK;
}

void esmt_tcp_comm_set_step(esmt_tcp_comm *c, int64_t step) {
  if (c) c->step = step;
}

void esmt_tcp_comm_describe_last(const esmt_tcp_comm *c, char *buf, size_t cap) {
  if (!c) esmt_comm_describe_op(buf, cap, NULL, 0, -1, 0, 0);
  else esmt_comm_describe_op(buf, cap, c->op, c->seq, c->step, c->op_bytes, c->op_state);
}
