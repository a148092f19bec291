/* SPDX-License-Identifier: MIT */
/* The host's gradient sums on their worker thread (memory/host_sums.c),
 * over a fake device whose "copy" lands only when the event is waited
 * for: the sums must wait for each copy, run in push order, report a
 * failed wait at the next wait with its message, and refuse a bounce
 * buffer pushed again before its sum is done. Run under ThreadSanitizer
 * with the thread suites (ctest -L threads). */
#include "test_util.h"

#include <stdatomic.h>
#include <string.h>

#include "host_sums.h"

enum { N = 64 };

/* A fake event: the copy it stands for moves `from` into `to` when the
 * event is waited for, as a device copy lands by the time its event is. */
struct esmtb_event {
  const float *from;
  float *to;
  int fail;
  atomic_int waited;
};

static esmtb_status fake_event_sync(esmtb_device *dev, esmtb_event *e) {
  (void)dev;
  if (e->fail) return ESMTB_ERR_INTERNAL;
  memcpy(e->to, e->from, N * sizeof(float));
  atomic_fetch_add(&e->waited, 1);
  return ESMTB_OK;
}

static esmtb_status fake_add(esmtb_device *dev, const esmtb_add_args *a, esmtb_stream *s) {
  (void)dev, (void)s;
  const float *x = a->a, *y = a->b;
  float *out = a->y;
  for (size_t i = 0; i < a->n; i++) out[i] = x[i] + y[i];
  return ESMTB_OK;
}

static esmtb_ops fake_ops(void) {
  esmtb_ops o;
  memset(&o, 0, sizeof o);
  o.event_sync = fake_event_sync;
  o.add = fake_add;
  return o;
}

/* Three micro-batches of one part through two bounce buffers: the sum is
 * exact only when every copy was waited for before its add, in order. */
static void test_sums_wait_and_order(void **state) {
  (void)state;
  const esmtb_ops ops = fake_ops();
  esmt_host_sums h;
  assert_int_equal(esmt_host_sums_start(&h, &ops, NULL, &ops, NULL), ESMT_OK);
  float grads[N], bounce[2][N], device[3][N];
  struct esmtb_event ev[3];
  for (int m = 0; m < 3; m++) {
    for (int i = 0; i < N; i++) device[m][i] = (float)(m + 1) * 0.5f + (float)i;
    memset(&ev[m], 0, sizeof ev[m]);
    ev[m].from = device[m];
  }
  memset(bounce, 0xff, sizeof bounce); /* NaN until a copy lands */
  for (int m = 0; m < 3; m++) {
    const int slot = m % 2;
    assert_int_equal(esmt_host_sums_wait(&h, slot), ESMT_OK);
    ev[m].to = bounce[slot];
    const esmt_host_sum_job job = {&ev[m], bounce[slot], grads, N, m == 0};
    assert_int_equal(esmt_host_sums_push(&h, slot, &job), ESMT_OK);
  }
  assert_int_equal(esmt_host_sums_wait(&h, -1), ESMT_OK);
  for (int m = 0; m < 3; m++) assert_int_equal(atomic_load(&ev[m].waited), 1);
  for (int i = 0; i < N; i++) assert_true(grads[i] == (0.5f + i) + (1.0f + i) + (1.5f + i));
  esmt_host_sums_stop(&h);
}

/* A copy that fails: the next wait returns its status and message, once. */
static void test_failure_reported_once(void **state) {
  (void)state;
  const esmtb_ops ops = fake_ops();
  esmt_host_sums h;
  assert_int_equal(esmt_host_sums_start(&h, &ops, NULL, &ops, NULL), ESMT_OK);
  float grads[N] = {0}, bounce[N] = {0};
  struct esmtb_event ev;
  memset(&ev, 0, sizeof ev);
  ev.fail = 1;
  const esmt_host_sum_job job = {&ev, bounce, grads, N, 1};
  assert_int_equal(esmt_host_sums_push(&h, 0, &job), ESMT_OK);
  assert_int_equal(esmt_host_sums_wait(&h, -1), ESMT_ERR_INTERNAL);
  assert_non_null(strstr(esmt_last_error(), "gradient copy"));
  assert_int_equal(esmt_host_sums_wait(&h, -1), ESMT_OK);
  esmt_host_sums_stop(&h);
  esmt_host_sums_stop(&h); /* a second stop is a no-op */
}

/* A bounce buffer pushed again before its sum: refused, not overwritten. */
static void test_busy_slot_refused(void **state) {
  (void)state;
  const esmtb_ops ops = fake_ops();
  esmt_host_sums h;
  assert_int_equal(esmt_host_sums_start(&h, &ops, NULL, &ops, NULL), ESMT_OK);
  float grads[N] = {0}, bounce[N] = {0}, device[N];
  for (int i = 0; i < N; i++) device[i] = 1.0f;
  struct esmtb_event ev;
  memset(&ev, 0, sizeof ev);
  ev.from = device, ev.to = bounce;
  const esmt_host_sum_job job = {&ev, bounce, grads, N, 1};
  /* hold the worker so the first job stays pending */
  pthread_mutex_lock(&h.mu);
  h.pending[0] = 1;
  h.job[0] = job;
  h.queued[0] = h.next++;
  pthread_mutex_unlock(&h.mu);
  assert_int_equal(esmt_host_sums_push(&h, 0, &job), ESMT_ERR_INTERNAL);
  assert_int_equal(esmt_host_sums_push(&h, 2, &job), ESMT_ERR_INTERNAL);
  pthread_mutex_lock(&h.mu);
  pthread_cond_broadcast(&h.cv); /* let it run */
  pthread_mutex_unlock(&h.mu);
  assert_int_equal(esmt_host_sums_wait(&h, 0), ESMT_OK);
  for (int i = 0; i < N; i++) assert_true(grads[i] == 1.0f);
  esmt_host_sums_stop(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sums_wait_and_order),
      cmocka_unit_test(test_failure_reported_once),
      cmocka_unit_test(test_busy_slot_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
