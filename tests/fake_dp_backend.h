/* SPDX-License-Identifier: MIT */
/* A test-only multi-device backend: the cpu backend's groups as an
 * ESMTB_CAP_MULTI_DEVICE backend whose memory is NOT host addressable (so
 * the core takes its device path), with comm_unique_id / comm_init /
 * comm_release / allreduce / reduce_scatter / allgather (its "comm" group)
 * implemented by a host TCP communicator of its own
 * (the "unique id" is a rendezvous file name, as NCCL's carries the root's
 * address). Every communicator, event and all-reduce call is logged so a
 * test can check ordering, bucket boundaries and dtypes. */
#ifndef FAKE_DP_BACKEND_H
#define FAKE_DP_BACKEND_H

#include "esmtrain/backend.h"
#include "ops_table.h"

enum { FAKE_ID = 1, FAKE_INIT, FAKE_RECORD, FAKE_WAIT, FAKE_ALLREDUCE, FAKE_ABORT /* release(abort) */,
       FAKE_REDUCE_SCATTER, FAKE_ALLGATHER };

typedef struct fake_call {
  int kind;
  const void *stream;        /* RECORD/WAIT/ALLREDUCE */
  const void *event;         /* RECORD/WAIT */
  int dtype;                 /* ALLREDUCE, REDUCE_SCATTER, ALLGATHER */
  int64_t lo, hi;            /* the element range in the watched gradients, or -1 and n */
  int rank, world;           /* INIT */
} fake_call;

/* The table (static storage; one per process). `dir` holds the rendezvous
 * files of the fake communicator. */
const esmtb_ops *fake_dp_ops(const esmtb_ops *cpu, const char *dir);

/* Express all-reduce buffers as offsets into this fp32 gradient buffer. */
void fake_dp_watch(const float *grads, uint64_t total);

/* Calls of the core's peer_failed from waits on the comm stream. */
int fake_dp_peer_checks(void);

/* The log so far. */
const fake_call *fake_dp_calls(int *n);

/* NULL when the log shows: rank 0 alone made the id, before every rank's
 * single comm_init (with this rank/world); a one-float F32 test all-reduce
 * first; then `steps` updates whose all-reduces each follow an event
 * recorded on the model stream (NULL) and waited for by the comm stream,
 * run on that comm stream, are F32 and cover the gradients top-down in
 * buckets of `bucket` elements. Else the first problem. *groups receives
 * the RECORD/WAIT points of the first update (> 1: overlap). */
const char *fake_dp_check(int rank, int world, uint64_t total, uint64_t bucket, int steps,
                          int *groups);

/* For the checks that follow: 1 = ZeRO-1 (the buckets are reduce-scattered
 * and each update ends with one F32 allgather of `total` weights on the comm
 * stream); 2 = ZeRO-2 (each part's slot reduce-scattered on the comm stream
 * after a RECORD/WAIT from the model stream, the parts covering `total`
 * once per backward, the model stream waiting for the comm stream before
 * the update, then the allgather). */
void fake_dp_expect_zero(int on);

#endif
