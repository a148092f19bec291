/* SPDX-License-Identifier: MIT */
/* The host communicator of data-parallel training, whatever carries the
 * bytes: the TCP ring in the core (tcp_comm*.c) or MPI through a plugin
 * loaded at run time (comm_plugin.h, comm_mpi_loader.c), chosen by
 * esmt_comm_create_from_env. The core links no MPI. Also carries the NCCL
 * unique id (a 128-byte broadcast).
 *
 * Every collective must be called by all ranks in the same order with the
 * same sizes (checked: a mismatch is an error naming both operations).
 * One thread at a time per communicator (calls are not synchronised).
 * After any failure the communicator is dead: later calls return the same
 * error; destroy it. Errors read like
 *   "allreduce #37 (step 12): rank 2 failed: out of memory".
 * Sums are the same bits on every rank, from run to run and over either
 * transport: each element is summed in the fixed rank order of comm_ring.h. */
#ifndef ESMTRAIN_COMM_H
#define ESMTRAIN_COMM_H

#include "dist_env.h"

#include <stddef.h>
#include <stdint.h>

typedef struct esmt_comm esmt_comm;

/* The TCP ring's setup (esmt_comm_create). */
typedef struct esmt_comm_options {
  int rank, world_size;
  const char *master_addr;     /* rank 0's host; may be NULL with a rendezvous file */
  int master_port;             /* rank 0 listens here; 0 only with a rendezvous file */
  const char *rendezvous_file; /* NULL/"" = none; else rank 0 publishes host:port there */
  uint64_t job_token;          /* must match on all ranks */
  double timeout_s;            /* setup, and each collective's longest wait without progress */
} esmt_comm_options;

typedef enum esmt_comm_dtype {
  ESMT_COMM_F32 = 1,
  ESMT_COMM_F64 = 2,
  ESMT_COMM_I64 = 3, /* wraps around on overflow */
} esmt_comm_dtype;

static inline size_t esmt_comm_dtype_size(esmt_comm_dtype d) { return d == ESMT_COMM_F32 ? 4 : 8; }

/* Which transport esmt_comm_create_from_env uses. */
typedef enum esmt_comm_kind {
  ESMT_COMM_AUTO = 0, /* MPI when an MPI launcher started the process and the plugin loads */
  ESMT_COMM_TCP = 1,
  ESMT_COMM_MPI = 2,
} esmt_comm_kind;

/* A TCP ring: rendezvous with the other ranks; blocks until all arrive or
 * timeout_s. */
ESMT_HIDDEN esmt_status esmt_comm_create(esmt_comm **out, const esmt_comm_options *opt);
/* An MPI communicator over MPI_COMM_WORLD through the plugin (`plugin`:
 * its path, NULL = $ESMTRAIN_COMM_PLUGIN or the default locations). */
ESMT_HIDDEN esmt_status esmt_comm_create_mpi(esmt_comm **out, const char *plugin,
                                             double timeout_s);
/* From a detected environment (esmt_dist_env_detect) and `kind`, which
 * $ESMTRAIN_COMM (auto, tcp, mpi) overrides. AUTO takes MPI when the
 * environment says an MPI launcher started this process (env->mpi_launched)
 * and the plugin loads, else TCP (a plugin that fails to load under an MPI
 * launcher is logged, not fatal, in AUTO; fatal when MPI was asked for). */
ESMT_HIDDEN esmt_status esmt_comm_create_from_env(esmt_comm **out, const esmt_dist_env *env,
                                                  esmt_comm_kind kind);
/* Closes the connections (telling peers this is a clean exit) and frees. */
ESMT_HIDDEN void esmt_comm_destroy(esmt_comm *c);

ESMT_HIDDEN int esmt_comm_rank(const esmt_comm *c);
ESMT_HIDDEN int esmt_comm_world_size(const esmt_comm *c);
/* "tcp" or "mpi", and one line for logs: "TCP ring" or "MPI (Open MPI v4.1.4)". */
ESMT_HIDDEN const char *esmt_comm_kind_name(const esmt_comm *c);
ESMT_HIDDEN void esmt_comm_describe(const esmt_comm *c, char *buf, size_t cap);

/* In-place elementwise sum over all ranks. The result is bitwise the same on
 * every rank and, for one world size and count, from run to run (each
 * element is summed in a fixed rank order, comm_ring.h). */
ESMT_HIDDEN esmt_status esmt_comm_allreduce_sum(esmt_comm *c, void *buf, size_t count,
                                                esmt_comm_dtype dtype);
/* The two halves of allreduce_sum over uneven shards (ZeRO): `off` holds
 * world_size + 1 element offsets, off[0] = 0, off[W] = count, rank r owning
 * [off[r], off[r+1]). reduce_scatter_sum leaves the sum of rank r's shard
 * there (bitwise the same from run to run; the rest of buf is scratch);
 * allgather_shards copies every rank's shard into everyone's buf. Each rank
 * sends count - its shard elements per call. */
ESMT_HIDDEN esmt_status esmt_comm_reduce_scatter_sum(esmt_comm *c, void *buf, size_t count,
                                                     const uint64_t *off, esmt_comm_dtype dtype);
ESMT_HIDDEN esmt_status esmt_comm_allgather_shards(esmt_comm *c, void *buf, size_t count,
                                                   const uint64_t *off, size_t elem_size);
/* Root's nbytes at buf are copied into every rank's buf. */
ESMT_HIDDEN esmt_status esmt_comm_broadcast(esmt_comm *c, void *buf, size_t nbytes, int root);
/* recv (world_size * nbytes) receives every rank's nbytes, in rank order. */
ESMT_HIDDEN esmt_status esmt_comm_allgather(esmt_comm *c, const void *send, size_t nbytes,
                                            void *recv);
ESMT_HIDDEN esmt_status esmt_comm_barrier(esmt_comm *c);

/* Tell every peer this rank is failing: their current or next collective
 * fails with "rank K failed: <reason>". The communicator is dead afterwards. */
ESMT_HIDDEN esmt_status esmt_comm_abort(esmt_comm *c, const char *reason);

/* Without blocking: has a peer failed or vanished (an abort notice, or its
 * control connection closed without a goodbye)? Then the communicator is
 * dead and this returns that error ("rank K failed: ..."); else ESMT_OK.
 * For waits outside the communicator (a device all-reduce) that should end
 * as soon as a peer does. */
ESMT_HIDDEN esmt_status esmt_comm_check_peers(esmt_comm *c);

/* Tag following operations with a training step for messages (-1: none). */
ESMT_HIDDEN void esmt_comm_set_step(esmt_comm *c, int64_t step);
/* "allreduce #37 (step 12), 4000000 bytes, done|failed|in progress" or
 * "no operation yet". */
ESMT_HIDDEN void esmt_comm_describe_last(const esmt_comm *c, char *buf, size_t cap);

/* Test-only fault injection, for either transport. The collectives in the
 * order they are counted; each communicator counts its calls of each kind
 * from 1. */
typedef enum esmt_comm_op {
  ESMT_COMM_OP_ALLREDUCE,
  ESMT_COMM_OP_REDUCE_SCATTER,
  ESMT_COMM_OP_ALLGATHER_SHARDS,
  ESMT_COMM_OP_BROADCAST,
  ESMT_COMM_OP_ALLGATHER,
  ESMT_COMM_OP_BARRIER,
  ESMT_COMM_OP_COUNT
} esmt_comm_op;
/* When set (by a test, never by the library), called at the start of
 * every collective once its arguments are checked and before any byte
 * moves: `nth` is this communicator's count of calls of kind `op`. A test
 * kills its rank there to show what the other ranks do when a peer dies
 * inside a collective. */
typedef void (*esmt_comm_fault_fn)(const esmt_comm *c, esmt_comm_op op, uint64_t nth);
ESMT_HIDDEN extern esmt_comm_fault_fn esmt_comm_test_fault;

#endif
