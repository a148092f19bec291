/* SPDX-License-Identifier: MIT */
/* Allocation failure injection: the k-th malloc/calloc/realloc made by
 * libesmtrain fails, for every k over a whole cycle (context, ingest,
 * model, loader, trainer steps, checkpoint save and resume). Each run, in
 * a forked child, must either succeed or return an error: no crash, no
 * abort, (under ASan) no leak. Calls are intercepted with -Wl,--wrap, so
 * the library's own allocations fail, not libc's or OpenBLAS's. */
#define _GNU_SOURCE
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);

static long g_count, g_fail_at = -1;

static int should_fail(void) { return ++g_count == g_fail_at; }
void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { return should_fail() ? NULL : __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }

static char g_dir[256];

/* A context on the build's cpu backend, one thread. */
static esmt_status cpu_context(esmt_context **ctx) {
  esmt_context_options co = ESMT_CONTEXT_OPTIONS_INIT;
  co.backend_path = test_backend_dir();
  co.backend = "cpu";
  co.num_threads = 1;
  return esmt_context_create(&co, ctx);
}

/* The cycle; returns the first failing status (0 when all succeeded). */
static esmt_status cycle(void) {
  char fa[512], data[512], run[512];
  snprintf(fa, sizeof fa, "%s/p.fa", g_dir);
  snprintf(data, sizeof data, "%s/data-%d", g_dir, (int)getpid());
  snprintf(run, sizeof run, "%s/run-%d", g_dir, (int)getpid());
  esmt_status st;
  esmt_context *ctx = NULL;
  if ((st = cpu_context(&ctx))) return st;
  esmt_ingest_options io = ESMT_INGEST_OPTIONS_INIT;
  const char *in[] = {fa};
  io.inputs = in;
  io.n_inputs = 1;
  io.output_dir = data;
  io.valid_fraction = 0.2;
  esmt_config *cfg = NULL;
  esmt_trainer *t = NULL, *t2 = NULL;
  if (!(st = esmt_ingest(&io, NULL)) && !(st = esmt_config_create(&cfg))) {
    const char *sets[] = {"data.train_dir", data,   "model.num_layers", "1",   "model.hidden_size",
                          "16",             "model.num_heads", "2", "model.ffn_size", "32",
                          "data.max_len",   "64",   "data.tokens_per_batch", "256",
                          "train.max_steps", "2",  "schedule.warmup_steps", "1",
                          "train.eval_every", "1", "train.out_dir", run, "train.log_every", "1"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0] && !st; i += 2)
      st = esmt_config_set(cfg, sets[i], sets[i + 1]);
    if (!st) st = esmt_trainer_create_from_config(ctx, cfg, NULL, &t);
    if (!st) st = esmt_trainer_run(t);
    esmt_trainer_destroy(t); /* it holds the run until then: one writer per run */
    t = NULL;
    if (!st) st = esmt_trainer_create_from_config(ctx, cfg, NULL, &t2);
    if (!st) st = esmt_trainer_resume(t2, run);
  }
  esmt_trainer_destroy(t2);
  esmt_trainer_destroy(t);
  esmt_config_destroy(cfg);
  esmt_context_destroy(ctx);
  return st;
}

static void test_every_allocation_fails_once(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "%s", test_mkdtemp());
  char fa[512];
  snprintf(fa, sizeof fa, "%s/p.fa", g_dir);
  FILE *f = fopen(fa, "w");
  for (int r = 0; r < 40; r++) {
    fprintf(f, ">s%d\n", r);
    for (int i = 0; i < 20 + r; i++) fputc("ACDEFGHIKLMNPQRSTVWY"[(r * 7 + i) % 20], f);
    fputc('\n', f);
  }
  fclose(f);
  /* Load the backends here once (they stay loaded: RTLD_NODELETE), so that
   * the forked children do not each map and relocate the GPU backends'
   * libraries again (that was most of this test's time). */
  {
    esmt_context *ctx = NULL;
    assert_int_equal(cpu_context(&ctx), ESMT_OK);
    esmt_context_destroy(ctx);
  }
  /* count the allocations of one clean cycle */
  g_count = 0;
  g_fail_at = -1;
  pid_t pid = fork();
  if (pid == 0) {
    esmt_status st = cycle();
    if (st) fprintf(stderr, "clean cycle failed: %s\n", esmt_last_error());
    printf("allocations=%ld\n", g_count);
    fflush(stdout);
    exit(st ? 3 : (int)(g_count > 250000 ? 4 : 0));
  }
  int wst = 0;
  waitpid(pid, &wst, 0);
  assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
  /* the child printed its count; measure it again here for the loop */
  long total = 0;
  {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    if (pid == 0) {
      close(fds[0]);
      cycle();
      if (write(fds[1], &g_count, sizeof g_count) < 0) _exit(1);
      _exit(0);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &total, sizeof total), (ssize_t)sizeof total);
    close(fds[0]);
    waitpid(pid, &wst, 0);
  }
  long failures_returned = 0, successes = 0;
  for (long k = 1; k <= total; k++) {
    pid = fork();
    if (pid == 0) {
      g_count = 0;
      g_fail_at = k;
      esmt_status st = cycle();
      exit(st ? 10 : 0); /* exit(), so LeakSanitizer checks the child */
    }
    waitpid(pid, &wst, 0);
    if (!WIFEXITED(wst) || (WEXITSTATUS(wst) != 0 && WEXITSTATUS(wst) != 10))
      fail_msg("failing allocation %ld of %ld: the child %s %d", k, total,
               WIFSIGNALED(wst) ? "died of signal" : "exited with", WIFSIGNALED(wst) ? WTERMSIG(wst) : WEXITSTATUS(wst));
    if (WEXITSTATUS(wst) == 10) failures_returned++;
    else successes++;
  }
  print_message("%ld allocations in the cycle; failing each: %ld clean errors, %ld runs that "
                "still succeeded (the allocation was optional), 0 crashes or leaks\n", total,
                failures_returned, successes);
  assert_true(failures_returned > total / 2);
  test_rmtree(g_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_allocation_fails_once)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
