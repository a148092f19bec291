/* SPDX-License-Identifier: MIT */
/* The table a communication plugin hands the core: how the data-parallel
 * collectives reach a transport that libesmtrain does not link (MPI: the
 * plugin <libdir>/esmtrain-MAJOR.MINOR/comm/mpi_comm.so links libmpi, the core only
 * dlopen()s it). comm.c loads the plugin, checks the table and dispatches
 * the esmt_comm_* calls of comm.h to it; the argument checks are done
 * there, once for every transport, before a call reaches the table.
 *
 * Contract, the same as the TCP communicator's (comm.h):
 *  - every rank calls the same collectives in the same order and sizes;
 *  - one thread at a time per communicator;
 *  - sums are bitwise the same on every rank and from run to run, and equal
 *    the TCP ring's: block j of a collective (its W blocks as comm.h's
 *    ring segmentation gives them, esmt_comm_ring_block) is summed in the
 *    rank order (j + shift) mod W, +1, ..., so ((x_a + x_b) + x_c) ...;
 *  - no call waits longer than timeout_s without progress; a peer's abort
 *    (its reason) ends the current or next call with "rank K failed: ...";
 *  - after any failure the communicator is dead: later calls fail the same.
 * Every function but create returns an esmt_status value and, on failure,
 * leaves one line in the buffer that last_error returns, already prefixed
 * with the operation ("allreduce #37 (step 12): rank 2 failed: ..."). */
#ifndef ESMTRAIN_COMM_PLUGIN_H
#define ESMTRAIN_COMM_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#define ESMT_COMM_PLUGIN_ABI 1
/* extern "C" const esmt_comm_plugin *esmt_comm_plugin_get(void); */
#define ESMT_COMM_PLUGIN_SYMBOL "esmt_comm_plugin_get"

/* dtype values: ESMT_COMM_F32 = 1, ESMT_COMM_F64 = 2, ESMT_COMM_I64 = 3
 * (comm.h; an int here so the plugin needs no core header). */

typedef struct esmt_comm_plugin {
  uint32_t abi_version; /* ESMT_COMM_PLUGIN_ABI */
  uint32_t struct_size; /* sizeof(esmt_comm_plugin) when built */
  const char *name;     /* "mpi" */
  /* One line naming the implementation at run time, e.g. "Open MPI v4.1.4". */
  const char *(*describe)(void);
  /* Starts the transport if this process has not (MPI_Init_thread), joins
   * all ranks. On failure returns NULL and writes the reason into err. */
  void *(*create)(double timeout_s, char *err, size_t cap);
  /* Frees; finalises the transport when create started it. */
  void (*destroy)(void *s);
  int (*rank)(const void *s);
  int (*world_size)(const void *s);
  /* The operations of comm.h, arguments already checked by the core. */
  int (*allreduce_sum)(void *s, void *buf, size_t count, int dtype);
  int (*reduce_scatter_sum)(void *s, void *buf, size_t count, const uint64_t *off, int dtype);
  int (*allgather_shards)(void *s, void *buf, size_t count, const uint64_t *off,
                          size_t elem_size);
  int (*broadcast)(void *s, void *buf, size_t nbytes, int root);
  int (*allgather)(void *s, const void *send, size_t nbytes, void *recv);
  int (*barrier)(void *s);
  int (*abort)(void *s, const char *reason);
  int (*check_peers)(void *s);
  void (*set_step)(void *s, int64_t step);
  void (*describe_last)(const void *s, char *buf, size_t cap);
  const char *(*last_error)(const void *s);
} esmt_comm_plugin;

#endif
