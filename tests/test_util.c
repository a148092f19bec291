/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "test_util.h"

#include <dirent.h>
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

void test_put_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

int test_dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *de; (de = readdir(d));)
    n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
  closedir(d);
  return n;
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
