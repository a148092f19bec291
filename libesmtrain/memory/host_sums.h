/* SPDX-License-Identifier: MIT */
/* The host's gradient sums off the issuing thread (stream.h): a worker
 * that, for each streamed part in order, waits for the part's copy into a
 * pinned bounce buffer and then adds (or, first in an update, copies) it
 * into the host's fp32 gradients with the host backend's add. The thread
 * that issues the device's work only waits when it must reuse a bounce
 * buffer whose sum is not done yet, or when the sums are read. */
#ifndef ESMTRAIN_HOST_SUMS_H
#define ESMTRAIN_HOST_SUMS_H

#include <pthread.h>

#include "ops_table.h"
#include "internal.h"

#define ESMT_HOST_SUMS_SLOTS 2

typedef struct esmt_host_sum_job {
  esmtb_event *copied;  /* on the copy stream: the bounce buffer holds the part */
  const float *src;     /* the bounce buffer */
  float *dst;           /* the part's host gradients */
  uint64_t n;
  int copy;             /* 1: the part's first contribution since zero_grads */
} esmt_host_sum_job;

typedef struct esmt_host_sums {
  const esmtb_ops *ops, *hops; /* the device's (event_sync) and the host's (add) */
  esmtb_device *dev, *hdev;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  esmt_host_sum_job job[ESMT_HOST_SUMS_SLOTS];
  int pending[ESMT_HOST_SUMS_SLOTS]; /* queued or running, per bounce buffer */
  unsigned long long queued[ESMT_HOST_SUMS_SLOTS], next; /* the order jobs run in */
  int started, stop;
  esmt_status status;   /* the first failure, reported by the next wait */
  char message[512];
} esmt_host_sums;

/* Start the worker: `ops`/`dev` wait for the copies, `hops`/`hdev` add. */
ESMT_HIDDEN esmt_status esmt_host_sums_start(esmt_host_sums *h, const esmtb_ops *ops,
                                             esmtb_device *dev, const esmtb_ops *hops,
                                             esmtb_device *hdev);

/* Queue bounce buffer `slot`'s sum (the slot must be free: esmt_host_sums_wait). */
ESMT_HIDDEN esmt_status esmt_host_sums_push(esmt_host_sums *h, int slot,
                                            const esmt_host_sum_job *job);

/* Wait until bounce buffer `slot` (or every one, slot -1) is summed; the
 * first failure of the worker since the last wait. */
ESMT_HIDDEN esmt_status esmt_host_sums_wait(esmt_host_sums *h, int slot);

/* Stop the worker (after its queued sums); a no-op when not started. */
ESMT_HIDDEN void esmt_host_sums_stop(esmt_host_sums *h);

/* Test mutation switch: the worker reads without waiting for the copy. */
extern int esmt_test_host_sums_drop_copy_wait;

#endif
