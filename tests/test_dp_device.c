/* SPDX-License-Identifier: MIT */
/* The core's device path of data parallelism (dp_device.c) without a GPU:
 * fake_dp_backend is the cpu ops as a multi-device backend with
 * device (non host-addressable) memory whose all-reduce is a TCP
 * communicator of its own. With 2 fork()ed ranks:
 *  - the id/init/event/all-reduce calls come in the right order, on the
 *    right streams, in F32 buckets that cover the gradients top-down, at
 *    several points of backward (overlap);
 *  - the weights equal, bit for bit, those of the cpu backend's TCP path,
 *    also with ZeRO-1 through the comm group's reduce_scatter/allgather;
 *  - a killed rank stops the other with an error naming it, and the
 *    device communicator is aborted;
 * and in one process: world size 1 forced by ESMTRAIN_FORCE_DP runs the
 * same calls and equals a run without data parallelism; a table without
 * the comm ops is refused with a message, and so is dist.zero 1 on a table
 * without reduce_scatter/allgather. */
#define _GNU_SOURCE
#include "test_util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint.h"
#include "context.h"
#include "dp_group.h"
#include "fake_dp_backend.h"
#include "mem_source.h"
#include "rank_runner.h"
#include "trainer.h"

enum { STEPS = 4, BUCKET_BYTES = 4096 };
enum { MODE_TCP, MODE_FAKE, MODE_FAKE_FORCED, MODE_NONE };

static char g_dir[256];
static int g_job;

typedef struct run_spec {
  int rank, world, mode;
  int die_at;                /* > 0: SIGKILL after that update */
  const char *weights_out, *report_out;
  int zero;                  /* dist.zero */
} run_spec;


static void read_text(const char *path, char *buf, size_t cap) {
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = '\0';
  fclose(f);
}

static esmt_status attach_dp(esmt_trainer *t, const run_spec *s) {
  esmt_dp *dp = NULL;
  esmt_status st;
  if (s->mode == MODE_FAKE_FORCED) {
    setenv("ESMTRAIN_FORCE_DP", "1", 1);
    st = esmt_dp_create_from_env(BUCKET_BYTES, 0, ESMT_COMM_AUTO, &dp);
  } else {
    char rdv[512];
    snprintf(rdv, sizeof rdv, "%s/rdv-%d", g_dir, g_job);
    esmt_comm_options co = {s->rank, s->world, NULL, 0, rdv, (uint64_t)g_job + 1, 20.0};
    esmt_comm *comm = NULL;
    st = esmt_comm_create(&comm, &co);
    if (!st) st = esmt_dp_create(comm, BUCKET_BYTES, &dp);
  }
  if (!st && !dp) st = esmt_fail(ESMT_ERR_INTERNAL, "no data-parallel group");
  if (!st) esmt_dp_set_timeout(dp, 20);
  if (!st) esmt_dp_set_zero(dp, s->zero);
  if (!st) st = esmt_trainer_set_dp(t, dp);
  if (!st && esmt_dp_on_device(dp) != (s->mode != MODE_TCP))
    st = esmt_fail(ESMT_ERR_INTERNAL, "on_device is %d in mode %d", esmt_dp_on_device(dp), s->mode);
  return st;
}

/* One process's run; returns its status. */
static esmt_status run(const run_spec *s) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 1;
  esmt_context *ctx = NULL;
  if (esmt_context_create(&o, &ctx)) return ESMT_ERR_INTERNAL;
  const esmt_backend_entry *real = ctx->backend;
  esmt_backend_entry fake = *real;
  const int faked = s->mode == MODE_FAKE || s->mode == MODE_FAKE_FORCED;
  if (faked) {
    fake.ops = fake_dp_ops(real->ops, g_dir);
    ctx->backend = &fake;
  }
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2; c.hidden_size = 32; c.num_heads = 2; c.max_positions = 64;
  esmt_model *m = NULL;
  esmt_status st = esmt_model_create(ctx, &c, 7, &m);
  esmt_trainer *t = NULL;
  mem_source ms = {.rows = 2, .offset = s->rank, .stride = s->world};
  esmt_batch_source src = mem_source_as_source(&ms);
  if (!st) {
    fake_dp_watch(m->mem.grads, m->layout.total);
    esmt_trainer_options to = ESMT_TRAINER_OPTIONS_INIT;
    esmt_schedule to_sched = ESMT_SCHEDULE_INIT;
    to.schedule = &to_sched;
    to_sched.peak_lr = 1e-3;
    to_sched.warmup_steps = 2;
    to_sched.total_steps = 20;
    to.log_every = 0;
    to.max_steps = STEPS;
    st = esmt_trainer_create(m, &to, &src, &t);
  }
  if (!st && s->mode != MODE_NONE) st = attach_dp(t, s);
  while (!st && esmt_trainer_step_count(t) < STEPS) {
    esmt_train_metrics mt = {.struct_size = sizeof mt};
    st = esmt_trainer_step(t, &mt);
    if (!st && s->die_at && esmt_trainer_step_count(t) == s->die_at) raise(SIGKILL);
  }
  char report[1024];
  if (st) {
    snprintf(report, sizeof report, "error: %s", esmt_last_error());
  } else if (faked) {
    int groups = 0;
    fake_dp_expect_zero(s->zero);
    const char *p = fake_dp_check(s->rank, s->world, m->layout.total, BUCKET_BYTES / 4, STEPS,
                                  &groups);
    if (p) snprintf(report, sizeof report, "problem: %s", p);
    else snprintf(report, sizeof report, "ok groups=%d peer_checks=%d moments=%llu", groups,
                  fake_dp_peer_checks(), (unsigned long long)(m->mem.opt_hi - m->mem.opt_lo));
  } else {
    snprintf(report, sizeof report, "ok");
  }
  if (faked) { /* was the device communicator aborted? */
    int n;
    const fake_call *calls = fake_dp_calls(&n);
    for (int i = 0; i < n; i++)
      if (calls[i].kind == FAKE_ABORT) {
        strncat(report, " [comm_release(abort)]", sizeof report - strlen(report) - 1);
        break;
      }
  }
  if (s->report_out) write_text(s->report_out, report);
  if (!st && s->weights_out) write_weights(m, s->weights_out);
  esmt_trainer_destroy(t);
  esmt_model_destroy(m);
  ctx->backend = real;
  esmt_context_destroy(ctx);
  return st;
}

/* Run each spec in its own process; statuses (or 128 + signal) out. */
static esmt_status run_any(const void *spec) { return run((const run_spec *)spec); }
static void run_ranks(const run_spec *specs, int n, int *status) {
  g_job++;
  run_ranks_forked(run_any, specs, sizeof *specs, n, status);
}


static void assert_same_weights(const char *a, const char *b) {
  size_t na, nb;
  float *x = read_weights(a, &na), *y = read_weights(b, &nb);
  assert_true(na > 0);
  assert_int_equal(na, nb);
  assert_memory_equal(x, y, na * sizeof *x);
  free(x);
  free(y);
}

static void path(char *out, const char *name) { snprintf(out, 512, "%s/%s", g_dir, name); }

static void test_device_path_matches_tcp(void **state) {
  (void)state;
  char wt[2][512], wf[2][512], rep[2][512], text[1024];
  path(wt[0], "tcp0"); path(wt[1], "tcp1");
  path(wf[0], "fake0"); path(wf[1], "fake1");
  path(rep[0], "rep0"); path(rep[1], "rep1");
  run_spec tcp[2] = {{0, 2, MODE_TCP, 0, wt[0], NULL, 0}, {1, 2, MODE_TCP, 0, wt[1], NULL, 0}};
  run_spec dev[2] = {{0, 2, MODE_FAKE, 0, wf[0], rep[0], 0}, {1, 2, MODE_FAKE, 0, wf[1], rep[1], 0}};
  int st[2];
  run_ranks(tcp, 2, st);
  assert_int_equal(st[0] | st[1], 0);
  run_ranks(dev, 2, st);
  for (int r = 0; r < 2; r++) {
    read_text(rep[r], text, sizeof text);
    printf("rank %d (device path): %s\n", r, text);
    assert_int_equal(st[r], 0);
    assert_int_equal(strncmp(text, "ok groups=", 10), 0);
    assert_true(atoi(text + 10) > 1); /* buckets queued at several points of backward */
    assert_null(strstr(text, "peer_checks=0")); /* the backend can ask about the peers */
  }
  assert_same_weights(wt[0], wf[0]); /* the device path sums exactly as TCP does */
  assert_same_weights(wf[0], wf[1]);
  printf("2 ranks: device path == TCP path, bit for bit\n");
}

/* ZeRO-1 through the backend's reduce_scatter/allgather: the
 * buckets are reduce-scattered on the comm stream, the weights all-gathered
 * once per update, each rank holds half the moments, and (2 ranks) the
 * weights equal the TCP path without ZeRO bit for bit. */
static void device_zero(int zero) {
  char wt[2][512], wf[2][512], rep[2][512], text[1024];
  path(wt[0], "ztcp0"); path(wt[1], "ztcp1");
  path(wf[0], "zfake0"); path(wf[1], "zfake1");
  path(rep[0], "zrep0"); path(rep[1], "zrep1");
  run_spec tcp[2] = {{0, 2, MODE_TCP, 0, wt[0], NULL, 0}, {1, 2, MODE_TCP, 0, wt[1], NULL, 0}};
  run_spec dev[2] = {{0, 2, MODE_FAKE, 0, wf[0], rep[0], zero},
                     {1, 2, MODE_FAKE, 0, wf[1], rep[1], zero}};
  int st[2];
  long long held0 = 0;
  run_ranks(tcp, 2, st);
  assert_int_equal(st[0] | st[1], 0);
  run_ranks(dev, 2, st);
  for (int r = 0; r < 2; r++) {
    read_text(rep[r], text, sizeof text);
    printf("rank %d (device path, ZeRO-%d): %s\n", r, zero, text);
    assert_int_equal(st[r], 0);
    assert_int_equal(strncmp(text, "ok groups=", 10), 0);
    assert_true(atoi(text + 10) > 1); /* still overlapped with backward */
    const char *mo = strstr(text, "moments=");
    assert_non_null(mo);
    const long long held = atoll(mo + 8);
    assert_true(held > 0 && held < 27681 / 2 + 64); /* half of the model's 27681 */
    if (r == 0) held0 = held;
  }
  if (zero >= 3) { /* each rank holds its shard of the master: rank 0's [0, held0) */
    size_t n0, n1;
    float *a = read_weights(wf[0], &n0), *b = read_weights(wf[1], &n1);
    assert_int_equal(n0, n1);
    memcpy(a + held0, b + held0, (n0 - (size_t)held0) * sizeof *a);
    FILE *f = fopen(wf[0], "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(a, sizeof *a, n0, f), n0);
    fclose(f);
    free(a);
    free(b);
  } else {
    assert_same_weights(wf[0], wf[1]);
  }
  assert_same_weights(wt[0], wf[0]);
  printf("2 ranks: device path with ZeRO-%d == TCP path without, bit for bit\n", zero);
}

static void test_device_zero1(void **state) {
  (void)state;
  device_zero(1);
}

/* ZeRO-2 with one micro-batch per rank: the same calls as ZeRO-1. */
static void test_device_zero2(void **state) {
  (void)state;
  device_zero(2);
}

/* ZeRO-3: each layer's weights all-gathered into a slot on the comm stream
 * before it runs; the same weights as the TCP path without ZeRO. */
static void test_device_zero3(void **state) {
  (void)state;
  device_zero(3);
}

static void test_forced_world_one(void **state) {
  (void)state;
  char w1[512], w0[512], rep[512], text[1024];
  path(w1, "forced"); path(w0, "plain"); path(rep, "rep-forced");
  run_spec forced = {0, 1, MODE_FAKE_FORCED, 0, w1, rep, 0}, plain = {0, 1, MODE_NONE, 0, w0, NULL, 0};
  int st;
  run_ranks(&forced, 1, &st);
  read_text(rep, text, sizeof text);
  printf("world 1 forced: %s\n", text);
  assert_int_equal(st, 0);
  assert_int_equal(strncmp(text, "ok", 2), 0);
  run_ranks(&plain, 1, &st);
  assert_int_equal(st, 0);
  assert_same_weights(w0, w1);
}

static void test_killed_rank(void **state) {
  (void)state;
  for (int zero = 0; zero <= 1; zero++) { /* plain, and ZeRO-1 */
    char rep[512], text[1024];
    path(rep, zero ? "rep-killed-zero" : "rep-killed");
    run_spec s[2] = {{0, 2, MODE_FAKE, 0, NULL, rep, zero}, {1, 2, MODE_FAKE, 2, NULL, NULL, zero}};
    int st[2];
    run_ranks(s, 2, st);
    read_text(rep, text, sizeof text);
    printf("rank 1 killed after update 2%s: rank 0: %s\n", zero ? " (ZeRO-1)" : "", text);
    assert_int_equal(st[1], 128 + SIGKILL);
    assert_true(st[0] != 0 && st[0] < 128);
    assert_non_null(strstr(text, "rank 1"));
    assert_non_null(strstr(text, "[comm_release(abort)]"));
  }
}

/* A MULTI_DEVICE table with device memory the core cannot use: refused. */
static void test_refuses_old_tables(void **state) {
  (void)state;
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 1;
  esmt_context *ctx = NULL;
  assert_int_equal(esmt_context_create(&o, &ctx), ESMT_OK);
  const esmt_backend_entry *real = ctx->backend;
  esmt_backend_entry fake = *real;
  esmtb_ops *ops = (esmtb_ops *)fake_dp_ops(real->ops, g_dir);
  fake.ops = ops;
  ctx->backend = &fake;
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 1; c.hidden_size = 16; c.num_heads = 2; c.max_positions = 32;
  for (int k = 0; k < 3; k++) {
    fake_dp_ops(real->ops, g_dir);
    if (k == 0) ops->comm_unique_id = NULL; /* a "comm" group without the id */
    if (k == 1) ops->comm_init = NULL;      /* ... or without comm_init */
    if (k == 2) ops->struct_size = (uint32_t)offsetof(esmtb_ops, comm_unique_id);
    esmt_model *m = NULL;
    assert_int_equal(esmt_model_create(ctx, &c, 7, &m), ESMT_OK);
    esmt_comm_options co = {0, 1, NULL, 0, NULL, 1, 5.0};
    esmt_comm *comm = NULL;
    esmt_dp *dp = NULL;
    assert_int_equal(esmt_comm_create(&comm, &co), ESMT_OK);
    assert_int_equal(esmt_dp_create(comm, 0, &dp), ESMT_OK);
    assert_int_equal(esmt_dp_check_start(dp, m), ESMT_ERR_UNSUPPORTED);
    assert_non_null(strstr(esmt_last_error(), "group's communicator ops"));
    int n;
    fake_dp_calls(&n);
    assert_int_equal(n, 0); /* nothing was called */
    esmt_dp_destroy(dp);
    esmt_model_destroy(m);
  }
  ctx->backend = real;
  esmt_context_destroy(ctx);
}

/* dist.zero 1 on a device backend without the ZeRO-1 ops: refused. */
static void test_zero1_needs_abi13(void **state) {
  (void)state;
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 1;
  esmt_context *ctx = NULL;
  assert_int_equal(esmt_context_create(&o, &ctx), ESMT_OK);
  const esmt_backend_entry *real = ctx->backend;
  esmt_backend_entry fake = *real;
  esmtb_ops *ops = (esmtb_ops *)fake_dp_ops(real->ops, g_dir);
  ops->reduce_scatter = NULL; /* a "comm" group without the ZeRO-1 ops */
  ops->allgather = NULL;
  fake.ops = ops;
  ctx->backend = &fake;
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 1; c.hidden_size = 16; c.num_heads = 2; c.max_positions = 32;
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create(ctx, &c, 7, &m), ESMT_OK);
  char rdv[512];
  snprintf(rdv, sizeof rdv, "%s/rdv-z13", g_dir);
  esmt_comm_options co = {0, 1, NULL, 0, rdv, 99, 5.0};
  esmt_comm *comm = NULL;
  esmt_dp *dp = NULL;
  assert_int_equal(esmt_comm_create(&comm, &co), ESMT_OK);
  assert_int_equal(esmt_dp_create(comm, 0, &dp), ESMT_OK);
  esmt_dp_set_zero(dp, 1);
  assert_int_equal(esmt_dp_check_start(dp, m), ESMT_OK);
  assert_int_equal(esmt_dp_zero_start(dp, m), ESMT_ERR_UNSUPPORTED);
  printf("refused: %s\n", esmt_last_error());
  assert_non_null(strstr(esmt_last_error(), "group's reduce_scatter/allgather"));
  assert_int_equal(m->mem.opt_hi - m->mem.opt_lo, m->layout.total); /* nothing was sharded */
  esmt_dp_destroy(dp);
  esmt_model_destroy(m);
  ctx->backend = real;
  esmt_context_destroy(ctx);
}

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "%s", test_mkdtemp());
  unsetenv("ESMTRAIN_FORCE_DP");
  return 0;
}
static int teardown(void **state) {
  (void)state;
  test_rmtree(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_path_matches_tcp),
      cmocka_unit_test(test_device_zero1),
      cmocka_unit_test(test_device_zero2),
      cmocka_unit_test(test_device_zero3),
      cmocka_unit_test(test_forced_world_one),
      cmocka_unit_test(test_killed_rank),
      cmocka_unit_test(test_refuses_old_tables),
      cmocka_unit_test(test_zero1_needs_abi13),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
