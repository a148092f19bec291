/* SPDX-License-Identifier: MIT */
/* The collectives, from MPI_Isend/MPI_Irecv on the data communicator, with
 * the TCP ring's sums bit for bit (comm_ring.h):
 *
 *  - reduce-scatter: the buffer is cut into W blocks; every rank sends its
 *    copy of block k straight to block k's owner, which sums the W copies in
 *    the ring's order - first esmt_comm_block_first(W, k, shift), then the
 *    next ranks, its own value last - with the ring's operand order
 *    (x_next + acc) and its add loop (esmt_comm_reduce_into);
 *  - all-gather: every owner sends its finished block to every other rank,
 *    received straight into their buffers.
 * allreduce_sum is both with shift 0 and balanced blocks; the ZeRO halves use
 * shift 1 and the caller's offsets (rank r owns block r).
 *
 * Messages are pieces of at most piece_max (16 MiB) bytes: MPI counts are
 * int, and progress is seen per piece. A collective runs in rounds, round i
 * moving piece i of every block, two rounds in flight (the next round's
 * transfers overlap this round's sums); the receive scratch is two rounds'
 * worth, at most 2 x 32 MiB whatever the buffer (a ZeRO gather may be GiBs).
 *
 * Each operation first exchanges a header (op, number, bytes, argument,
 * shard offsets) with every rank, so ranks that disagree on what comes next
 * fail naming both operations instead of exchanging the wrong bytes. */
#define _POSIX_C_SOURCE 200809L
#include "mpi_comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/comm_ring.h"

#define MC_MAGIC 0x45534d5431504d31ull /* "ESMT1PM1": header version 1 */
#define BCAST_PIECE ((size_t)1 << 20)  /* the broadcast pipeline's grain */

enum { OP_ALLREDUCE = 1, OP_BROADCAST, OP_ALLGATHER, OP_BARRIER, OP_REDUCE_SCATTER,
       OP_ALLGATHER_SHARDS, OP_COUNT };
static const char *const k_op_names[] = {"?",       "allreduce", "broadcast",
                                         "allgather", "barrier", "reduce_scatter",
                                         "allgather_shards"};

static const char *op_name(uint64_t op) { return op >= 1 && op < OP_COUNT ? k_op_names[op] : "?"; }

/* ---- the operation header ------------------------------------------------------ */

static uint64_t shards_hash(const uint64_t *off, int world) {
  if (!off) return 0;
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the offsets */
  for (int k = 0; k <= world; k++)
    for (int b = 0; b < 8; b++) h = (h ^ ((off[k] >> (8 * b)) & 0xff)) * 1099511628211ull;
  return h | 1;
}

/* A peer's header arrived: it must equal this rank's. */
static int check_header(mpi_comm *c, const mc_batch *b, int i, void *ctx) {
  (void)ctx;
  if (!b->is_recv[i]) return MC_OK;
  int q = b->peer[i];
  const mc_hdr *m = &c->hdrs[c->rank], *t = &c->hdrs[q];
  if (memcmp(m, t, sizeof *m) == 0) return MC_OK;
  char why[700];
  if (t->magic != MC_MAGIC)
    snprintf(why, sizeof why,
             "collective mismatch: rank %d called %s #%llu but rank %d sent an unreadable "
             "operation header (another program or plugin version?)",
             c->rank, op_name(m->op), (unsigned long long)m->seq, q);
  else if (m->op != t->op || m->seq != t->seq || m->bytes != t->bytes || m->extra != t->extra)
    snprintf(why, sizeof why,
             "collective mismatch: rank %d called %s #%llu (%llu bytes, arg %lld) but rank %d "
             "called %s #%llu (%llu bytes, arg %lld); every rank must call the same "
             "collectives in the same order",
             c->rank, op_name(m->op), (unsigned long long)m->seq, (unsigned long long)m->bytes,
             (long long)m->extra, q, op_name(t->op), (unsigned long long)t->seq,
             (unsigned long long)t->bytes, (long long)t->extra);
  else if (m->shards != t->shards)
    snprintf(why, sizeof why,
             "collective mismatch: ranks %d and %d called %s #%llu (%llu bytes) with different "
             "shard offsets; every rank must pass the same offsets",
             c->rank, q, op_name(m->op), (unsigned long long)m->seq, (unsigned long long)m->bytes);
  else
    snprintf(why, sizeof why,
             "ranks %d and %d cut messages differently (%llu and %llu bytes): set "
             "ESMTRAIN_MPI_PIECE_BYTES alike on every rank",
             c->rank, q, (unsigned long long)m->piece, (unsigned long long)t->piece);
  return mc_kill(c, MC_ERR_IO, c->rank, why, 1);
}

static int op_begin(mpi_comm *c, int op, size_t bytes, int64_t extra, uint64_t shards) {
  if (c->dead) return c->dead_status;
  c->op = k_op_names[op];
  c->seq++;
  c->op_bytes = bytes;
  c->op_state = 1;
  if (c->world == 1) return MC_OK;
  if (mc_poll_abort(c)) return c->dead_status; /* a peer's abort ends the next call */
  mc_hdr *m = &c->hdrs[c->rank];
  *m = (mc_hdr){MC_MAGIC, (uint64_t)op, c->seq, bytes, extra, shards, c->piece_max};
  mc_batch *b = &c->batch[0];
  mc_batch_reset(b);
  int st = MC_OK;
  for (int q = 0; st == MC_OK && q < c->world; q++)
    if (q != c->rank) st = mc_post(c, b, 1, &c->hdrs[q], sizeof *m, q, MC_TAG_HDR);
  for (int q = 0; st == MC_OK && q < c->world; q++)
    if (q != c->rank) st = mc_post(c, b, 0, m, sizeof *m, q, MC_TAG_HDR);
  /* Every rank hears from every other: after this all have entered. */
  c->in_header = 1;
  if (st == MC_OK) st = mc_wait(c, b, check_header, NULL);
  c->in_header = 0;
  return st;
}

static int op_end(mpi_comm *c, int st) {
  c->op_state = st == MC_OK ? 2 : 3;
  return st;
}

/* ---- blocks, pieces, rounds ------------------------------------------------------- */

typedef struct layout {
  const uint64_t *off; /* W + 1 element offsets, or NULL: balanced over count */
  size_t count, es;    /* elements and bytes per element */
  size_t stride;       /* else, when nonzero: block k is [k, k+1) * stride bytes */
  int shift;           /* rank r owns block r + 1 - shift */
} layout;

typedef struct run {
  layout L;
  unsigned char *buf;
  int dtype;
  int own;     /* the block this rank owns */
  size_t pb;   /* bytes per piece */
  size_t slot; /* scratch bytes per peer and round */
} run;

static void block_bytes(const mpi_comm *c, const layout *L, int k, size_t *lo, size_t *len) {
  if (L->stride) {
    *lo = (size_t)k * L->stride;
    *len = L->stride;
    return;
  }
  size_t a, b;
  esmt_comm_block(L->off, L->count, c->world, k, &a, &b);
  *lo = a * L->es;
  *len = (b - a) * L->es;
}

static int block_of_owner(int world, int shift, int owner) {
  return ((owner - shift + 1) % world + world) % world;
}

/* Piece s of block k: [*at, *at + return value) in bytes; 0 past its end. */
static size_t piece(const mpi_comm *c, const run *R, int k, size_t s, size_t *at) {
  size_t lo, len;
  block_bytes(c, &R->L, k, &lo, &len);
  size_t o = s * R->pb;
  *at = lo + o;
  return o < len ? (len - o < R->pb ? len - o : R->pb) : 0;
}

/* Scratch slot of peer q (rank + j holds slot j - 1) in round s's half. */
static unsigned char *slot_of(const mpi_comm *c, const run *R, size_t s, int q) {
  int j = (q - c->rank + c->world) % c->world;
  return c->scratch + ((s & 1) * (size_t)(c->world - 1) + (size_t)(j - 1)) * R->slot;
}

/* Sets up R: piece size, rounds, the own block, the scratch for `stages`
 * rounds at once (0 for none). */
static int plan(mpi_comm *c, run *R, size_t *rounds, int stages) {
  int W = c->world;
  size_t pb = MC_SCRATCH_SET / (size_t)(W - 1);
  if (pb > c->piece_max) pb = c->piece_max;
  pb &= ~(size_t)7; /* whole elements of every dtype */
  R->pb = pb ? pb : 8;
  R->own = block_of_owner(W, R->L.shift, c->rank);
  size_t most = 0, lo, own_len = 0;
  for (int k = 0; k < W; k++) {
    size_t len;
    block_bytes(c, &R->L, k, &lo, &len);
    if (len > most) most = len;
    if (k == R->own) own_len = len;
  }
  *rounds = (most + R->pb - 1) / R->pb;
  R->slot = ((own_len < R->pb ? own_len : R->pb) + 7) & ~(size_t)7; /* 8-aligned slots */
  if (*rounds < 2 && stages > 1) stages = 1;
  size_t need = (size_t)stages * (size_t)(W - 1) * R->slot;
  if (need > c->scratch_cap) {
    free(c->scratch);
    c->scratch = malloc(need);
    c->scratch_cap = c->scratch ? need : 0;
    if (!c->scratch) {
      char why[160];
      snprintf(why, sizeof why, "out of memory for %zu bytes of receive buffers", need);
      return mc_kill(c, MC_ERR_OUT_OF_MEMORY, c->rank, why, 1);
    }
  }
  return MC_OK;
}

/* Round s of the reduce-scatter: this rank's copies of the other blocks to
 * their owners; the other ranks' copies of its own block into scratch. */
static int rs_post(mpi_comm *c, mc_batch *b, size_t s, void *ctx) {
  run *R = ctx;
  int W = c->world, st = MC_OK;
  size_t at, n = piece(c, R, R->own, s, &at);
  for (int j = 1; st == MC_OK && n && j < W; j++) {
    int q = (c->rank + j) % W;
    st = mc_post(c, b, 1, slot_of(c, R, s, q), n, q, MC_TAG_DATA);
  }
  for (int j = 1; st == MC_OK && j < W; j++) {
    int q = (c->rank + j) % W;
    size_t qn = piece(c, R, block_of_owner(W, R->L.shift, q), s, &at);
    if (qn) st = mc_post(c, b, 0, R->buf + at, qn, q, MC_TAG_DATA);
  }
  return st;
}

/* Sum round s's piece of the own block in the ring's order: acc = x_first,
 * acc = x_next + acc, ..., own + acc last (this rank is the block's owner,
 * the last in the order). */
static int rs_finish(mpi_comm *c, mc_batch *b, size_t s, void *ctx) {
  (void)b;
  run *R = ctx;
  int W = c->world;
  size_t at, n = piece(c, R, R->own, s, &at);
  if (!n) return MC_OK;
  size_t cnt = n / R->L.es;
  int first = esmt_comm_block_first(W, R->own, R->L.shift);
  unsigned char *acc = slot_of(c, R, s, first);
  for (int j = 1; j < W - 1; j++) {
    unsigned char *x = slot_of(c, R, s, (first + j) % W);
    esmt_comm_reduce_into(x, acc, cnt, R->dtype);
    acc = x;
  }
  esmt_comm_reduce_into(R->buf + at, acc, cnt, R->dtype);
  return MC_OK;
}

/* Round s of the all-gather: the own block's piece to every rank, the
 * others' pieces straight into buf. */
static int ag_post(mpi_comm *c, mc_batch *b, size_t s, void *ctx) {
  run *R = ctx;
  int W = c->world, st = MC_OK;
  size_t at;
  for (int j = 1; st == MC_OK && j < W; j++) {
    int q = (c->rank + j) % W;
    size_t qn = piece(c, R, block_of_owner(W, R->L.shift, q), s, &at);
    if (qn) st = mc_post(c, b, 1, R->buf + at, qn, q, MC_TAG_DATA);
  }
  size_t n = piece(c, R, R->own, s, &at);
  for (int j = 1; st == MC_OK && n && j < W; j++)
    st = mc_post(c, b, 0, R->buf + at, n, (c->rank + j) % W, MC_TAG_DATA);
  return st;
}

static int reduce_scatter(mpi_comm *c, void *buf, const layout *L, int dtype) {
  run R = {*L, buf, dtype, 0, 0, 0};
  size_t rounds = 0;
  int st = plan(c, &R, &rounds, 2);
  return st != MC_OK ? st : mc_run_steps(c, rounds, 2, rs_post, rs_finish, &R);
}

static int all_gather(mpi_comm *c, void *buf, const layout *L) {
  run R = {*L, buf, 0, 0, 0, 0};
  size_t rounds = 0;
  int st = plan(c, &R, &rounds, 0);
  return st != MC_OK ? st : mc_run_steps(c, rounds, 2, ag_post, NULL, &R);
}

/* ---- the table's operations ------------------------------------------------------ */

static size_t dtype_size(int dtype) { return dtype == MC_F32 ? 4 : 8; }

int mc_allreduce_sum(void *s, void *buf, size_t count, int dtype) {
  mpi_comm *c = s;
  size_t es = dtype_size(dtype);
  int st = op_begin(c, OP_ALLREDUCE, count * es, dtype, 0);
  if (st != MC_OK || c->world == 1) return op_end(c, st);
  layout L = {NULL, count, es, 0, 0};
  st = reduce_scatter(c, buf, &L, dtype);
  if (st == MC_OK) st = all_gather(c, buf, &L);
  return op_end(c, st);
}

int mc_reduce_scatter_sum(void *s, void *buf, size_t count, const uint64_t *off, int dtype) {
  mpi_comm *c = s;
  size_t es = dtype_size(dtype);
  int st = op_begin(c, OP_REDUCE_SCATTER, count * es, dtype, shards_hash(off, c->world));
  if (st != MC_OK || c->world == 1) return op_end(c, st);
  layout L = {off, count, es, 0, 1};
  return op_end(c, reduce_scatter(c, buf, &L, dtype));
}

int mc_allgather_shards(void *s, void *buf, size_t count, const uint64_t *off, size_t elem_size) {
  mpi_comm *c = s;
  int st = op_begin(c, OP_ALLGATHER_SHARDS, count * elem_size, (int64_t)elem_size,
                    shards_hash(off, c->world));
  if (st != MC_OK || c->world == 1) return op_end(c, st);
  layout L = {off, count, elem_size, 0, 1};
  return op_end(c, all_gather(c, buf, &L));
}

/* Broadcast: a pipeline along the ring from the root (bandwidth-optimal
 * for any W): step i receives piece i from the previous rank while
 * forwarding piece i - 1 to the next; the rank before the root only
 * receives, the root only sends. */
typedef struct bcast {
  unsigned char *buf;
  size_t nbytes, pb;
  int prev, next, receives, forwards;
} bcast;

static int bc_post(mpi_comm *c, mc_batch *b, size_t s, void *ctx) {
  bcast *B = ctx;
  int st = MC_OK;
  size_t o = s * B->pb;
  if (B->receives && o < B->nbytes)
    st = mc_post(c, b, 1, B->buf + o, B->nbytes - o < B->pb ? B->nbytes - o : B->pb, B->prev,
                 MC_TAG_DATA);
  if (st == MC_OK && B->forwards && s >= 1) {
    o -= B->pb;
    st = mc_post(c, b, 0, B->buf + o, B->nbytes - o < B->pb ? B->nbytes - o : B->pb, B->next,
                 MC_TAG_DATA);
  }
  return st;
}

int mc_broadcast(void *s, void *buf, size_t nbytes, int root) {
  mpi_comm *c = s;
  int st = op_begin(c, OP_BROADCAST, nbytes, root, 0);
  if (st != MC_OK || c->world == 1 || nbytes == 0) return op_end(c, st);
  int W = c->world, d = (c->rank - root + W) % W;
  bcast B = {buf, nbytes, BCAST_PIECE < c->piece_max ? BCAST_PIECE : c->piece_max,
             (c->rank + W - 1) % W, (c->rank + 1) % W, d != 0, d != W - 1};
  size_t pieces = (nbytes + B.pb - 1) / B.pb;
  /* Depth 1: step i forwards what step i - 1 received. */
  return op_end(c, mc_run_steps(c, pieces + 1, 1, bc_post, NULL, &B));
}

int mc_allgather(void *s, const void *send, size_t nbytes, void *recv) {
  mpi_comm *c = s;
  int st = op_begin(c, OP_ALLGATHER, nbytes, 0, 0);
  if (st != MC_OK) return op_end(c, st);
  unsigned char *out = recv;
  if (nbytes) memmove(out + (size_t)c->rank * nbytes, send, nbytes); /* send may be that slot */
  if (c->world == 1 || nbytes == 0) return op_end(c, st);
  layout L = {NULL, 0, 1, nbytes, 1}; /* rank k's bytes are block k */
  return op_end(c, all_gather(c, recv, &L));
}

int mc_barrier(void *s) {
  /* The header exchange is the barrier: every rank has heard from every
   * other before it returns. */
  mpi_comm *c = s;
  return op_end(c, op_begin(c, OP_BARRIER, 0, 0, 0));
}
