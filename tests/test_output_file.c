/* SPDX-License-Identifier: MIT */
/* esmt_output_file: a new file appears whole, an existing one is replaced
 * only when the caller accepts it, a symbolic link is never followed, and
 * an abort leaves nothing behind. */
#define _DEFAULT_SOURCE
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"

static void expect_text(const char *path, const char *text) {
  char buf[64] = "";
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
  fclose(f);
  assert_string_equal(buf, text);
}

static esmt_status write_file(const char *path, esmt_output_replace_fn fn, const char *text) {
  esmt_output_file *f = NULL;
  esmt_status st = esmt_output_file_begin(path, fn, NULL, &f);
  if (st) return st;
  assert_int_equal(write(esmt_output_file_fd(f), text, strlen(text)), (ssize_t)strlen(text));
  return esmt_output_file_commit(f);
}

static int accept_mine(int fd, void *user, char *why, size_t cap) {
  (void)user;
  char buf[8] = "";
  if (pread(fd, buf, 4, 0) == 4 && !memcmp(buf, "MINE", 4)) return 1;
  snprintf(why, cap, "is not mine");
  return 0;
}

static void test_new_replace_refuse(void **state) {
  (void)state;
  char out[128], link_path[128];
  snprintf(out, sizeof out, "%s/out.txt", test_tmpdir);
  assert_int_equal(write_file(out, NULL, "MINE 1"), ESMT_OK);
  expect_text(out, "MINE 1");
  assert_int_equal(write_file(out, NULL, "MINE 2"), ESMT_ERR_STATE); /* exists */
  assert_non_null(strstr(esmt_last_error(), "exists; not replaced"));
  assert_int_equal(write_file(out, accept_mine, "MINE 3"), ESMT_OK);
  expect_text(out, "MINE 3");
  test_put_text(out, "the user's");
  assert_int_equal(write_file(out, accept_mine, "MINE 4"), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "is not mine"));
  expect_text(out, "the user's");
  snprintf(link_path, sizeof link_path, "%s/link.txt", test_tmpdir);
  assert_int_equal(symlink("out.txt", link_path), 0);
  assert_int_equal(write_file(link_path, accept_mine, "MINE 5"), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "symbolic link"));
  expect_text(out, "the user's");
  assert_int_equal(test_dir_entries(test_tmpdir), 2); /* out.txt and link.txt: no temporary left */
}

static void test_abort_leaves_nothing(void **state) {
  (void)state;
  char out[128];
  snprintf(out, sizeof out, "%s/new.txt", test_tmpdir);
  esmt_output_file *f = NULL;
  assert_int_equal(esmt_output_file_begin(out, NULL, NULL, &f), ESMT_OK);
  assert_int_equal(access(esmt_output_file_temp_path(f), F_OK), 0);
  esmt_output_file_abort(f);
  assert_int_equal(test_dir_entries(test_tmpdir), 0);
  assert_int_equal(esmt_output_file_commit(NULL), ESMT_ERR_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_new_replace_refuse, test_tmpdir_setup,
                                      test_tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_abort_leaves_nothing, test_tmpdir_setup,
                                      test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
