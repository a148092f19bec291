/* SPDX-License-Identifier: MIT */
/* Data parallelism in the core: the same rank, bucket and normalisation
 * logic whatever carries the bytes: the host TCP communicator for
 * host-memory backends (cpu), or the backend's own allreduce on device
 * memory (nccl_dp: NCCL) when it has ESMTB_CAP_MULTI_DEVICE and the ABI
 * 1.2 comm ops (dp_device.c). The small sums always go over TCP, which
 * also carries the backend's communicator id at setup.
 *
 * Per update: every rank takes its own micro-batches (the loader shards
 * batches by rank), the selected-token counts are summed first so that
 * every rank normalises its loss by the GLOBAL count of the update, and
 * the gradients are summed in buckets while backward still runs: backward
 * reports each time a suffix of the flat gradient buffer is final (after
 * the LM head, after each layer from the top) and a worker thread
 * all-reduces every complete bucket at once. After the sum every rank
 * holds identical gradients, so the norm, clipping, skip decisions and
 * AdamW agree bit for bit without further traffic. With ZeRO (stage 1 or
 * 2) the buckets are reduce-scattered instead and each rank updates its
 * shard; stage 2 reduces every micro-batch's backward (dp_zero.c, below). */
#ifndef ESMTRAIN_DP_GROUP_H
#define ESMTRAIN_DP_GROUP_H

#include "esmtrain/backend.h"
#include "model.h"
#include "comm.h"
#include "param_shard.h"

typedef struct esmt_dp esmt_dp;

/* A group over an existing communicator (owned by the group from then on).
 * bucket_bytes: gradient bytes per all-reduce (0 = 25 MiB). */
ESMT_HIDDEN esmt_status esmt_dp_create(esmt_comm *comm, uint64_t bucket_bytes, esmt_dp **out);
/* From the launcher's environment; *out is NULL for a single process
 * unless `force` or $ESMTRAIN_FORCE_DP (not "0") asks for a group of one
 * (world size 1 through the real collectives, e.g. to measure nccl_dp's
 * overhead). `comm` picks the host transport (comm.h: auto = MPI under an
 * MPI launcher when its plugin loads, else TCP; $ESMTRAIN_COMM overrides). */
ESMT_HIDDEN esmt_status esmt_dp_create_from_env(uint64_t bucket_bytes, int force,
                                                esmt_comm_kind comm, esmt_dp **out);
/* The host communicator (for logs: esmt_comm_describe). */
ESMT_HIDDEN const esmt_comm *esmt_dp_comm(const esmt_dp *dp);
/* Destroy the group before the model it was started with (it releases a
 * stream and an event of that model's device). */
ESMT_HIDDEN void esmt_dp_destroy(esmt_dp *dp);

/* The backend communicator's timeout (default 300 s; from the environment
 * ESMTRAIN_COMM_TIMEOUT): a device all-reduce without progress this long
 * fails. Call before esmt_dp_check_start. */
ESMT_HIDDEN void esmt_dp_set_timeout(esmt_dp *dp, double seconds);
/* 1 when the gradients are summed by the backend on the device. */
ESMT_HIDDEN int esmt_dp_on_device(const esmt_dp *dp);

ESMT_HIDDEN int esmt_dp_rank(const esmt_dp *dp);   /* 0 for NULL */
ESMT_HIDDEN int esmt_dp_world(const esmt_dp *dp);  /* 1 for NULL */

/* In-place sums of small host arrays (counts, losses, flags). */
ESMT_HIDDEN esmt_status esmt_dp_sum_u64(esmt_dp *dp, uint64_t *v, int n);
ESMT_HIDDEN esmt_status esmt_dp_sum_f64(esmt_dp *dp, double *v, int n);

/* Start-up check: a test all-reduce, and the same parameters on every
 * rank (their fp32 checksums summed and compared), with a message naming
 * what differs. With a device communicator (see above) this also sets it
 * up: rank 0's id is broadcast, every rank calls comm_init, and a test
 * all-reduce runs through the backend. */
ESMT_HIDDEN esmt_status esmt_dp_check_start(esmt_dp *dp, esmt_model *m);

/* Gradient sum of the update's last backward: arm before it (installs the
 * model's grads_ready hook), finish after it (reduces what is left, waits
 * for the worker or the device all-reduces, removes the hook). Without a
 * device communicator the gradients must be host addressable (cpu). */
ESMT_HIDDEN esmt_status esmt_dp_grads_arm(esmt_dp *dp, esmt_model *m);
ESMT_HIDDEN esmt_status esmt_dp_grads_finish(esmt_dp *dp, esmt_model *m);

/* After a failure on this rank between arm and finish: stop the worker
 * (it completes the bucket in flight) or abort the device communicator,
 * and remove the hook. Then abort. */
ESMT_HIDDEN void esmt_dp_grads_cancel(esmt_dp *dp, esmt_model *m);

/* Tag messages with the update number. */
ESMT_HIDDEN void esmt_dp_set_step(esmt_dp *dp, int64_t step);

/* This rank is failing: tell the others (their next collective fails with
 * "rank K failed: <reason>"); a device communicator is aborted first. */
ESMT_HIDDEN void esmt_dp_abort(esmt_dp *dp, const char *reason);

/* Bytes all-reduced and seconds spent (host path: the worker's busy time;
 * device path: the wait for the all-reduces after backward), for metrics. */
ESMT_HIDDEN void esmt_dp_stats(const esmt_dp *dp, uint64_t *bytes, double *busy_s);

/* ZeRO (dp_zero.c): stage 1 shards the optimizer state over the ranks;
 * stage 2 also keeps only the shard's gradients between micro-batches
 * (each backward is reduce-scattered, the rest cleared). The stage-1 notes
 * below hold for both. */
#define ESMT_ZERO_MAX_LEVEL 3
/* Mutation switch for the checkers' tests (tests/gpu/emu/mutants.sh via
 * test_gpu_nccl_dp --mutant): 1 lets ZeRO-3's all-gather into a weight
 * slot start without waiting for the compute stream (the rank's piece, the
 * slot's previous reads). Never set otherwise. */
ESMT_HIDDEN extern int esmt_test_zero3_drop_ready_wait;
/* The split itself: esmt_zero_split (memory/param_shard.h). */
/* Ask for ZeRO stage `level` (0..ESMT_ZERO_MAX_LEVEL; before esmt_dp_zero_start). */
ESMT_HIDDEN void esmt_dp_set_zero(esmt_dp *dp, int level);
/* After esmt_dp_check_start: shard the model's moments (the current
 * values of the shard are kept) and log the bytes per rank. Refuses
 * optimizer offload and the device path with a message. No-op unless
 * asked for. */
ESMT_HIDDEN esmt_status esmt_dp_zero_start(esmt_dp *dp, esmt_model *m);
/* The ZeRO stage running (started): 0, 1 or 2. */
ESMT_HIDDEN int esmt_dp_zero(const esmt_dp *dp);
/* 1 when every micro-batch's backward is reduced (ZeRO-2): arm and finish
 * around each one, then esmt_dp_zero_keep_shard before the next. */
ESMT_HIDDEN int esmt_dp_zero_each_backward(const esmt_dp *dp);
/* ZeRO-2, after a micro-batch's gradients were reduce-scattered: clear the
 * other shards' partial sums so that the next backward accumulates onto
 * this shard's running sum only. No-op below stage 2. */
ESMT_HIDDEN esmt_status esmt_dp_zero_keep_shard(esmt_dp *dp, esmt_model *m);
/* The traffic a stage implies: esmt_zero_comm_volume (memory/param_shard.h). */
/* What this group moved so far, in the same terms (parameter traffic
 * only; the few bytes of counts and norms are not counted). */
ESMT_HIDDEN void esmt_dp_volume(const esmt_dp *dp, esmt_zero_volume *v);
/* This rank's shard [lo, hi); the whole [0, total) without ZeRO-1. */
ESMT_HIDDEN void esmt_dp_shard(const esmt_dp *dp, uint64_t total, uint64_t *lo, uint64_t *hi);
/* The global gradient norm: shard sums of squares summed over the ranks
 * (after the reduce-scatter only the shard holds final gradients). */
ESMT_HIDDEN esmt_status esmt_dp_zero_grad_norm(esmt_dp *dp, esmt_model *m, double *norm);
/* After AdamW updated the shard: every rank's shard to everyone (fp32
 * weights, then the half-precision copy of the other shards; under
 * ZeRO-2's sharded master the half copy and the fp32 LayerNorm weights
 * only, the fp32 master staying a shard). */
ESMT_HIDDEN esmt_status esmt_dp_zero_gather_params(esmt_dp *dp, esmt_model *m);
/* For a checkpoint in the usual format, which rank 0 writes: the whole
 * fp32 master (layout.total floats) into rank 0's host_w, where each rank
 * holds its shard (esmt_param_master_sharded), and the whole moments into
 * rank 0's host_m/host_v (NULL host_v: Lion). Every other rank sends its
 * shard and needs only esmt_dp_zero_save_elems floats in each buffer (a
 * shard, not the whole), whose content is then undefined. Collective. */
ESMT_HIDDEN uint64_t esmt_dp_zero_save_elems(const esmt_dp *dp, uint64_t total);
ESMT_HIDDEN esmt_status esmt_dp_zero_gather_master(esmt_dp *dp, esmt_model *m, float *host_w);
ESMT_HIDDEN esmt_status esmt_dp_zero_gather_moments(esmt_dp *dp, esmt_model *m, float *host_m,
                                                    float *host_v);

#endif
