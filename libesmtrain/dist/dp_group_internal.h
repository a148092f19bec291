/* SPDX-License-Identifier: MIT */
/* The data-parallel group's state, shared by dp_group.c (host path: a
 * worker thread sums host gradients over TCP) and dp_device.c (device
 * path: the backend's allreduce, NCCL for nccl_dp). */
#ifndef ESMTRAIN_DP_GROUP_INTERNAL_H
#define ESMTRAIN_DP_GROUP_INTERNAL_H

#include <pthread.h>

#include "esmtrain/backend.h"
#include "dp_group.h"

struct esmt_dp {
  esmt_comm *comm;
  uint64_t bucket_elems;
  double timeout_s;          /* handed to the backend's communicator */
  /* the update's gradient sum, run by a worker thread */
  pthread_t worker;
  int worker_running;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  float *grads;
  uint64_t total, nbuckets;
  uint64_t ready;            /* buckets (from the top) whose gradients are final */
  uint64_t done;             /* buckets reduced (device path: queued) */
  esmt_status error;
  char error_text[1024];
  /* ZeRO-1 (dp_zero.c): rank r owns [shard_off[r], shard_off[r+1]) of the
   * flat buffer; the worker reduce-scatters each bucket onto the owners */
  int zero;
  uint64_t *shard_off;       /* world + 1 offsets, set by esmt_dp_zero_start */
  uint64_t *bucket_off;      /* scratch: the shards clipped to one bucket */
  size_t *dev_off;           /* the same for the backend's reduce_scatter/allgather */
  /* ZeRO-2 with gradient slots (memory/grad_shard.h): the model's memory
   * reduces each part as backward finishes it, through dp_zero.c's
   * reducer; no bucket is reduced here then */
  esmt_model *sharded_m;
  /* ZeRO-2 with a sharded fp32 master: where the split cuts the model's
   * LayerNorm weights (memory's norm_dev), world + 1 offsets; NULL else */
  uint64_t *norm_off;
  /* stats */
  uint64_t bytes;
  double busy_s;
  esmt_zero_volume vol;      /* per collective, for esmt_dp_volume */
  /* device path, set up by esmt_dp_device_setup */
  int on_device;
  esmt_model *m;             /* the model whose device holds the communicator */
  esmtb_stream *comm_stream; /* the all-reduces run here, overlapping backward */
  esmtb_event *ready_event;  /* recorded on m->stream at each grads_ready point */
  char peer_text[1024];      /* why a peer failed, for the backend's waits */
};

/* Bucket k covers [total - (k+1) B, total - k B), clipped at 0: the top of
 * the buffer first, in the order backward finishes it. */
static inline void esmt_dp_bucket_range(const esmt_dp *dp, uint64_t k, uint64_t *lo,
                                        uint64_t *hi) {
  *hi = dp->total - k * dp->bucket_elems;
  *lo = *hi > dp->bucket_elems ? *hi - dp->bucket_elems : 0;
}

/* The ranks' shards clipped to the flat range [lo, hi), as offsets from lo
 * into bucket_off and dev_off (each where allocated): the cuts of a
 * reduce-scatter or all-gather of that range. */
static inline void esmt_dp_clip_shards(esmt_dp *dp, int world, uint64_t lo, uint64_t hi) {
  for (int j = 0; j <= world; j++) {
    const uint64_t o = dp->shard_off[j] < lo ? lo : dp->shard_off[j] > hi ? hi : dp->shard_off[j];
    if (dp->bucket_off) dp->bucket_off[j] = o - lo;
    if (dp->dev_off) dp->dev_off[j] = (size_t)(o - lo);
  }
}

/* A gradient bucket of `bytes` was reduced (all-reduced, or
 * reduce-scattered under ZeRO). */
static inline void esmt_dp_count_bucket(esmt_dp *dp, uint64_t bytes) {
  dp->bytes += bytes;
  if (dp->zero && dp->shard_off) dp->vol.reduce_scattered += bytes;
  else dp->vol.allreduced += bytes;
}

/* dp_device.c */
ESMT_HIDDEN esmt_status esmt_dp_device_setup(esmt_dp *dp, esmt_model *m);
ESMT_HIDDEN void esmt_dp_device_arm(esmt_dp *dp, esmt_model *m);
ESMT_HIDDEN esmt_status esmt_dp_device_finish(esmt_dp *dp, esmt_model *m);
ESMT_HIDDEN void esmt_dp_device_abort(esmt_dp *dp);
ESMT_HIDDEN void esmt_dp_device_release(esmt_dp *dp);
/* ZeRO-1: every rank's shard of the device buffer `buf` (layout order, n
 * fp32) into everyone's, through the backend's allgather; waits for it. */
ESMT_HIDDEN esmt_status esmt_dp_device_allgather(esmt_dp *dp, esmt_model *m, float *buf,
                                                 uint64_t n);
/* The same for a buffer of n elements of `dtype` cut at off[0..world]
 * (ZeRO-2's half copy and LayerNorm weights under a sharded master). */
ESMT_HIDDEN esmt_status esmt_dp_device_allgather_as(esmt_dp *dp, esmt_model *m, void *buf,
                                                    esmtb_dtype dtype, uint64_t n,
                                                    const uint64_t *off);

#endif
