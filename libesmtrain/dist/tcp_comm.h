/* SPDX-License-Identifier: MIT */
/* The TCP ring communicator: rendezvous through rank 0 (or a shared file),
 * a ring between the ranks for data, the rendezvous sockets kept as a
 * control channel, blocking collectives with timeouts and failure
 * propagation (docs/distributed.md). No MPI, no CUDA. The rest of the core
 * reaches it through comm.h, which also checks every call's arguments
 * before it gets here; the semantics of each operation are described
 * there. */
#ifndef ESMTRAIN_TCP_COMM_H
#define ESMTRAIN_TCP_COMM_H

#include "comm.h"

typedef struct esmt_tcp_comm esmt_tcp_comm;

/* Rendezvous with the other ranks; blocks until all arrive or timeout_s. */
ESMT_HIDDEN esmt_status esmt_tcp_comm_create(esmt_tcp_comm **out, const esmt_comm_options *opt);
/* Closes the connections (telling peers this is a clean exit) and frees. */
ESMT_HIDDEN void esmt_tcp_comm_destroy(esmt_tcp_comm *c);

ESMT_HIDDEN int esmt_tcp_comm_rank(const esmt_tcp_comm *c);
ESMT_HIDDEN int esmt_tcp_comm_world_size(const esmt_tcp_comm *c);

ESMT_HIDDEN esmt_status esmt_tcp_comm_allreduce_sum(esmt_tcp_comm *c, void *buf, size_t count,
                                                    esmt_comm_dtype dtype);
ESMT_HIDDEN esmt_status esmt_tcp_comm_reduce_scatter_sum(esmt_tcp_comm *c, void *buf,
                                                         size_t count, const uint64_t *off,
                                                         esmt_comm_dtype dtype);
ESMT_HIDDEN esmt_status esmt_tcp_comm_allgather_shards(esmt_tcp_comm *c, void *buf, size_t count,
                                                       const uint64_t *off, size_t elem_size);
ESMT_HIDDEN esmt_status esmt_tcp_comm_broadcast(esmt_tcp_comm *c, void *buf, size_t nbytes,
                                                int root);
ESMT_HIDDEN esmt_status esmt_tcp_comm_allgather(esmt_tcp_comm *c, const void *send,
                                                size_t nbytes, void *recv);
ESMT_HIDDEN esmt_status esmt_tcp_comm_barrier(esmt_tcp_comm *c);
ESMT_HIDDEN esmt_status esmt_tcp_comm_abort(esmt_tcp_comm *c, const char *reason);
ESMT_HIDDEN esmt_status esmt_tcp_comm_check_peers(esmt_tcp_comm *c);
ESMT_HIDDEN void esmt_tcp_comm_set_step(esmt_tcp_comm *c, int64_t step);
ESMT_HIDDEN void esmt_tcp_comm_describe_last(const esmt_tcp_comm *c, char *buf, size_t cap);

#endif
