/* SPDX-License-Identifier: MIT */
/* The MPI communicator plugin's shared state (see comm_plugin.h for the
 * contract it implements). Five files, one job each:
 *   mpi_comm_runtime.c  the process's MPI: start it, the thread level, the
 *                       library's name, and finalising it at exit;
 *   mpi_comm.c          a communicator: create/destroy, the plugin table;
 *   mpi_comm_abort.c    failures: the abort channel, the dead state, its
 *                       message, releasing what is outstanding;
 *   mpi_comm_wait.c     posting point-to-point requests, waiting on them
 *                       (abort notices, timeouts), steps of a pipeline;
 *   mpi_comm_coll.c     the collectives, in comm_ring.h's summation order.
 *
 * Why point-to-point rather than MPI_Allreduce & co: the sums must be the
 * TCP ring's bits (comm_ring.h), and MPI's reduction order is the
 * implementation's; and every wait must be bounded by timeout_s and end at a
 * peer's abort, which blocking collectives cannot do.
 *
 * Two communicators, both duplicates of MPI_COMM_WORLD: `data` carries the
 * operation headers (tag MC_TAG_HDR) and the payload (MC_TAG_DATA); `ctl`
 * carries nothing but abort notices, so the standing ANY_SOURCE receive
 * there can never swallow a data message. */
#ifndef ESMT_MPI_COMM_INTERNAL_H
#define ESMT_MPI_COMM_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "esmtrain/comm_plugin.h"

#define MC_HIDDEN __attribute__((visibility("hidden")))

/* esmt_status values (include/esmtrain/esmtrain.h, append-only): the plugin
 * is built without the core's headers. */
enum {
  MC_OK = 0,
  MC_ERR_OUT_OF_MEMORY = 2,
  MC_ERR_IO = 3,
  MC_ERR_INTERNAL = 13,
};

/* comm.h's dtypes (f32, then f64 and i64 of 8 bytes). */
enum { MC_F32 = 1, MC_F64 = 2, MC_I64 = 3 };

enum { MC_TAG_HDR = 1, MC_TAG_DATA = 2, MC_TAG_ABORT = 3 };

#define MC_MSG_MAX 900                    /* an abort reason on the wire, bytes */
#define MC_PIECE_MAX ((size_t)16 << 20)   /* one message: an int count, progress per piece */
#define MC_SCRATCH_SET ((size_t)32 << 20) /* receive scratch per pipeline stage (two stages) */

/* Requests posted for one pipeline step, with who each one talks to. */
typedef struct mc_batch {
  MPI_Request *req;
  int *peer;
  unsigned char *is_recv;
  int n, cap;
} mc_batch;

/* The operation header every rank exchanges before a collective. */
typedef struct mc_hdr {
  uint64_t magic, op, seq, bytes;
  int64_t extra;   /* dtype, root or element size */
  uint64_t shards; /* hash of the shard offsets, 0 without */
  uint64_t piece;  /* bytes per message: the ranks must cut alike */
} mc_hdr;

typedef struct mpi_comm {
  MPI_Comm data, ctl;
  int rank, world;
  double timeout_s;
  size_t piece_max; /* bytes per message: MC_PIECE_MAX, or less ($ESMTRAIN_MPI_PIECE_BYTES) */
  /* The standing receive for abort notices on ctl. */
  MPI_Request abort_req;
  char abort_in[MC_MSG_MAX + 1];
  /* Two batches: a step's requests and the next step's. */
  mc_batch batch[2];
  int *indices;          /* MPI_Testsome's outputs, batch cap entries */
  MPI_Status *statuses;
  unsigned char *scratch; /* receive-and-reduce buffers, grown on demand */
  size_t scratch_cap;
  mc_hdr *hdrs; /* [world]: hdrs[rank] is this rank's, sent from there */
  /* The current / last operation. */
  const char *op;
  uint64_t seq;
  size_t op_bytes;
  int op_state; /* 0 none, 1 in progress, 2 done, 3 failed */
  int in_header;
  int64_t step;
  /* After a failure every call returns this. */
  int dead, dead_status;
  char dead_msg[1024];
  /* Requests were abandoned (MPI_Request_free) because they did not finish
   * after a failure: MPI may still use scratch, hdrs or abort_in, so destroy
   * leaks them (and this struct) instead of freeing. */
  int leaked;
} mpi_comm;

/* ---- mpi_comm_runtime.c: the process's MPI ---- */
/* MPI_Init_thread (SERIALIZED) unless the application did; checks the
 * thread level and that MPI was not finalised. 0, or 1 with err set. */
MC_HIDDEN int mc_runtime_start(char *err, size_t cap);
/* A communicator failed in a way that may leave a peer hung or requests
 * pending (a timeout, abandoned requests): the exit-time finalise first
 * checks that every rank got there (see mpi_comm_runtime.c). */
MC_HIDDEN void mc_runtime_note_hazard(double timeout_s);
/* MPI_Error_string of code, or "MPI error <code>". */
MC_HIDDEN void mc_error_string(int code, char *buf, size_t cap);
/* "Open MPI v4.1.4": the library version's first line, up to its first comma. */
MC_HIDDEN const char *mc_describe(void);
MC_HIDDEN double mc_now(void);
MC_HIDDEN void mc_nap(long ns);

/* ---- mpi_comm_abort.c: failures ---- */
/* Mark the communicator dead. origin == own rank: reason is this rank's
 * failure; else "rank <origin> failed: <reason>"; prefixed with the current
 * operation. forward: send reason to every peer's abort receive. Releases
 * the outstanding requests. Returns the status every later call returns. */
MC_HIDDEN int mc_kill(mpi_comm *c, int status, int origin, const char *reason, int forward);
/* An MPI call failed: kill with "<what> failed: <MPI's error string>". */
MC_HIDDEN int mc_kill_mpi(mpi_comm *c, const char *what, int code);
/* Test the abort receive without blocking: 1 when the communicator is now
 * dead (a peer's abort, or the test failed). */
MC_HIDDEN int mc_poll_abort(mpi_comm *c);
/* After a failure: cancel the receives, give the requests a moment to
 * finish, abandon the rest (c->leaked). */
MC_HIDDEN void mc_release(mpi_comm *c);

/* ---- mpi_comm_wait.c: requests ---- */
MC_HIDDEN void mc_batch_reset(mc_batch *b);
/* MPI_Isend/MPI_Irecv of bytes (<= MC_PIECE_MAX) on the data comm into b. */
MC_HIDDEN int mc_post(mpi_comm *c, mc_batch *b, int is_recv, void *buf, size_t bytes, int peer,
                      int tag);
/* Called for each request of the batch that completes (index into b). */
typedef int (*mc_done_fn)(mpi_comm *c, const mc_batch *b, int i, void *ctx);
/* Waits until every request of b completed; fails (dead communicator) on a
 * peer's abort, an MPI error, or timeout_s without any completion. */
MC_HIDDEN int mc_wait(mpi_comm *c, mc_batch *b, mc_done_fn done, void *ctx);
/* A pipeline of nsteps steps, depth (1 or 2) of them posted at once: post
 * step s into a batch, wait for it, finish it (may be NULL), post s+depth. */
typedef int (*mc_step_fn)(mpi_comm *c, mc_batch *b, size_t s, void *ctx);
MC_HIDDEN int mc_run_steps(mpi_comm *c, size_t nsteps, int depth, mc_step_fn post,
                           mc_step_fn finish, void *ctx);

/* ---- mpi_comm_coll.c: the table's collectives ---- */
MC_HIDDEN int mc_allreduce_sum(void *s, void *buf, size_t count, int dtype);
MC_HIDDEN int mc_reduce_scatter_sum(void *s, void *buf, size_t count, const uint64_t *off,
                                    int dtype);
MC_HIDDEN int mc_allgather_shards(void *s, void *buf, size_t count, const uint64_t *off,
                                  size_t elem_size);
MC_HIDDEN int mc_broadcast(void *s, void *buf, size_t nbytes, int root);
MC_HIDDEN int mc_allgather(void *s, const void *send, size_t nbytes, void *recv);
MC_HIDDEN int mc_barrier(void *s);

#endif
