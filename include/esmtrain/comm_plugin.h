/* SPDX-License-Identifier: MIT */
/* esmtrain communication plugin ABI: the table a communication plugin
 * hands the core, how the data-parallel collectives of the host reach a
 * transport that libesmtrain does not link (MPI: the plugin
 * <libdir>/esmtrain-MAJOR.MINOR/comm/mpi_comm.so links libmpi, the core
 * only dlopen()s it). The core loads the plugin, refuses a table whose
 * abi_version differs from its own or whose struct_size is smaller than it
 * needs (docs/ABI.md), and dispatches its collectives to it; the argument
 * checks are done in the core, once for every transport, before a call
 * reaches the table. A plugin needs only the installed headers: this one,
 * esmtrain/comm_ring.h (the summation order) and esmtrain/comm_text.h (the
 * wording of its errors).
 *
 * Contract, the same as the TCP communicator's (comm.h):
 *  - every rank calls the same collectives in the same order and sizes;
 *  - one thread at a time per communicator;
 *  - sums are bitwise the same on every rank and from run to run, and equal
 *    the TCP ring's: block j of a collective (its W blocks as
 *    esmt_comm_block in comm_ring.h gives them) is summed in the rank
 *    order (j + shift) mod W, +1, ..., so ((x_a + x_b) + x_c) ...;
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

#ifdef __cplusplus
extern "C" {
#endif

#define ESMT_COMM_PLUGIN_ABI 1
/* extern "C" const esmt_comm_plugin *esmt_comm_plugin_get(void); */
#define ESMT_COMM_PLUGIN_SYMBOL "esmt_comm_plugin_get"

/* dtype values: 1 = f32, 2 = f64, 3 = i64 (the core's ESMT_COMM_F32,
 * _F64, _I64). */

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

#ifdef __cplusplus
}
#endif

#endif
