/* SPDX-License-Identifier: MIT */
/* See dp_group.h. */
#define _POSIX_C_SOURCE 200809L
#include "esmtrain/backend.h"
#include "dp_group_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad_shard.h"
#include "param_layer.h"
#include "registry.h"

esmt_status esmt_dp_create(esmt_comm *comm, uint64_t bucket_bytes, esmt_dp **out) {
  *out = NULL;
  esmt_dp *dp = calloc(1, sizeof *dp);
  if (!dp) {
    esmt_comm_destroy(comm);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "data parallel: out of memory");
  }
  dp->comm = comm;
  dp->timeout_s = 300;
  if (!bucket_bytes) bucket_bytes = 25u << 20;
  dp->bucket_elems = bucket_bytes / sizeof(float) ? bucket_bytes / sizeof(float) : 1;
  pthread_mutex_init(&dp->mu, NULL);
  pthread_cond_init(&dp->cv, NULL);
  *out = dp;
  return ESMT_OK;
}

esmt_status esmt_dp_create_from_env(uint64_t bucket_bytes, int force, esmt_comm_kind comm,
                                    esmt_dp **out) {
  *out = NULL;
  esmt_dist_env env;
  esmt_status st = esmt_dist_env_detect(&env);
  if (st) return st;
  const char *f = getenv("ESMTRAIN_FORCE_DP");
  if (f && *f && strcmp(f, "0") != 0) force = 1;
  if (env.world_size <= 1 && !force) return ESMT_OK;
  esmt_comm *c = NULL;
  if ((st = esmt_comm_create_from_env(&c, &env, comm))) return st;
  if ((st = esmt_dp_create(c, bucket_bytes, out))) return st;
  (*out)->timeout_s = env.timeout_s;
  return ESMT_OK;
}

void esmt_dp_destroy(esmt_dp *dp) {
  if (!dp) return;
  if (dp->worker_running) { /* an update abandoned mid-way: stop the worker */
    pthread_mutex_lock(&dp->mu);
    if (!dp->error) dp->error = ESMT_ERR_CANCELLED;
    pthread_cond_broadcast(&dp->cv);
    pthread_mutex_unlock(&dp->mu);
    pthread_join(dp->worker, NULL);
  }
  if (dp->sharded_m) esmt_param_shard_grads_unhook(&dp->sharded_m->mem);
  esmt_dp_device_release(dp);
  esmt_comm_destroy(dp->comm);
  free(dp->shard_off);
  free(dp->norm_off);
  free(dp->bucket_off);
  free(dp->dev_off);
  pthread_cond_destroy(&dp->cv);
  pthread_mutex_destroy(&dp->mu);
  free(dp);
}

const esmt_comm *esmt_dp_comm(const esmt_dp *dp) { return dp ? dp->comm : NULL; }

int esmt_dp_rank(const esmt_dp *dp) { return dp ? esmt_comm_rank(dp->comm) : 0; }
int esmt_dp_world(const esmt_dp *dp) { return dp ? esmt_comm_world_size(dp->comm) : 1; }

esmt_status esmt_dp_sum_u64(esmt_dp *dp, uint64_t *v, int n) {
  if (!dp) return ESMT_OK;
  return esmt_comm_allreduce_sum(dp->comm, v, (size_t)n, ESMT_COMM_I64);
}

esmt_status esmt_dp_sum_f64(esmt_dp *dp, double *v, int n) {
  if (!dp) return ESMT_OK;
  return esmt_comm_allreduce_sum(dp->comm, v, (size_t)n, ESMT_COMM_F64);
}

void esmt_dp_set_step(esmt_dp *dp, int64_t step) {
  if (dp) esmt_comm_set_step(dp->comm, step);
}

void esmt_dp_abort(esmt_dp *dp, const char *reason) {
  if (!dp) return;
  /* `reason` is often esmt_last_error(), which the aborts may overwrite */
  char why[1024], last[1024];
  snprintf(why, sizeof why, "%s", reason ? reason : "");
  snprintf(last, sizeof last, "%s", esmt_last_error());
  esmt_dp_device_abort(dp);
  esmt_comm_abort(dp->comm, why);
  esmt_fail(ESMT_OK, "%s", last);
}

void esmt_dp_set_timeout(esmt_dp *dp, double seconds) {
  if (dp) dp->timeout_s = seconds;
}

int esmt_dp_on_device(const esmt_dp *dp) { return dp ? dp->on_device : 0; }

void esmt_dp_stats(const esmt_dp *dp, uint64_t *bytes, double *busy_s) {
  *bytes = dp ? dp->bytes : 0;
  *busy_s = dp ? dp->busy_s : 0;
}

void esmt_dp_volume(const esmt_dp *dp, esmt_zero_volume *v) {
  *v = dp ? dp->vol : (esmt_zero_volume){0};
  const uint64_t W = (uint64_t)esmt_dp_world(dp);
  v->sent_per_rank = (2 * v->allreduced + v->reduce_scattered + v->allgathered) / W * (W - 1);
}

static esmt_status need_host_grads(const esmt_model *m) {
  if (m->ops->caps & ESMTB_CAP_HOST_ADDRESSABLE) return ESMT_OK;
  if (m->ops->caps & ESMTB_CAP_MULTI_DEVICE)
    return esmt_fail(ESMT_ERR_UNSUPPORTED,
                     "data parallel: backend %s (ABI %u.%u) lacks the \"comm\" group's "
                     "communicator ops (comm_unique_id, comm_init) the core needs to sum device gradients",
                     m->ops->name, (unsigned)m->ops->abi_major, (unsigned)m->ops->abi_minor);
  return esmt_fail(ESMT_ERR_UNSUPPORTED,
                   "data parallel over TCP needs host-addressable gradients; backend %s has "
                   "device memory (use the nccl_dp backend for GPUs)",
                   m->ops->name);
}

/* FNV-1a over the 32-bit words of the weights every rank holds whole (the
 * fp32 master; under ZeRO's sharded weights memory/param_layer.h's
 * esmt_param_replicated); device memory is read in chunks. */
static esmt_status params_checksum(esmt_model *m, uint64_t *out) {
  uint64_t cs = 1469598103934665603ull;
  const void *buf = NULL;
  uint64_t bytes = 0;
  esmt_param_replicated(&m->mem, &buf, &bytes);
  const uint64_t words = bytes / sizeof(uint32_t);
  if (m->ops->caps & ESMTB_CAP_HOST_ADDRESSABLE) {
    const uint32_t *bits = buf;
    for (uint64_t i = 0; i < words; i++) cs = (cs ^ bits[i]) * 1099511628211ull;
    *out = cs;
    return ESMT_OK;
  }
  enum { CHUNK = 1 << 22 };
  uint32_t *bits = malloc(CHUNK * sizeof *bits);
  if (!bits) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "data parallel: out of memory");
  esmtb_status bs = 0;
  for (uint64_t at = 0; at < words && !bs; at += CHUNK) {
    const uint64_t n = words - at < CHUNK ? words - at : CHUNK;
    bs = m->ops->copy_async(m->dev, bits, (const uint32_t *)buf + at, n * sizeof *bits,
                            ESMTB_COPY_D2H, m->stream);
    if (!bs) bs = m->ops->stream_sync(m->dev, m->stream);
    for (uint64_t i = 0; !bs && i < n; i++) cs = (cs ^ bits[i]) * 1099511628211ull;
  }
  free(bits);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "data parallel: reading the weights: ");
  *out = cs;
  return ESMT_OK;
}

esmt_status esmt_dp_check_start(esmt_dp *dp, esmt_model *m) {
  if (!dp) return ESMT_OK;
  const int device = esmt_ops_has_comm(m->ops);
  esmt_status st = device ? ESMT_OK : need_host_grads(m);
  if (st) return st;
  const int world = esmt_dp_world(dp);
  uint64_t one = 1;
  if ((st = esmt_dp_sum_u64(dp, &one, 1)))
    return esmt_fail_prefix(st, "data parallel: test all-reduce: ");
  if (one != (uint64_t)world)
    return esmt_fail(ESMT_ERR_INTERNAL, "data parallel: test all-reduce gave %llu, not %d",
                     (unsigned long long)one, world);
  if (device && (st = esmt_dp_device_setup(dp, m))) return st;
  /* the same weights everywhere: a checksum of the fp32 bits */
  uint64_t cs = 0;
  if ((st = params_checksum(m, &cs))) return st;
  uint64_t v[2] = {cs, 0};
  if ((st = esmt_dp_sum_u64(dp, v, 1))) return esmt_fail_prefix(st, "data parallel: ");
  uint64_t differs = v[0] != cs * (uint64_t)world;
  if ((st = esmt_dp_sum_u64(dp, &differs, 1))) return esmt_fail_prefix(st, "data parallel: ");
  if (differs)
    return esmt_fail(ESMT_ERR_STATE,
                     "data parallel: the ranks start from different weights (%llu of %d see a "
                     "mismatch): give every rank the same train.seed and the same --init-from "
                     "or --resume",
                     (unsigned long long)differs, world);
  return ESMT_OK;
}

static void *worker_main(void *arg) {
  esmt_dp *dp = arg;
  pthread_mutex_lock(&dp->mu);
  while (dp->done < dp->nbuckets && !dp->error) {
    if (dp->done == dp->ready) {
      pthread_cond_wait(&dp->cv, &dp->mu);
      continue;
    }
    uint64_t k = dp->done, lo, hi;
    pthread_mutex_unlock(&dp->mu);
    esmt_dp_bucket_range(dp, k, &lo, &hi);
    double t0 = esmt_now_s();
    esmt_status st;
    if (esmt_dp_zero(dp)) { /* each owner gets the sum of its part of the bucket */
      const int W = esmt_comm_world_size(dp->comm);
      for (int j = 0; j <= W; j++) {
        uint64_t o = dp->shard_off[j] < lo ? lo : dp->shard_off[j] > hi ? hi : dp->shard_off[j];
        dp->bucket_off[j] = o - lo;
      }
      st = esmt_comm_reduce_scatter_sum(dp->comm, dp->grads + lo, (size_t)(hi - lo),
                                        dp->bucket_off, ESMT_COMM_F32);
    } else {
      st = esmt_comm_allreduce_sum(dp->comm, dp->grads + lo, (size_t)(hi - lo), ESMT_COMM_F32);
    }
    double t1 = esmt_now_s();
    pthread_mutex_lock(&dp->mu);
    dp->busy_s += t1 - t0;
    if (st) {
      dp->error = st;
      snprintf(dp->error_text, sizeof dp->error_text, "%s", esmt_last_error());
    } else {
      esmt_dp_count_bucket(dp, (hi - lo) * sizeof(float));
      dp->done++;
    }
    pthread_cond_broadcast(&dp->cv);
  }
  pthread_mutex_unlock(&dp->mu);
  return NULL;
}

static void on_grads_ready(void *user, uint64_t from) {
  esmt_dp *dp = user;
  pthread_mutex_lock(&dp->mu);
  while (dp->ready < dp->nbuckets) {
    uint64_t lo, hi;
    esmt_dp_bucket_range(dp, dp->ready, &lo, &hi);
    if (lo < from) break;
    dp->ready++;
  }
  pthread_cond_broadcast(&dp->cv);
  pthread_mutex_unlock(&dp->mu);
}

esmt_status esmt_dp_grads_arm(esmt_dp *dp, esmt_model *m) {
  if (!dp) return ESMT_OK;
  if (dp->on_device && dp->m != m)
    return esmt_fail(ESMT_ERR_STATE, "data parallel: the group serves another model");
  if (m->mem.env.opt_lo) /* its gradients start past a frozen prefix; the buckets cover all */
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "data parallel: a model with frozen parameters "
                     "(frozen_layers, LoRA) is not supported yet");
  esmt_status st = dp->on_device ? ESMT_OK : need_host_grads(m);
  if (st) return st;
  dp->grads = m->mem.grads;
  dp->total = m->layout.total;
  dp->nbuckets = (dp->total + dp->bucket_elems - 1) / dp->bucket_elems;
  dp->ready = dp->done = 0;
  dp->error = ESMT_OK;
  dp->error_text[0] = '\0';
  if (dp->sharded_m == m) { /* ZeRO-2 slots: the memory reduces each part */
    dp->nbuckets = 0;
    return ESMT_OK;
  }
  if (dp->on_device) {
    esmt_dp_device_arm(dp, m);
    return ESMT_OK;
  }
  if (pthread_create(&dp->worker, NULL, worker_main, dp) != 0)
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "data parallel: cannot start the all-reduce thread");
  dp->worker_running = 1;
  m->grads_hook.fn = on_grads_ready;
  m->grads_hook.user = dp;
  return ESMT_OK;
}

esmt_status esmt_dp_grads_finish(esmt_dp *dp, esmt_model *m) {
  if (!dp) return ESMT_OK;
  m->grads_hook.fn = NULL;
  m->grads_hook.user = NULL;
  m->grads_hook.async = 0;
  if (dp->on_device) return esmt_dp_device_finish(dp, m);
  if (!dp->worker_running) return ESMT_OK;
  on_grads_ready(dp, 0); /* whatever backward did not report (e.g. it failed) */
  pthread_join(dp->worker, NULL);
  dp->worker_running = 0;
  if (dp->error) return esmt_fail(dp->error, "%s", dp->error_text);
  return ESMT_OK;
}

void esmt_dp_grads_cancel(esmt_dp *dp, esmt_model *m) {
  if (!dp) return;
  m->grads_hook.fn = NULL;
  m->grads_hook.user = NULL;
  m->grads_hook.async = 0;
  if (dp->on_device) { /* queued all-reduces may never complete: stop them */
    esmt_dp_device_abort(dp);
    return;
  }
  if (!dp->worker_running) return;
  pthread_mutex_lock(&dp->mu);
  if (!dp->error) dp->error = ESMT_ERR_CANCELLED;
  pthread_cond_broadcast(&dp->cv);
  pthread_mutex_unlock(&dp->mu);
  pthread_join(dp->worker, NULL);
  dp->worker_running = 0;
}
