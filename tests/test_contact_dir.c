/* SPDX-License-Identifier: MIT */
/* esmt_contact_dir and esmt_remove_dead_temporaries: a directory of maps
 * appears whole under OUT or not at all, never over an existing OUT (an
 * empty directory included), with file names safe and unique; what a dead
 * writer left is removed, and nothing that is not that writer's. */
#define _DEFAULT_SOURCE
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"

static int exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

static void test_whole_or_nothing(void **state) {
  (void)state;
  char out[128], p[256];
  snprintf(out, sizeof out, "%s/maps", test_tmpdir);
  const float map[4] = {0.1f, 0.2f, 0.3f, 0.4f};
  esmt_contact_dir *d = NULL;
  assert_int_equal(esmt_contact_dir_begin(out, NULL, NULL, &d), ESMT_OK);
  assert_int_equal(esmt_contact_dir_add(d, "a/b|c", map, 2), ESMT_OK);
  assert_int_equal(esmt_contact_dir_add(d, "a_b_c", map, 2), ESMT_OK);
  assert_int_equal(esmt_contact_dir_add(d, ".x", map, 2), ESMT_OK);
  assert_int_equal(esmt_contact_dir_add(d, "", map, 2), ESMT_OK);
  assert_int_equal(esmt_contact_dir_add(d, "bad", NULL, 2), ESMT_ERR_INVALID_ARGUMENT);
  assert_false(exists(out)); /* not before finish */
  assert_int_equal(esmt_contact_dir_finish(d), ESMT_OK);
  esmt_contact_dir_close(d);
  assert_int_equal(test_dir_entries(test_tmpdir), 1); /* maps only: no temporary left */
  const char *names[] = {"a_b_c.npy", "a_b_c~2.npy", "_x.npy", "protein.npy", "index.tsv"};
  for (int i = 0; i < 5; i++) {
    snprintf(p, sizeof p, "%s/%s", out, names[i]);
    assert_true(exists(p));
  }
  assert_int_equal(test_dir_entries(out), 5);
  /* 128-byte .npy header, then 4 floats */
  snprintf(p, sizeof p, "%s/a_b_c~2.npy", out);
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  assert_int_equal(sb.st_size, ESMT_NPY_HEADER_BYTES + 4 * 4);

  /* an existing OUT is refused at begin; one that appears meanwhile, even
   * an empty directory, at finish; closing removes the temporary */
  assert_int_equal(esmt_contact_dir_begin(out, NULL, NULL, &d), ESMT_ERR_STATE);
  assert_null(d);
  snprintf(out, sizeof out, "%s/late", test_tmpdir);
  assert_int_equal(esmt_contact_dir_begin(out, NULL, NULL, &d), ESMT_OK);
  assert_int_equal(esmt_contact_dir_add(d, "p", map, 2), ESMT_OK);
  assert_int_equal(mkdir(out, 0755), 0);
  assert_int_equal(esmt_contact_dir_finish(d), ESMT_ERR_STATE);
  esmt_contact_dir_close(d);
  assert_int_equal(test_dir_entries(out), 0);
  assert_int_equal(test_dir_entries(test_tmpdir), 2); /* maps and late */
}

static int g_removed;
static void count_removed(const char *path, void *user) {
  (void)path, (void)user;
  g_removed++;
}

static void test_dead_temporaries(void **state) {
  (void)state;
  char out[128], p[256], q[256];
  snprintf(out, sizeof out, "%s/maps", test_tmpdir);
  /* a dead writer's directory (pid 999999999 runs nowhere), one holding
   * another file, a running process's (pid 1) and a file temporary */
  snprintf(p, sizeof p, "%s.999999999.tmp", out);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(q, sizeof q, "%s/a.npy", p);
  test_put_text(q, "x");
  snprintf(q, sizeof q, "%s/index.tsv", p);
  test_put_text(q, "x");
  snprintf(p, sizeof p, "%s.999999998.tmp", out);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(q, sizeof q, "%s/notes.txt", p);
  test_put_text(q, "mine");
  snprintf(p, sizeof p, "%s.1.tmp", out);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof p, "%s.999999997.other.tmp", out);
  test_put_text(p, "x");
  esmt_contact_dir *d = NULL;
  g_removed = 0;
  assert_int_equal(esmt_contact_dir_begin(out, count_removed, NULL, &d), ESMT_OK);
  assert_int_equal(g_removed, 1); /* the dead writer's directory only */
  snprintf(p, sizeof p, "%s.999999999.tmp", out);
  assert_false(exists(p));
  esmt_contact_dir_close(d);
  assert_int_equal(test_dir_entries(test_tmpdir), 3);
  const char *kinds[] = {"other.tmp"};
  assert_int_equal(esmt_remove_dead_temporaries(out, kinds, 1, NULL, NULL), 1);
  assert_int_equal(test_dir_entries(test_tmpdir), 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_whole_or_nothing, test_tmpdir_setup,
                                      test_tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_dead_temporaries, test_tmpdir_setup,
                                      test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
