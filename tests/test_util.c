/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "test_util.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *test_backend_dir(void) {
  const char *d = getenv("ESMT_TEST_BACKEND_DIR");
  if (!d || !*d) fail_msg("ESMT_TEST_BACKEND_DIR is not set (run the tests through ctest)");
  return d;
}

const char *test_src_dir(void) {
  const char *d = getenv("ESMT_TEST_SRC_DIR");
  if (!d || !*d) fail_msg("ESMT_TEST_SRC_DIR is not set (run the tests through ctest)");
  return d;
}

static char g_backend_error[1024];

static void host_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void host_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_backend_error, sizeof g_backend_error, fmt, ap);
  va_end(ap);
}

static void host_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void host_log(int level, const char *fmt, ...) {
  (void)level;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static const esmtb_host g_host = {sizeof(esmtb_host), ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR,
                                  host_set_error, host_log};

const char *test_backend_error(void) { return g_backend_error; }

const esmtb_ops *test_load_backend(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.so", test_backend_dir(), name);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) fail_msg("cannot load %s: %s", path, dlerror());
  esmtb_init_fn init = (esmtb_init_fn)(uintptr_t)dlsym(h, ESMTB_INIT_SYMBOL);
  if (!init) fail_msg("%s has no %s", path, ESMTB_INIT_SYMBOL);
  const esmtb_ops *ops = init(&g_host);
  if (!ops) fail_msg("%s init failed: %s", path, g_backend_error);
  return ops;
}

const char *test_mkdtemp(void) {
  static char dir[256];
  const char *base = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/esmt-test-XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(dir)) fail_msg("mkdtemp failed");
  return dir;
}

void test_rmtree(const char *dir) {
  char cmd[600];
  if (!dir || strncmp(dir, "/tmp/", 5) != 0) return; /* only what we made */
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

char test_tmpdir[256];

int test_tmpdir_setup(void **state) {
  (void)state;
  snprintf(test_tmpdir, sizeof test_tmpdir, "%s", test_mkdtemp());
  return 0;
}

int test_tmpdir_teardown(void **state) {
  (void)state;
  test_rmtree(test_tmpdir);
  return 0;
}
