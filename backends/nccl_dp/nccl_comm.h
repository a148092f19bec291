/* SPDX-License-Identifier: MIT */
/* nccl_dp's communicator ops (nccl_comm.c): its "comm" group
 * (comm_unique_id, comm_init, comm_release, allreduce, reduce_scatter,
 * allgather), and the stream/event waits and close() that watch
 * the communicator so that a dead peer ends in an error, not a hang. */
#ifndef ESMTRAIN_NCCL_COMM_H
#define ESMTRAIN_NCCL_COMM_H

#include "cuda_common.h"

/* Fill t's comm group and replace the device ops (already filled by
 * cuda_common) that the communicator changes: stream_sync, event_sync,
 * close. The previous ones are kept and called through. */
CUDA_HIDDEN void nccl_fill_comm_ops(cuda_tables *t);

#endif
