/* SPDX-License-Identifier: MIT */
/* The device path of data parallelism: a MULTI_DEVICE backend with the ABI
 * 1.2 comm ops (nccl_dp) sums the gradients on the device.
 *
 * Setup: rank 0 asks the backend for a communicator id, the TCP
 * communicator broadcasts it, every rank joins with comm_init; a test
 * all-reduce of one float checks the data path (world size 1 too).
 *
 * Gradients: the all-reduces run on a dedicated stream. At each
 * grads_ready point an event recorded on the model's stream orders the
 * newly complete buckets after backward's writes; backward meanwhile goes
 * on queuing the lower layers on its own stream, so the sums overlap the
 * compute without the host waiting (the host path has to wait there: it
 * reads the gradients). The model's stream would serialise them behind
 * backward instead. At the end the host waits for the comm stream through
 * the backend's stream_sync, which for nccl_dp watches the communicator
 * (a dead peer fails after the timeout instead of hanging); only then may
 * the model's stream read the summed gradients. The small sums (counts,
 * losses, flags) stay on TCP. With ZeRO-1 (dp_zero.c) the buckets go
 * through the backend's ABI 1.3 reduce_scatter instead, and the updated
 * weights through its allgather (esmt_dp_device_allgather). */
#include <stdio.h>
#include <string.h>

#include "ops_table.h"
#include "dp_group_internal.h"
#include "registry.h"

static esmt_status agree(esmt_dp *dp, esmtb_status mine, const char *what) {
  char own[1024] = "";
  if (mine) snprintf(own, sizeof own, "%s", esmt_last_error());
  uint64_t failed = mine != 0;
  esmt_status st = esmt_dp_sum_u64(dp, &failed, 1);
  if (st) return esmt_fail_prefix(st, "data parallel: %s: ", what);
  if (mine) return esmt_fail((esmt_status)mine, "data parallel: %s: %s", what, own);
  if (failed)
    return esmt_fail(ESMT_ERR_BACKEND, "data parallel: %s failed on %llu other rank(s)", what,
                     (unsigned long long)failed);
  return ESMT_OK;
}

/* Rank 0's id to every rank; a failure on rank 0 reaches all of them. */
static esmt_status share_id(esmt_dp *dp, esmt_model *m, unsigned char *id, uint64_t *len) {
  esmtb_status bs = 0;
  char own[1024] = "";
  *len = 0;
  if (esmt_dp_rank(dp) == 0) {
    size_t n = 0;
    bs = m->ops->comm_unique_id(m->dev, id, ESMTB_COMM_ID_MAX, &n);
    if (bs) snprintf(own, sizeof own, "%s", esmt_last_error());
    else if (n == 0 || n > ESMTB_COMM_ID_MAX) bs = ESMT_ERR_BACKEND;
    else *len = n;
  }
  esmt_status st = esmt_comm_broadcast(dp->comm, len, sizeof *len, 0);
  if (!st && *len) st = esmt_comm_broadcast(dp->comm, id, (size_t)*len, 0);
  if (st) return esmt_fail_prefix(st, "data parallel: sharing the %s communicator id: ",
                                  m->ops->name);
  if (*len) return ESMT_OK;
  if (bs && own[0])
    return esmt_fail((esmt_status)bs, "data parallel: %s comm_unique_id: %s", m->ops->name, own);
  return esmt_fail(ESMT_ERR_BACKEND, "data parallel: rank 0 could not create the %s "
                   "communicator id", m->ops->name);
}

/* One float through the backend's all-reduce: every rank sends 1. */
static esmt_status test_allreduce(esmt_dp *dp, esmt_model *m) {
  const esmtb_ops *o = m->ops;
  void *buf = NULL;
  float one = 1.0f, got = 0;
  esmtb_status bs = o->alloc(m->dev, ESMTB_MEM_DEVICE, 256, &buf);
  if (!bs) bs = o->copy_async(m->dev, buf, &one, sizeof one, ESMTB_COPY_H2D, dp->comm_stream);
  esmtb_allreduce_args a = {sizeof a, ESMTB_F32, 1, buf};
  if (!bs) bs = o->allreduce(m->dev, &a, dp->comm_stream);
  if (!bs) bs = o->stream_sync(m->dev, dp->comm_stream); /* watched before a blocking copy */
  if (!bs) bs = o->copy_async(m->dev, &got, buf, sizeof got, ESMTB_COPY_D2H, dp->comm_stream);
  if (!bs) bs = o->stream_sync(m->dev, dp->comm_stream);
  if (buf) o->free(m->dev, ESMTB_MEM_DEVICE, buf);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "data parallel: %s test all-reduce: ", o->name);
  if (got != (float)esmt_dp_world(dp))
    return esmt_fail(ESMT_ERR_INTERNAL, "data parallel: %s test all-reduce gave %g, not %d",
                     o->name, (double)got, esmt_dp_world(dp));
  return ESMT_OK;
}

/* The backend asks, while it waits on NCCL, whether a peer is known to
 * have failed: the TCP control channel hears of a dead or aborting rank at
 * once, while NCCL on one node may wait for the timeout. Runs on the thread
 * that waits (the training thread, the only user of dp->comm here). */
static const char *peer_failed(void *user) {
  esmt_dp *dp = user;
  if (esmt_comm_check_peers(dp->comm) == ESMT_OK) return NULL;
  snprintf(dp->peer_text, sizeof dp->peer_text, "%s", esmt_last_error());
  return dp->peer_text;
}

esmt_status esmt_dp_device_setup(esmt_dp *dp, esmt_model *m) {
  if (dp->on_device) {
    if (dp->m == m) return ESMT_OK;
    return esmt_fail(ESMT_ERR_STATE, "data parallel: the group already serves another model");
  }
  unsigned char id[ESMTB_COMM_ID_MAX];
  uint64_t len = 0;
  esmt_status st = share_id(dp, m, id, &len);
  if (st) return st;
  /* peer_failed's user (dp) dies first; only comm_release can stop the calls */
  const int can_release = ESMTB_OPS_HAS(m->ops, comm_release);
  esmtb_comm_init_args a = {sizeof a, esmt_dp_rank(dp), esmt_dp_world(dp), id, (size_t)len,
                            dp->timeout_s, can_release ? peer_failed : NULL, dp};
  esmtb_status bs = m->ops->comm_init(m->dev, &a);
  if ((st = agree(dp, bs, "joining the device communicator"))) return st;
  dp->on_device = 1; /* from here on, destroy releases and abort aborts */
  dp->m = m;
  bs = m->ops->stream_create(m->dev, &dp->comm_stream);
  if (!bs) bs = m->ops->event_create(m->dev, &dp->ready_event);
  if ((st = agree(dp, bs, "creating the all-reduce stream"))) return st;
  return test_allreduce(dp, m);
}

/* grads_ready hook: queue the all-reduce of every newly complete bucket on
 * the comm stream, after what m->stream has queued so far. */
static void on_ready(void *user, uint64_t from) {
  esmt_dp *dp = user;
  esmt_model *m = dp->m;
  const uint64_t first = dp->ready;
  while (dp->ready < dp->nbuckets) {
    uint64_t lo, hi;
    esmt_dp_bucket_range(dp, dp->ready, &lo, &hi);
    if (lo < from) break;
    dp->ready++;
  }
  if (dp->ready == first || dp->error) return;
  esmtb_status bs = m->ops->event_record(m->dev, dp->ready_event, m->stream);
  if (!bs) bs = m->ops->stream_wait_event(m->dev, dp->comm_stream, dp->ready_event);
  uint64_t k = first;
  for (; !bs && k < dp->ready; k++) {
    uint64_t lo, hi;
    esmt_dp_bucket_range(dp, k, &lo, &hi);
    if (esmt_dp_zero(dp)) { /* ZeRO-1: each owner gets the sum of its part of the bucket */
      const int W = esmt_dp_world(dp);
      esmt_dp_clip_shards(dp, W, lo, hi);
      esmtb_shard_args a = {sizeof a, ESMTB_F32, (size_t)(hi - lo), dp->grads + lo, W,
                            dp->dev_off};
      bs = m->ops->reduce_scatter(m->dev, &a, dp->comm_stream);
    } else {
      esmtb_allreduce_args a = {sizeof a, ESMTB_F32, (size_t)(hi - lo), dp->grads + lo};
      bs = m->ops->allreduce(m->dev, &a, dp->comm_stream);
    }
    if (!bs) {
      esmt_dp_count_bucket(dp, (hi - lo) * sizeof(float));
      dp->done++;
    }
  }
  if (bs) {
    dp->error = (esmt_status)bs;
    snprintf(dp->error_text, sizeof dp->error_text,
             "data parallel: all-reduce of gradient bucket %llu of %llu: %s",
             (unsigned long long)k, (unsigned long long)dp->nbuckets, esmt_last_error());
  }
}

esmt_status esmt_dp_device_allgather(esmt_dp *dp, esmt_model *m, float *buf, uint64_t n) {
  return esmt_dp_device_allgather_as(dp, m, buf, ESMTB_F32, n, dp->shard_off);
}

esmt_status esmt_dp_device_allgather_as(esmt_dp *dp, esmt_model *m, void *buf, esmtb_dtype dtype,
                                        uint64_t n, const uint64_t *off) {
  const int W = esmt_dp_world(dp);
  for (int j = 0; j <= W; j++) dp->dev_off[j] = (size_t)off[j];
  esmtb_shard_args a = {sizeof a, dtype, (size_t)n, buf, W, dp->dev_off};
  /* the buffer's writers (AdamW) ran on m->stream: order after them */
  esmtb_status bs = m->ops->event_record(m->dev, dp->ready_event, m->stream);
  if (!bs) bs = m->ops->stream_wait_event(m->dev, dp->comm_stream, dp->ready_event);
  if (!bs) bs = m->ops->allgather(m->dev, &a, dp->comm_stream);
  if (!bs) bs = m->ops->stream_sync(m->dev, dp->comm_stream); /* watched, as for the grads */
  if (bs) return esmt_fail_prefix((esmt_status)bs, "data parallel: %s allgather: ",
                                  m->ops->name);
  return ESMT_OK;
}

void esmt_dp_device_arm(esmt_dp *dp, esmt_model *m) {
  m->grads_hook.fn = on_ready;
  m->grads_hook.user = dp;
  m->grads_hook.async = 1;
}

esmt_status esmt_dp_device_finish(esmt_dp *dp, esmt_model *m) {
  on_ready(dp, 0); /* whatever backward did not report */
  const double t0 = esmt_now_s();
  esmtb_status bs = m->ops->stream_sync(m->dev, dp->comm_stream);
  dp->busy_s += esmt_now_s() - t0; /* the all-reduce time backward did not hide */
  if (bs && !dp->error) {
    dp->error = (esmt_status)bs;
    snprintf(dp->error_text, sizeof dp->error_text,
             "data parallel: waiting for the gradient all-reduce: %s", esmt_last_error());
  }
  if (dp->error) return esmt_fail(dp->error, "%s", dp->error_text);
  return ESMT_OK;
}

void esmt_dp_device_abort(esmt_dp *dp) {
  const esmtb_ops *o = dp->on_device ? dp->m->ops : NULL;
  if (o && ESMTB_OPS_HAS(o, comm_release)) o->comm_release(dp->m->dev, 1);
}

void esmt_dp_device_release(esmt_dp *dp) {
  if (!dp->on_device) return;
  esmt_model *m = dp->m;
  if (ESMTB_OPS_HAS(m->ops, comm_release)) m->ops->comm_release(m->dev, 0);
  if (dp->ready_event) m->ops->event_destroy(m->dev, dp->ready_event);
  if (dp->comm_stream) m->ops->stream_destroy(m->dev, dp->comm_stream);
  dp->ready_event = NULL;
  dp->comm_stream = NULL;
  dp->on_device = 0;
}
