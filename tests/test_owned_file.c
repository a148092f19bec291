/* SPDX-License-Identifier: MIT */
/* esmt_owned_file_* (esmtrain.h): a program re-opens only the files it
 * created. Refused, with nothing changed: a file put in place of its own
 * (same name, another file), a symbolic link, a file with another hard
 * link; an existing name is never created over. */
#define _GNU_SOURCE
#include "test_util.h"
#include "cpu_dir_fixture.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"

static void test_create_reopen_refuse(void **state) {
  (void)state;
  char a[600];
  snprintf(a, sizeof a, "%s", path_in("a.npy"));
  int fd = -1, fd2 = -1;
  assert_int_equal(esmt_owned_file_create(a, &fd), ESMT_OK);
  char id[ESMT_OWNED_FILE_ID_CAP];
  esmt_owned_file_id(fd, id, sizeof id);
  assert_true(id[0] != '\0');
  assert_int_equal(write(fd, "x", 1), 1);
  close(fd);
  /* an existing name: never created over */
  assert_int_equal(esmt_owned_file_create(a, &fd2), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "(nothing was changed)"));
  /* its own file: re-opened */
  assert_int_equal(esmt_owned_file_reopen(a, id, &fd), ESMT_OK);
  assert_true(esmt_owned_file_is_own(a, id));
  close(fd);
  /* a hard link to it: not the program's alone */
  assert_int_equal(link(a, path_in("b.npy")), 0);
  assert_int_equal(esmt_owned_file_reopen(a, id, &fd), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "other hard links"));
  assert_false(esmt_owned_file_is_own(a, id));
  assert_int_equal(unlink(path_in("b.npy")), 0);
  /* another file in its place: refused, and left as it is */
  assert_int_equal(rename(a, path_in("old.npy")), 0);
  FILE *f = fopen(a, "w");
  assert_non_null(f);
  fputs("the user's", f);
  fclose(f);
  assert_int_equal(esmt_owned_file_reopen(a, id, &fd), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "not the file this command created"));
  assert_false(esmt_owned_file_is_own(a, id));
  struct stat sb;
  assert_int_equal(stat(a, &sb), 0);
  assert_int_equal(sb.st_size, 10);
  /* a symbolic link to its own file: not followed */
  assert_int_equal(unlink(a), 0);
  assert_int_equal(symlink(path_in("old.npy"), a), 0);
  assert_int_equal(esmt_owned_file_reopen(a, id, &fd), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "symbolic link"));
  assert_false(esmt_owned_file_is_own(a, NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_create_reopen_refuse)};
  return cmocka_run_group_tests(tests, cpu_dir_setup, cpu_dir_teardown);
}
