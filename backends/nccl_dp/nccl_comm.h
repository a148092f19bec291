/* SPDX-License-Identifier: MIT */
/* nccl_dp's communicator ops (nccl_comm.c): ABI 1.2 comm_unique_id and
 * comm_init, allreduce, the ABI 1.3 reduce_scatter/allgather, and the stream/event waits and close() that watch
 * the communicator so that a dead peer ends in an error, not a hang. */
#ifndef ESMTRAIN_NCCL_COMM_H
#define ESMTRAIN_NCCL_COMM_H

#include "cuda_common.h"

/* Replace the entries of `ops` (already filled by cuda_common) that the
 * communicator changes: comm_unique_id/init/abort, allreduce, reduce_scatter, allgather,
 * stream_sync, event_sync, close.
 * The previous close/stream_sync/event_sync are kept and called through. */
CUDA_HIDDEN void nccl_fill_comm_ops(esmtb_ops *ops);

#endif
