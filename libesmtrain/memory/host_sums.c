/* SPDX-License-Identifier: MIT */
/* The host's gradient sums on a worker thread (host_sums.h). Jobs run in
 * the order they were pushed: the sums of one part across micro-batches
 * must add in the same order as the resident run's for the results to
 * match bit for bit where they can. */
#define _POSIX_C_SOURCE 200809L
#include "host_sums.h"

#include <stdio.h>
#include <string.h>

int esmt_test_host_sums_drop_copy_wait;

/* The job to run next: the pending one queued first; -1 if none. */
static int next_job(const esmt_host_sums *h) {
  int best = -1;
  for (int i = 0; i < ESMT_HOST_SUMS_SLOTS; i++)
    if (h->pending[i] && (best < 0 || h->queued[i] < h->queued[best])) best = i;
  return best;
}

static esmt_status run_job(esmt_host_sums *h, const esmt_host_sum_job *j) {
  esmtb_status bs = esmt_test_host_sums_drop_copy_wait ? 0 : h->ops->event_sync(h->dev, j->copied);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "stream: gradient copy: ");
  if (j->copy) {
    memcpy(j->dst, j->src, (size_t)j->n * sizeof(float));
    return ESMT_OK;
  }
  /* the host optimizer's add: every host thread, vectorised, one rounding each */
  const esmtb_add_args a = {sizeof a, ESMTB_F32, (size_t)j->n, j->dst, j->src, j->dst};
  bs = h->hops->add(h->hdev, &a, NULL);
  return bs ? esmt_fail_prefix((esmt_status)bs, "stream: host gradient sum: ") : ESMT_OK;
}

static void *worker(void *arg) {
  esmt_host_sums *h = arg;
  pthread_mutex_lock(&h->mu);
  for (;;) {
    int i;
    while ((i = next_job(h)) < 0 && !h->stop) pthread_cond_wait(&h->cv, &h->mu);
    if (i < 0) break; /* stopped with nothing queued */
    const esmt_host_sum_job j = h->job[i];
    pthread_mutex_unlock(&h->mu);
    const esmt_status st = run_job(h, &j);
    pthread_mutex_lock(&h->mu);
    if (st && !h->status) {
      h->status = st;
      snprintf(h->message, sizeof h->message, "%s", esmt_last_error());
    }
    h->pending[i] = 0;
    pthread_cond_broadcast(&h->cv);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

esmt_status esmt_host_sums_start(esmt_host_sums *h, const esmtb_ops *ops, esmtb_device *dev,
                                 const esmtb_ops *hops, esmtb_device *hdev) {
  memset(h, 0, sizeof *h);
  h->ops = ops, h->dev = dev, h->hops = hops, h->hdev = hdev;
  if (pthread_mutex_init(&h->mu, NULL))
    return esmt_fail(ESMT_ERR_INTERNAL, "stream: cannot create the host sums' lock");
  if (pthread_cond_init(&h->cv, NULL)) {
    pthread_mutex_destroy(&h->mu);
    return esmt_fail(ESMT_ERR_INTERNAL, "stream: cannot create the host sums' condition");
  }
  if (pthread_create(&h->thread, NULL, worker, h)) {
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "stream: cannot start the host sums' thread");
  }
  h->started = 1;
  return ESMT_OK;
}

esmt_status esmt_host_sums_push(esmt_host_sums *h, int slot, const esmt_host_sum_job *job) {
  if (slot < 0 || slot >= ESMT_HOST_SUMS_SLOTS)
    return esmt_fail(ESMT_ERR_INTERNAL, "stream: host sums slot %d", slot);
  pthread_mutex_lock(&h->mu);
  const int busy = h->pending[slot];
  if (!busy) {
    h->job[slot] = *job;
    h->pending[slot] = 1;
    h->queued[slot] = h->next++;
    pthread_cond_broadcast(&h->cv);
  }
  pthread_mutex_unlock(&h->mu);
  return busy ? esmt_fail(ESMT_ERR_INTERNAL, "stream: bounce buffer %d reused before its sum",
                          slot)
              : ESMT_OK;
}

esmt_status esmt_host_sums_wait(esmt_host_sums *h, int slot) {
  if (!h->started) return ESMT_OK;
  pthread_mutex_lock(&h->mu);
  for (;;) {
    int busy = 0;
    for (int i = 0; i < ESMT_HOST_SUMS_SLOTS; i++) busy |= (slot < 0 || slot == i) && h->pending[i];
    if (!busy) break;
    pthread_cond_wait(&h->cv, &h->mu);
  }
  const esmt_status st = h->status;
  char msg[sizeof h->message];
  memcpy(msg, h->message, sizeof msg);
  h->status = ESMT_OK;
  pthread_mutex_unlock(&h->mu);
  return st ? esmt_fail(st, "%s", msg) : ESMT_OK;
}

void esmt_host_sums_stop(esmt_host_sums *h) {
  if (!h->started) return;
  pthread_mutex_lock(&h->mu);
  h->stop = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  pthread_join(h->thread, NULL);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
  h->started = 0;
}
