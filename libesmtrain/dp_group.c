/* See dp_group.h. */
#define _POSIX_C_SOURCE 200809L
#include "dp_group.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct esmt_dp {
  esmt_comm *comm;
  uint64_t bucket_elems;
  /* the update's gradient sum, run by a worker thread */
  pthread_t worker;
  int worker_running;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  float *grads;
  uint64_t total, nbuckets;
  uint64_t ready;            /* buckets (from the top) whose gradients are final */
  uint64_t done;             /* buckets reduced */
  esmt_status error;
  char error_text[1024];
  /* stats */
  uint64_t bytes;
  double busy_s;
};

esmt_status esmt_dp_create(esmt_comm *comm, uint64_t bucket_bytes, esmt_dp **out) {
  *out = NULL;
  esmt_dp *dp = calloc(1, sizeof *dp);
  if (!dp) {
    esmt_comm_destroy(comm);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "data parallel: out of memory");
  }
  dp->comm = comm;
  if (!bucket_bytes) bucket_bytes = 25u << 20;
  dp->bucket_elems = bucket_bytes / sizeof(float) ? bucket_bytes / sizeof(float) : 1;
  pthread_mutex_init(&dp->mu, NULL);
  pthread_cond_init(&dp->cv, NULL);
  *out = dp;
  return ESMT_OK;
}

esmt_status esmt_dp_create_from_env(uint64_t bucket_bytes, esmt_dp **out) {
  *out = NULL;
  esmt_dist_env env;
  esmt_status st = esmt_dist_env_detect(&env);
  if (st) return st;
  if (env.world_size <= 1) return ESMT_OK;
  esmt_comm *c = NULL;
  if ((st = esmt_comm_create_from_env(&c, &env))) return st;
  return esmt_dp_create(c, bucket_bytes, out);
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
  esmt_comm_destroy(dp->comm);
  pthread_cond_destroy(&dp->cv);
  pthread_mutex_destroy(&dp->mu);
  free(dp);
}

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
  if (dp) esmt_comm_abort(dp->comm, reason);
}

void esmt_dp_stats(const esmt_dp *dp, uint64_t *bytes, double *busy_s) {
  *bytes = dp ? dp->bytes : 0;
  *busy_s = dp ? dp->busy_s : 0;
}

static esmt_status need_host_grads(const esmt_model *m) {
  if (m->ops->caps & ESMTB_CAP_HOST_ADDRESSABLE) return ESMT_OK;
  return esmt_fail(ESMT_ERR_UNSUPPORTED,
                   "data parallel over TCP needs host-addressable gradients; backend %s has "
                   "device memory (use the nccl_dp backend for GPUs)",
                   m->ops->name);
}

esmt_status esmt_dp_check_start(esmt_dp *dp, esmt_model *m) {
  if (!dp) return ESMT_OK;
  esmt_status st = need_host_grads(m);
  if (st) return st;
  const int world = esmt_dp_world(dp);
  uint64_t one = 1;
  if ((st = esmt_dp_sum_u64(dp, &one, 1)))
    return esmt_fail_prefix(st, "data parallel: test all-reduce: ");
  if (one != (uint64_t)world)
    return esmt_fail(ESMT_ERR_INTERNAL, "data parallel: test all-reduce gave %llu, not %d",
                     (unsigned long long)one, world);
  /* the same weights everywhere: a checksum of the fp32 bits */
  uint64_t cs = 1469598103934665603ull;
  const uint32_t *bits = (const uint32_t *)(const void *)m->params;
  for (uint64_t i = 0; i < m->layout.total; i++) cs = (cs ^ bits[i]) * 1099511628211ull;
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

/* Bucket k covers [total - (k+1) B, total - k B), clipped at 0: the top of
 * the buffer first, in the order backward finishes it. */
static void bucket_range(const esmt_dp *dp, uint64_t k, uint64_t *lo, uint64_t *hi) {
  *hi = dp->total - k * dp->bucket_elems;
  *lo = *hi > dp->bucket_elems ? *hi - dp->bucket_elems : 0;
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
    bucket_range(dp, k, &lo, &hi);
    double t0 = esmt_now_s();
    esmt_status st = esmt_comm_allreduce_sum(dp->comm, dp->grads + lo, (size_t)(hi - lo),
                                             ESMT_COMM_F32);
    double t1 = esmt_now_s();
    pthread_mutex_lock(&dp->mu);
    dp->busy_s += t1 - t0;
    if (st) {
      dp->error = st;
      snprintf(dp->error_text, sizeof dp->error_text, "%s", esmt_last_error());
    } else {
      dp->bytes += (hi - lo) * sizeof(float);
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
    bucket_range(dp, dp->ready, &lo, &hi);
    if (lo < from) break;
    dp->ready++;
  }
  pthread_cond_broadcast(&dp->cv);
  pthread_mutex_unlock(&dp->mu);
}

esmt_status esmt_dp_grads_arm(esmt_dp *dp, esmt_model *m) {
  if (!dp) return ESMT_OK;
  esmt_status st = need_host_grads(m);
  if (st) return st;
  dp->grads = m->grads;
  dp->total = m->layout.total;
  dp->nbuckets = (dp->total + dp->bucket_elems - 1) / dp->bucket_elems;
  dp->ready = dp->done = 0;
  dp->error = ESMT_OK;
  dp->error_text[0] = '\0';
  if (pthread_create(&dp->worker, NULL, worker_main, dp) != 0)
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "data parallel: cannot start the all-reduce thread");
  dp->worker_running = 1;
  m->grads_ready = on_grads_ready;
  m->grads_ready_user = dp;
  return ESMT_OK;
}

esmt_status esmt_dp_grads_finish(esmt_dp *dp, esmt_model *m) {
  if (!dp) return ESMT_OK;
  m->grads_ready = NULL;
  m->grads_ready_user = NULL;
  if (!dp->worker_running) return ESMT_OK;
  on_grads_ready(dp, 0); /* whatever backward did not report (e.g. it failed) */
  pthread_join(dp->worker, NULL);
  dp->worker_running = 0;
  if (dp->error) return esmt_fail(dp->error, "%s", dp->error_text);
  return ESMT_OK;
}

void esmt_dp_grads_cancel(esmt_dp *dp, esmt_model *m) {
  if (!dp) return;
  m->grads_ready = NULL;
  m->grads_ready_user = NULL;
  if (!dp->worker_running) return;
  pthread_mutex_lock(&dp->mu);
  if (!dp->error) dp->error = ESMT_ERR_CANCELLED;
  pthread_cond_broadcast(&dp->cv);
  pthread_mutex_unlock(&dp->mu);
  pthread_join(dp->worker, NULL);
  dp->worker_running = 0;
}
