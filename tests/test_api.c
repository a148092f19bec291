/* SPDX-License-Identifier: MIT */
/* Public API contract: versions, status strings, errors, misuse. */
#define _DEFAULT_SOURCE
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"

static void test_version(void **state) {
  (void)state;
  int ma = -1, mi = -1, pa = -1;
  int n = esmt_version(&ma, &mi, &pa);
  assert_int_equal(ma, ESMT_VERSION_MAJOR);
  assert_int_equal(mi, ESMT_VERSION_MINOR);
  assert_int_equal(pa, ESMT_VERSION_PATCH);
  assert_int_equal(n, ESMT_VERSION_NUMBER);
  assert_int_equal(esmt_version(NULL, NULL, NULL), ESMT_VERSION_NUMBER);
  char expect[32];
  snprintf(expect, sizeof expect, "%d.%d.%d", ma, mi, pa);
  assert_string_equal(esmt_version_string(), expect);
  /* the SONAME rule (issue #37): before 1.0 only the same 0.x minor */
  assert_true(ESMT_VERSION_COMPATIBLE(ma, mi));
  assert_false(ESMT_VERSION_COMPATIBLE(ESMT_VERSION_MAJOR, ESMT_VERSION_MINOR + 1));
  assert_false(ESMT_VERSION_COMPATIBLE(ESMT_VERSION_MAJOR + 1, ESMT_VERSION_MINOR));
  if (ESMT_VERSION_MAJOR == 0)
    assert_false(ESMT_VERSION_COMPATIBLE(0, ESMT_VERSION_MINOR - 1));
}

/* Context creation leaves the host's environment as it was: the cpu
 * backend sets OPENBLAS_CORETYPE only while OpenBLAS loads (issue #37). */
extern char **environ;
static char *environment_text(void) {
  size_t n = 1;
  for (char **e = environ; *e; e++) n += strlen(*e) + 1;
  char *s = calloc(1, n);
  for (char **e = environ; *e; e++) strcat(strcat(s, *e), "\n");
  return s;
}

static void test_environment_unchanged(void **state) {
  (void)state;
  if (getenv("OPENBLAS_CORETYPE")) unsetenv("OPENBLAS_CORETYPE"); /* the case that set it */
  char *before = environment_text();
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  esmt_context *ctx = NULL;
  assert_int_equal(esmt_context_create(&o, &ctx), ESMT_OK);
  char *after = environment_text();
  assert_string_equal(before, after);
  esmt_context_destroy(ctx);
  free(before);
  free(after);
}

static void test_status_strings(void **state) {
  (void)state;
  assert_string_equal(esmt_status_string(ESMT_OK), "ok");
  for (int s = 1; s <= ESMT_ERR_INTERNAL; s++) {
    const char *m = esmt_status_string(s);
    assert_non_null(m);
    assert_string_not_equal(m, "unknown status");
  }
  assert_string_equal(esmt_status_string(9999), "unknown status");
  assert_string_equal(esmt_status_string(-1), "unknown status");
}

static void test_last_error_never_null(void **state) {
  (void)state;
  esmt_clear_error();
  assert_non_null(esmt_last_error());
  assert_string_equal(esmt_last_error(), "");
}

static void test_null_arguments(void **state) {
  (void)state;
  assert_int_equal(esmt_context_create(NULL, NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "esmt_context_create"));
  assert_int_equal(esmt_context_set_option(NULL, "num_threads", "1"), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "ctx is NULL"));
  int n;
  assert_int_equal(esmt_context_backend_count(NULL, &n), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_cpu_info_query(NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_context_options_init(NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_string_equal(esmt_context_backend_name(NULL), "");
  esmt_context_destroy(NULL); /* accepted */
}

static void test_struct_size_too_small(void **state) {
  (void)state;
  esmt_context_options opts = ESMT_CONTEXT_OPTIONS_INIT;
  opts.struct_size = 8;
  esmt_context *ctx = (esmt_context *)0x1;
  assert_int_equal(esmt_context_create(&opts, &ctx), ESMT_ERR_ABI);
  assert_null(ctx);
  assert_non_null(strstr(esmt_last_error(), "struct_size"));
  esmt_cpu_info cpu = ESMT_CPU_INFO_INIT;
  cpu.struct_size = 4;
  assert_int_equal(esmt_cpu_info_query(&cpu), ESMT_ERR_ABI);
}

static esmt_context *make_ctx(void) {
  esmt_context_options opts;
  assert_int_equal(esmt_context_options_init(&opts), ESMT_OK);
  assert_int_equal(opts.struct_size, sizeof opts);
  opts.backend_path = test_backend_dir();
  esmt_context *ctx = NULL;
  assert_int_equal(esmt_context_create(&opts, &ctx), ESMT_OK);
  assert_non_null(ctx);
  return ctx;
}

static void test_unknown_option(void **state) {
  (void)state;
  esmt_context *ctx = make_ctx();
  assert_int_equal(esmt_context_set_option(ctx, "num_thread", "2"), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "unknown option 'num_thread'"));
  assert_non_null(strstr(esmt_last_error(), "did you mean 'num_threads'"));
  assert_int_equal(esmt_context_set_option(ctx, "num_threads", "two"), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_context_set_option(ctx, "num_threads", "-3"), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_context_set_option(ctx, "num_threads", "2"), ESMT_OK);
  assert_int_equal(esmt_context_set_option(ctx, "log_level", "loud"), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_context_set_option(ctx, "log_level", "debug"), ESMT_OK);
  int64_t lo = -1, hi = -1;
  assert_int_equal(esmt_context_option_bounds(ctx, "num_threads", &lo, &hi), ESMT_OK);
  assert_int_equal(lo, 0);
  assert_true(hi >= 64);
  assert_int_equal(esmt_context_option_bounds(ctx, "bogus", &lo, &hi), ESMT_ERR_INVALID_ARGUMENT);
  esmt_context_destroy(ctx);
}

static void test_negative_threads(void **state) {
  (void)state;
  esmt_context_options opts = ESMT_CONTEXT_OPTIONS_INIT;
  opts.num_threads = -1;
  esmt_context *ctx = NULL;
  assert_int_equal(esmt_context_create(&opts, &ctx), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "num_threads"));
}

static void test_backend_info_misuse(void **state) {
  (void)state;
  esmt_context *ctx = make_ctx();
  esmt_backend_info info;
  info.struct_size = sizeof info;
  assert_int_equal(esmt_context_backend_info(ctx, 99, &info), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_context_backend_info(ctx, -1, &info), ESMT_ERR_INVALID_ARGUMENT);
  info.struct_size = 16;
  assert_int_equal(esmt_context_backend_info(ctx, 0, &info), ESMT_ERR_ABI);
  assert_int_equal(esmt_context_backend_info(ctx, 0, NULL), ESMT_ERR_INVALID_ARGUMENT);
  esmt_context_destroy(ctx);
}

struct log_capture {
  int lines;
  char last[512];
};

static void capture_log(void *user, esmt_log_level level, const char *msg) {
  struct log_capture *c = user;
  (void)level;
  c->lines++;
  snprintf(c->last, sizeof c->last, "%s", msg);
}

static void test_log_callback(void **state) {
  (void)state;
  struct log_capture cap = {0, ""};
  esmt_context_options opts = ESMT_CONTEXT_OPTIONS_INIT;
  opts.backend_path = test_backend_dir();
  opts.log = capture_log;
  opts.log_user = &cap;
  opts.log_level = ESMT_LOG_INFO;
  esmt_context *ctx = NULL;
  assert_int_equal(esmt_context_create(&opts, &ctx), ESMT_OK);
  assert_true(cap.lines >= 1);
  assert_non_null(strstr(cap.last, "chosen"));
  esmt_context_destroy(ctx);
  /* A level above INFO silences the choice message. */
  cap.lines = 0;
  opts.log_level = ESMT_LOG_ERROR;
  assert_int_equal(esmt_context_create(&opts, &ctx), ESMT_OK);
  assert_int_equal(cap.lines, 0);
  esmt_context_destroy(ctx);
}

static void test_cpu_info(void **state) {
  (void)state;
  esmt_cpu_info cpu = ESMT_CPU_INFO_INIT;
  assert_int_equal(esmt_cpu_info_query(&cpu), ESMT_OK);
  assert_true(cpu.logical_cores >= 1);
  assert_int_equal(cpu.struct_size, sizeof cpu);
  /* AVX-512 implies AVX2 on every x86 CPU that has it. */
  if (cpu.avx512f) assert_true(cpu.avx2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_environment_unchanged),
      cmocka_unit_test(test_status_strings),
      cmocka_unit_test(test_last_error_never_null),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_struct_size_too_small),
      cmocka_unit_test(test_unknown_option),
      cmocka_unit_test(test_negative_threads),
      cmocka_unit_test(test_backend_info_misuse),
      cmocka_unit_test(test_log_callback),
      cmocka_unit_test(test_cpu_info),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
