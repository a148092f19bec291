/* SPDX-License-Identifier: MIT */
/* ZeRO stages 1 and 2: see dp_group.h and docs/distributed.md "ZeRO". The
 * host path uses the TCP communicator's halves, the device path the
 * backend's ABI 1.3 reduce_scatter/allgather (dp_device.c).
 *
 * The flat buffer is cut into `world` contiguous shards of whole
 * ESMT_ZERO_ALIGN-element units, as even as the units allow (the first
 * total_units % world ranks get one unit more; the last shard ends at
 * layout.total). The worker reduce-scatters every gradient bucket onto the
 * owners of its elements (dp_group.c), so after backward each rank holds
 * the summed gradients of its shard only (the rest of its gradient buffer
 * is partial sums). The norm is the square root of the sum over ranks of
 * the shard sums of squares, AdamW updates the shard with the rank's own
 * moments, and the updated weights are all-gathered.
 *
 * Stage 1 reduces once per update, after the micro-batches accumulated
 * into the whole gradient buffer. Stage 2 on the device layer has no whole
 * buffer: the parameter memory's gradient slots (memory/grad_shard.h) call
 * reduce_part below as backward finishes each part, and the rank adds its
 * piece into its shard. The offload layer keeps its own whole device
 * gradient buffer (backward's working buffer): there stage 2 reduces every
 * micro-batch's buckets and then clears the other shards' partial sums
 * (esmt_dp_zero_keep_shard), so that the next backward adds onto the
 * shard's running sum only.
 *
 * With optimizer offload (stages 1 and 2) each rank's host holds the fp32
 * master, the moments and the fp32 gradients of its shard only (the model
 * is created for it: esmt_offload_options.zero_level); the host optimizer
 * updates the shard and pushes its compute weights into the whole device
 * compute copy, which the ranks then all-gather (gather_compute). At
 * stage 3 with offload (memory/offload_zero3.c) the device keeps ZeRO-3's
 * shard of the compute weights and ZeRO-2's gradient slots and shard: the
 * host step pulls the shard's gradients once per update and uploads its
 * compute weights, and the ranks gather the end parts and the LayerNorm
 * copies as without offload (gather_half). The streamed levels do not
 * combine with ZeRO: refused. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "checkpoint.h"
#include "dp_group_internal.h"
#include "grad_shard.h"
#include "offload.h"
#include "param_layer.h"
#include "registry.h"
#include "weight_gather.h"

void esmt_dp_set_zero(esmt_dp *dp, int level) {
  if (dp) dp->zero = level < 0 ? 0 : level > ESMT_ZERO_MAX_LEVEL ? ESMT_ZERO_MAX_LEVEL : level;
}

int esmt_dp_zero(const esmt_dp *dp) { return dp && dp->shard_off ? dp->zero : 0; }

int esmt_dp_zero_each_backward(const esmt_dp *dp) { return esmt_dp_zero(dp) >= 2; }

esmt_status esmt_dp_zero_keep_shard(esmt_dp *dp, esmt_model *m) {
  if (esmt_dp_zero(dp) < 2) return ESMT_OK;
  uint64_t lo, hi;
  esmt_dp_shard(dp, m->layout.total, &lo, &hi);
  return esmt_param_grads_keep_range(&m->mem, lo, hi);
}

void esmt_dp_shard(const esmt_dp *dp, uint64_t total, uint64_t *lo, uint64_t *hi) {
  if (!esmt_dp_zero(dp)) {
    *lo = 0;
    *hi = total;
    return;
  }
  const int r = esmt_dp_rank(dp);
  *lo = dp->shard_off[r];
  *hi = dp->shard_off[r + 1];
}

/* ZeRO-2's reducer (memory/grad_shard.h): the flat elements [lo, lo + n)
 * of `buf` onto their owners, on the device communicator's stream after
 * the compute stream's writes, or over TCP once the compute stream is
 * done (the host path). */
static esmt_status reduce_part(void *user, float *buf, uint64_t lo, uint64_t n,
                               esmtb_stream **on) {
  esmt_dp *dp = user;
  esmt_model *m = dp->sharded_m;
  const int W = esmt_dp_world(dp);
  const uint64_t hi = lo + n;
  esmt_dp_clip_shards(dp, W, lo, hi);
  const double t0 = esmt_now_s();
  esmtb_status bs = 0;
  esmt_status st = ESMT_OK;
  if (dp->on_device) {
    esmtb_shard_args a = {sizeof a, ESMTB_F32, (size_t)n, buf, W, dp->dev_off};
    bs = m->ops->event_record(m->dev, dp->ready_event, m->stream);
    if (!bs) bs = m->ops->stream_wait_event(m->dev, dp->comm_stream, dp->ready_event);
    if (!bs) bs = m->ops->reduce_scatter(m->dev, &a, dp->comm_stream);
    *on = dp->comm_stream;
  } else {
    bs = m->ops->stream_sync(m->dev, m->stream);
    if (!bs) st = esmt_comm_reduce_scatter_sum(dp->comm, buf, (size_t)n, dp->bucket_off,
                                               ESMT_COMM_F32);
    *on = m->stream;
  }
  dp->busy_s += esmt_now_s() - t0;
  if (bs) st = esmt_fail_prefix((esmt_status)bs, "%s: ", m->ops->name);
  if (st) return esmt_fail_prefix(st, "ZeRO-2: reduce-scatter of the gradients [%llu, %llu): ",
                                  (unsigned long long)lo, (unsigned long long)hi);
  esmt_dp_count_bucket(dp, n * sizeof(float));
  return ESMT_OK;
}

int esmt_test_zero3_drop_ready_wait;

/* ZeRO-3's gather (memory/weight_gather.h): the compute weights of the
 * flat elements [lo, lo + n) into `buf`, this rank's piece in place, on
 * the device communicator's stream after the compute stream's writes (the
 * piece) and reads (the slot's previous part), or over TCP once the compute
 * stream is done (the host path). */
static esmt_status gather_part(void *user, void *buf, uint64_t lo, uint64_t n,
                               esmtb_stream **on) {
  esmt_dp *dp = user;
  esmt_model *m = dp->sharded_m;
  const int W = esmt_dp_world(dp);
  const uint64_t hi = lo + n;
  esmt_dp_clip_shards(dp, W, lo, hi);
  const size_t es = m->mem.env.esize;
  const double t0 = esmt_now_s();
  esmtb_status bs = 0;
  esmt_status st = ESMT_OK;
  if (dp->on_device) {
    esmtb_shard_args a = {sizeof a, m->mem.env.dtype, (size_t)n, buf, W, dp->dev_off};
    bs = m->ops->event_record(m->dev, dp->ready_event, m->stream);
    if (!bs && !esmt_test_zero3_drop_ready_wait)
      bs = m->ops->stream_wait_event(m->dev, dp->comm_stream, dp->ready_event);
    if (!bs) bs = m->ops->allgather(m->dev, &a, dp->comm_stream);
    *on = dp->comm_stream;
  } else {
    bs = m->ops->stream_sync(m->dev, m->stream);
    if (!bs) st = esmt_comm_allgather_shards(dp->comm, buf, (size_t)n, dp->bucket_off, es);
    *on = m->stream;
  }
  dp->busy_s += esmt_now_s() - t0;
  if (bs) st = esmt_fail_prefix((esmt_status)bs, "%s: ", m->ops->name);
  if (st) return esmt_fail_prefix(st, "ZeRO-3: all-gather of the weights [%llu, %llu): ",
                                  (unsigned long long)lo, (unsigned long long)hi);
  dp->vol.allgathered += n * es;
  return ESMT_OK;
}

static esmt_status refuse(esmt_dp *dp, const esmt_model *m) {
  if (m->mem.stream)
    return esmt_fail(ESMT_ERR_UNSUPPORTED,
                     "dist.zero %d does not combine with offload.stream (a rank would stream "
                     "the whole model's layers): use dist.zero 1, 2 or 3 with offload.optimizer "
                     "on and offload.stream off, or one process with offload.stream", dp->zero);
  if (m->mem.offload && dp->zero >= 3 && !m->mem.wgather)
    return esmt_fail(ESMT_ERR_UNSUPPORTED,
                     "dist.zero %d with offload.optimizer: the model was not created for "
                     "ZeRO-3 (esmt_offload_options zero_level 3, zero_rank, zero_world; the "
                     "trainer's configuration does)", dp->zero);
  if (dp->on_device && !esmt_ops_has_shard_comm(m->ops))
    return esmt_fail(ESMT_ERR_UNSUPPORTED,
                     "dist.zero %d: backend %s (ABI %u.%u) sums gradients on the device but "
                     "lacks the \"comm\" group's reduce_scatter/allgather ZeRO needs: set dist.zero 0",
                     dp->zero, m->ops->name, (unsigned)m->ops->abi_major,
                     (unsigned)m->ops->abi_minor);
  return ESMT_OK;
}

esmt_status esmt_dp_zero_start(esmt_dp *dp, esmt_model *m) {
  if (!dp || !dp->zero) return ESMT_OK;
  const int W = esmt_dp_world(dp), r = esmt_dp_rank(dp);
  /* every rank refuses alike (same config, same backend) */
  esmt_status st = refuse(dp, m);
  /* this rank's shard: the offloaded host must have been sized for it */
  uint64_t split_lo = 0, split_hi = m->layout.total;
  if (!st && m->mem.offload && W > 1) {
    uint64_t *off = calloc((size_t)W + 1, sizeof *off);
    if (!off) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
    if (off) esmt_zero_split(m->layout.total, W, off);
    if (off) split_lo = off[r], split_hi = off[r + 1];
    free(off);
  }
  if (!st && m->mem.offload && (m->mem.offload->zero_level < 1 ||
                                m->mem.master_lo != split_lo || m->mem.master_hi != split_hi))
    st = esmt_fail(ESMT_ERR_UNSUPPORTED,
                   "dist.zero %d with offload.optimizer: this rank's host buffers were sized "
                   "for [%llu, %llu)%s, not for its shard [%llu, %llu) of %d rank(s): create "
                   "the model for the shard (esmt_offload_options zero_level, zero_rank, "
                   "zero_world; the trainer's configuration does)", dp->zero,
                   (unsigned long long)m->mem.master_lo, (unsigned long long)m->mem.master_hi,
                   m->mem.offload->zero_level < 1 ? " without ZeRO" : "",
                   (unsigned long long)split_lo, (unsigned long long)split_hi, W);
  if (st) {
    dp->zero = 0;
    return st;
  }
  if (!dp->shard_off) dp->shard_off = calloc((size_t)W + 1, sizeof *dp->shard_off);
  if (!dp->bucket_off) dp->bucket_off = calloc((size_t)W + 1, sizeof *dp->bucket_off);
  if (!dp->dev_off) dp->dev_off = calloc((size_t)W + 1, sizeof *dp->dev_off);
  uint64_t lo = 0, hi = m->layout.total;
  if (!dp->shard_off || !dp->bucket_off || !dp->dev_off) {
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
  } else { /* the split, then this rank's moments cut down to its shard */
    esmt_zero_split(m->layout.total, W, dp->shard_off);
    lo = dp->shard_off[r];
    hi = dp->shard_off[r + 1];
    st = esmt_param_shard_optimizer(&m->mem, lo, hi);
    /* ZeRO-2: the whole gradient buffer gives way to per-part slots and
     * the shard, where the memory layer allows (the device layer) */
    if (!st && dp->zero >= 2 && (m->mem.gshard || m->mem.layer == &esmt_device_layer)) {
      dp->sharded_m = m;
      st = esmt_param_shard_grads(&m->mem, lo, hi, reduce_part, dp);
      if (st) dp->sharded_m = NULL;
    }
    if (!st && dp->zero >= 3 && !dp->sharded_m)
      st = esmt_fail(ESMT_ERR_UNSUPPORTED, "dist.zero 3 needs the parameters in device memory "
                     "(ZeRO-2's gradient slots)");
    /* offload in half: the ranks gather norm_dev's LayerNorm w/b by rank */
    if (!st && m->mem.offload && m->mem.compute_lowp && !dp->norm_off) {
      dp->norm_off = calloc((size_t)W + 1, sizeof *dp->norm_off);
      if (!dp->norm_off) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
      else esmt_param_norm_split(&m->mem, dp->shard_off, W, dp->norm_off);
    }
    /* ...and with a half compute copy the fp32 master too: the kernels
     * read the half copy, which is what the ranks all-gather; ZeRO-3
     * keeps the shard of the compute weights only and gathers per part */
    if (!st && dp->sharded_m && (m->mem.compute_lowp || dp->zero >= 3)) {
      if (!dp->norm_off) dp->norm_off = calloc((size_t)W + 1, sizeof *dp->norm_off);
      if (!dp->norm_off) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
      else if (dp->zero >= 3) st = esmt_param_shard_weights(&m->mem, lo, hi, gather_part, dp);
      else st = esmt_param_shard_master(&m->mem, lo, hi);
      if (!st) esmt_param_norm_split(&m->mem, dp->shard_off, W, dp->norm_off);
    }
  }
  uint64_t failed = st != ESMT_OK;
  char own[1024] = "";
  if (st) snprintf(own, sizeof own, "%s", esmt_last_error());
  esmt_status cs = esmt_dp_sum_u64(dp, &failed, 1);
  const int level = dp->zero;
  if (st || cs || failed) dp->zero = 0; /* the group is unusable: set_dp fails */
  if (st) return esmt_fail(st, "ZeRO-%d: %s", level, own);
  if (cs) return esmt_fail_prefix(cs, "ZeRO-%d: ", level);
  if (failed)
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "ZeRO-%d: sharding the optimizer state failed on "
                     "%llu other rank(s)", level, (unsigned long long)failed);
  /* ZeRO-3: the end parts gathered (every rank is set up: collective;
   * not an update's traffic) */
  const uint64_t before = dp->vol.allgathered;
  if (m->mem.wgather && (st = esmt_weight_gather_refresh(&m->mem))) {
    dp->zero = 0;
    return esmt_fail_prefix(st, "ZeRO-3: ");
  }
  dp->vol.allgathered = before;
  const double mib = 1.0 / (1 << 20);
  const uint64_t full = 2 * m->layout.total * sizeof(float), mine = 2 * (hi - lo) * sizeof(float);
  char master[320];
  snprintf(master, sizeof master, "%s", level >= 2 ? "fp32 weights stay whole"
                                                   : "fp32 weights and gradients stay whole");
  const uint64_t host = (m->mem.moment2 ? 4 : 3) * (hi - lo) * sizeof(float); /* Lion: one moment */
  if (m->mem.offload)
    snprintf(master, sizeof master, "fp32 master weights, moments and gradients %llu bytes "
             "(%.2f MiB) for this shard in host memory, %s", (unsigned long long)host,
             (double)host * mib, m->mem.wgather ? "the compute weights of this shard on the "
             "device, each layer's all-gathered before it runs into two slots"
             : "the compute copy whole on the device and all-gathered after each step");
  else if (m->mem.wgather)
    snprintf(master, sizeof master, "fp32 master and compute weights for this shard only (fp32 "
             "master %llu bytes), each layer's all-gathered before it runs into two slots",
             (unsigned long long)((hi - lo) * sizeof(float)));
  else if (esmt_param_master_sharded(&m->mem))
    snprintf(master, sizeof master, "fp32 master weights %llu bytes (%.2f MiB) on this rank, "
             "the half copy whole", (unsigned long long)((hi - lo) * sizeof(float)),
             (double)(hi - lo) * sizeof(float) * mib);
  esmt_logger_log(&m->ctx->logger, ESMT_LOG_INFO,
                  "ZeRO-%d: rank %d owns parameters [%llu, %llu) (%llu of %llu); AdamW moments "
                  "%llu bytes (%.2f MiB) on this rank instead of %llu (%.2f MiB); %s%s",
                  level, r, (unsigned long long)lo, (unsigned long long)hi,
                  (unsigned long long)(hi - lo), (unsigned long long)m->layout.total,
                  (unsigned long long)mine, (double)mine * mib, (unsigned long long)full,
                  (double)full * mib,
                  dp->sharded_m ? "each part's gradients reduce-scattered as backward finishes "
                                  "it, fp32 gradients kept for this shard only (two layer "
                                  "slots and the end parts besides); "
                  : level >= 2 ? "gradients reduce-scattered every micro-batch and accumulated for "
                               "this shard only (the whole fp32 buffer is backward's working "
                               "buffer); "
                             : "", master);
  return ESMT_OK;
}

esmt_status esmt_dp_zero_grad_norm(esmt_dp *dp, esmt_model *m, double *norm) {
  uint64_t lo, hi;
  esmt_dp_shard(dp, m->layout.total, &lo, &hi);
  float part = 0.0f;
  esmt_status st = esmt_param_grad_sumsq_range(&m->mem, lo, hi, &part);
  double sum = part; /* a non-finite shard makes the sum non-finite on every rank */
  if (!st) st = esmt_dp_sum_f64(dp, &sum, 1);
  if (st) return st;
  *norm = sqrt(sum);
  return ESMT_OK;
}

/* The ranks all-gather the compute copy `w` (the model's compute dtype,
 * every rank's shard written by its update) and, when not NULL, the fp32
 * LayerNorm w/b `norms` the half kernels read; on the host path after the
 * stream that wrote them has finished. */
static esmt_status allgather_copy(esmt_dp *dp, esmt_model *m, void *w, float *norms) {
  const uint64_t total = m->layout.total, nn = (uint64_t)m->mem.env.n_norm * m->mem.env.d;
  const size_t es = m->mem.env.esize;
  esmt_status st = ESMT_OK;
  if (dp->on_device) {
    st = esmt_dp_device_allgather_as(dp, m, w, m->mem.env.dtype, total, dp->shard_off);
    if (!st && norms) st = esmt_dp_device_allgather_as(dp, m, norms, ESMTB_F32, nn, dp->norm_off);
  } else {
    esmtb_status bs = m->ops->stream_sync(m->dev, m->stream);
    if (bs) st = esmt_fail_prefix((esmt_status)bs, "%s: ", m->ops->name);
    if (!st) st = esmt_comm_allgather_shards(dp->comm, w, (size_t)total, dp->shard_off, es);
    if (!st && norms)
      st = esmt_comm_allgather_shards(dp->comm, norms, (size_t)nn, dp->norm_off, sizeof(float));
  }
  if (!st) dp->vol.allgathered += total * es; /* the LayerNorm copies (nn floats) are not counted */
  return st;
}

/* A sharded master: AdamW wrote this shard's half copy; the ranks
 * all-gather the half copy and the fp32 LayerNorm weights the kernels read
 * (the LayerNorm ones from the master first). */
static esmt_status gather_half(esmt_dp *dp, esmt_model *m) {
  const uint64_t nn = (uint64_t)m->mem.env.n_norm * m->mem.env.d;
  /* (offloaded: the host step pushed this shard's LayerNorm elements) */
  esmt_status st = m->mem.norm_dev && !m->mem.offload
      ? esmt_param_norms_from_master(&m->mem, m->mem.master_lo, m->mem.master_hi)
      : ESMT_OK;
  if (!st && m->mem.wgather) { /* ZeRO-3: the LayerNorm w/b (half), then the end parts */
    if (m->mem.norm_dev && dp->on_device)
      st = esmt_dp_device_allgather_as(dp, m, m->mem.norm_dev, ESMTB_F32, nn, dp->norm_off);
    else if (m->mem.norm_dev) {
      esmtb_status bs = m->ops->stream_sync(m->dev, m->stream);
      if (bs) st = esmt_fail_prefix((esmt_status)bs, "%s: ", m->ops->name);
      if (!st) st = esmt_comm_allgather_shards(dp->comm, m->mem.norm_dev, (size_t)nn,
                                               dp->norm_off, sizeof(float));
    }
    if (!st) st = esmt_weight_gather_refresh(&m->mem);
    if (st) return esmt_fail_prefix(st, "ZeRO-3: after the update: ");
    m->have_forward = 0;
    return ESMT_OK;
  }
  if (!st) st = allgather_copy(dp, m, m->mem.compute_lowp, m->mem.norm_dev);
  if (st) return esmt_fail_prefix(st, "ZeRO-%d: all-gather of the updated weights: ", dp->zero);
  m->have_forward = 0;
  return ESMT_OK;
}

/* Optimizer offload: the host step pushed this shard's compute weights
 * (and in half its LayerNorm w/b in norm_dev) into the device compute
 * copy; the ranks all-gather the rest of it. */
static esmt_status gather_compute(esmt_dp *dp, esmt_model *m) {
  void *w = m->mem.compute_lowp ? m->mem.compute_lowp : (void *)m->mem.compute32;
  esmt_status st = allgather_copy(dp, m, w, m->mem.compute_lowp ? m->mem.norm_dev : NULL);
  if (st) return esmt_fail_prefix(st, "ZeRO-%d: all-gather of the updated compute weights: ",
                                  dp->zero);
  m->have_forward = 0;
  return ESMT_OK;
}

esmt_status esmt_dp_zero_gather_params(esmt_dp *dp, esmt_model *m) {
  uint64_t lo, hi;
  const uint64_t total = m->layout.total;
  if (m->mem.offload && !m->mem.wgather) return gather_compute(dp, m);
  if (esmt_param_master_sharded(&m->mem)) return gather_half(dp, m);
  esmt_dp_shard(dp, total, &lo, &hi);
  esmt_status st = dp->on_device
      ? esmt_dp_device_allgather(dp, m, m->mem.master, total)
      : esmt_comm_allgather_shards(dp->comm, m->mem.master, (size_t)total, dp->shard_off,
                                   sizeof(float));
  if (st) return esmt_fail_prefix(st, "ZeRO-%d: all-gather of the updated weights: ", dp->zero);
  dp->vol.allgathered += total * sizeof(float);
  /* AdamW refreshed the compute copy of this shard; the rest follows */
  if (!st && lo) st = esmt_model_sync_lowp(m, 0, lo);
  if (!st && hi < total) st = esmt_model_sync_lowp(m, hi, total - hi);
  m->have_forward = 0;
  return st;
}

uint64_t esmt_dp_zero_save_elems(const esmt_dp *dp, uint64_t total) {
  if (!esmt_dp_zero(dp) || esmt_dp_rank(dp) == 0) return total;
  return esmt_zero_shard_max(total, esmt_dp_world(dp));
}

/* This rank's shard of `src` (the memory's buffer of [lo, hi), device or
 * host) into rank 0's `host` at its place, the ranks in turn broadcasting
 * theirs (no gather-to-root collective: the others receive a shard they
 * drop, as an all-gather would have sent it to them). A rank other than 0
 * holds one shard at a time in `host`: its own is read again just before
 * its turn, and any other's overwrites it. Collective. */
static esmt_status shards_to_root(esmt_dp *dp, esmt_model *m, float *src, float *host,
                                  const char *what) {
  const int W = esmt_dp_world(dp), r = esmt_dp_rank(dp);
  const uint64_t *off = dp->shard_off;
  esmt_status st = ESMT_OK;
  char own[1024] = "";
  for (int k = 0; k < W; k++) {
    const uint64_t n = off[k + 1] - off[k];
    float *at = r == 0 ? host + off[k] : host;
    if (k == r && n && !st) /* (rank 0: in place; its turn sends nothing) */
      st = esmt_master_copy(m, at, src, n * sizeof(float), 0);
    if (st && !own[0]) snprintf(own, sizeof own, "%s", esmt_last_error());
    esmt_status cs = k && n ? esmt_comm_broadcast(dp->comm, at, (size_t)n * sizeof(float), k)
                            : ESMT_OK;
    if (cs) return esmt_fail_prefix(cs, "ZeRO: sending the %s to rank 0: ", what);
  }
  uint64_t failed = st != ESMT_OK;
  esmt_status cs = esmt_dp_sum_u64(dp, &failed, 1);
  if (st) return esmt_fail(st, "ZeRO: reading this rank's %s: %s", what, own);
  if (cs) return esmt_fail_prefix(cs, "ZeRO: ");
  if (failed)
    return esmt_fail(ESMT_ERR_BACKEND, "ZeRO: %llu other rank(s) could not read their %s",
                     (unsigned long long)failed, what);
  return ESMT_OK;
}

esmt_status esmt_dp_zero_gather_master(esmt_dp *dp, esmt_model *m, float *host_w) {
  return shards_to_root(dp, m, m->mem.master, host_w, "master shard");
}

esmt_status esmt_dp_zero_gather_moments(esmt_dp *dp, esmt_model *m, float *host_m,
                                        float *host_v) {
  esmt_status st = shards_to_root(dp, m, m->mem.moment1, host_m, "first moments");
  if (!st && host_v) st = shards_to_root(dp, m, m->mem.moment2, host_v, "second moments");
  return st; /* NULL host_v: Lion */
}
