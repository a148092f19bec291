/* SPDX-License-Identifier: MIT */
/* The per-op profile ($ESMT_PROFILE, model/model_profile.c): with events,
 * every op's role is a row with its calls and, for GEMMs, a rate; every op
 * is timed, and the ops' time and the time between them add up to the span
 * they cover, across more ops than one read-back holds; synchronised
 * timing keeps the same rows; a backend without timing events falls back
 * to synchronised timing with a warning.
 *   test_profile                    on cpu.so
 *   ESMT_TEST_PROFILE_BACKEND=ampere_bf16 test_profile [--mutant sync]
 *                                   on a GPU backend (the emulated suite);
 *                                   --mutant reads the events back without
 *                                   waiting for them, which must fail */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "micro_batch_fixture.h"
#include "model.h"
#include "registry.h"

enum { B = 2, T = 16, LAYERS = 2, STEPS = 8 };

static esmt_model *create(void) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = LAYERS;
  c.hidden_size = 32;
  c.num_heads = 2; /* head dim 16: the GPU kernels' smallest */
  c.max_positions = 64;
  c.precision = ESMT_PRECISION_FP32;
  esmt_model *m = NULL;
  if (esmt_model_create(g_fixture_ctx, &c, 5, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return m;
}

/* STEPS API steps on one micro-batch under ESMT_PROFILE=mode; the log of
 * the model's life (its profile is logged at destroy) stays in g_log. */
static void profiled_steps(const char *mode) {
  setenv("ESMT_PROFILE", mode, 1);
  esmt_model *m = create();
  unsetenv("ESMT_PROFILE");
  int32_t tok[B * T], lab[B * T];
  esmt_micro_batch mb;
  fill_micro_batch(&mb, B, T, 0, 0, tok, lab);
  g_log[0] = '\0';
  double norm = 0;
  fixture_api_steps(m, &mb, STEPS, &norm);
  esmt_model_destroy(m);
}

/* The calls of the row `key` in the profile logged with `how`, or -1. */
static long row_calls(const char *how, const char *key) {
  char want[160];
  snprintf(want, sizeof want, "profile (%s): %s ", how, key);
  const char *p = strstr(g_log, want);
  if (!p) return -1;
  const char *c = strstr(p, " calls");
  const char *nl = strchr(p, '\n');
  if (!c || (nl && c > nl)) return -1;
  while (c > p && c[-1] == ' ') c--;
  while (c > p && c[-1] >= '0' && c[-1] <= '9') c--;
  return strtol(c, NULL, 10);
}

static void test_events_rows_and_sums(void **state) {
  (void)state;
  profiled_steps("events");
  const char *untimed = strstr(g_log, "ops untimed");
  if (untimed) {
    while (untimed > g_log && untimed[-1] != '\n') untimed--;
    fail_msg("every op must be timed: %.100s", untimed);
  }
  /* 8 steps x 2 layers, one forward GEMM per role and layer; the backward
   * has two (input and weight gradients) */
  assert_int_equal(row_calls("events", "forward: FFN up / gemm"), STEPS * LAYERS);
  assert_int_equal(row_calls("events", "backward: FFN down / gemm"), 2 * STEPS * LAYERS);
  assert_int_equal(row_calls("events", "forward: attention / attention_forward"), STEPS * LAYERS);
  assert_int_equal(row_calls("events", "update / optimizer step"), STEPS);
  assert_non_null(strstr(g_log, "TFLOP/s"));
  /* more ops than one read-back holds (ESMT_PROFILE_PENDING = 512) */
  const char *sum = strstr(g_log, "profile (events): ops ");
  assert_non_null(sum);
  double ops = -1, between = -1, span = -1;
  assert_int_equal(sscanf(sum, "profile (events): ops %lf ms, between ops %lf ms, span %lf ms",
                          &ops, &between, &span), 3);
  long total = 0;
  for (const char *p = g_log; (p = strstr(p, " calls")); p++) {
    const char *q = p;
    while (q > g_log && q[-1] == ' ') q--;
    while (q > g_log && q[-1] >= '0' && q[-1] <= '9') q--;
    total += strtol(q, NULL, 10);
  }
  assert_true(total > 512);
  assert_true(ops > 0 && between >= 0);
  /* one stream: within each read-back the span is exactly the ops plus
   * the gaps between them */
  assert_true(ops + between <= span + 0.01 && ops + between >= span - 0.01);
}

static void test_synchronised_rows(void **state) {
  (void)state;
  profiled_steps("1");
  assert_int_equal(row_calls("synchronised", "forward: FFN up / gemm"), STEPS * LAYERS);
  assert_int_equal(row_calls("synchronised", "update / optimizer step"), STEPS);
  assert_null(strstr(g_log, "profile (events)"));
}

static void test_off_by_default(void **state) {
  (void)state;
  profiled_steps("0");
  assert_null(strstr(g_log, "profile ("));
}

/* A backend without timing events: synchronised timing, with a warning. */
static void test_backend_without_timing(void **state) {
  (void)state;
  const esmt_backend_entry *saved = g_fixture_ctx->backend;
  static esmt_backend_entry entry;
  static esmtb_ops ops;
  entry = *saved;
  ops = *saved->ops;
  ops.event_elapsed = NULL;
  entry.ops = &ops;
  g_fixture_ctx->backend = &entry;
  g_log[0] = '\0';
  setenv("ESMT_PROFILE", "events", 1);
  esmt_model *m = create();
  unsetenv("ESMT_PROFILE");
  assert_non_null(strstr(g_log, "cannot time its work with events"));
  esmt_model_destroy(m);
  g_fixture_ctx->backend = saved;
}

/* The fixture's context, or one on $ESMT_TEST_PROFILE_BACKEND (from
 * $ESMT_TEST_BACKEND_DIR) logging into g_log the same way. */
static void capture(void *user, esmt_log_level level, const char *msg) {
  (void)user;
  (void)level;
  size_t n = strlen(g_log);
  snprintf(g_log + n, sizeof g_log - n, "%s\n", msg);
}

static int setup(void **state) {
  const char *backend = getenv("ESMT_TEST_PROFILE_BACKEND");
  if (!backend || !*backend) return fixture_group_setup(state);
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend = backend;
  o.backend_path = getenv("ESMT_TEST_BACKEND_DIR");
  o.log = capture;
  o.log_level = ESMT_LOG_INFO;
  o.num_threads = 2;
  if (esmt_context_create(&o, &g_fixture_ctx) != ESMT_OK) {
    fprintf(stderr, "%s\n", esmt_last_error());
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  const char *backend = getenv("ESMT_TEST_PROFILE_BACKEND");
  if (!backend || !*backend) return fixture_group_teardown(state);
  esmt_context_destroy(g_fixture_ctx);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--mutant") && !strcmp(argv[2], "sync"))
    esmt_test_profile_drop_sync = 1;
  else if (argc != 1) {
    fprintf(stderr, "usage: test_profile [--mutant sync]\n");
    return 2;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_events_rows_and_sums),
      cmocka_unit_test(test_synchronised_rows),
      cmocka_unit_test(test_off_by_default),
      cmocka_unit_test(test_backend_without_timing),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
