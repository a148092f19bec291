/* SPDX-License-Identifier: MIT */
/* Output directories through the public API (issue #16): ingest and export
 * into a directory the user made keep its inode and mode, on success and on
 * failure; a failure removes the parent directories it made and nothing
 * else; export's overwrite replaces only an earlier export (the marker,
 * nothing foreign), never a directory it did not write; a temporary left by
 * a killed process of ours is cleaned up. */
#define _GNU_SOURCE
#include "test_util.h"
#include "cpu_dir_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"

static int exists(const char *dir, const char *name) {
  char p[700];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

/* Entries of dir but "." and "..". */
static int entries(const char *dir) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  assert_non_null(p);
  assert_int_equal(fscanf(p, "%d", &n), 1);
  pclose(p);
  return n;
}

static esmt_status ingest(const char *fasta, const char *out) {
  const char *in[] = {fasta};
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  o.inputs = in;
  o.n_inputs = 1;
  o.output_dir = out;
  return esmt_ingest(&o, NULL);
}

static void test_ingest_into_user_dir(void **state) {
  (void)state;
  const char *good = path_in("good.fa"), *bad = path_in("bad.fa"), *mine = path_in("mine");
  write_text(good, ">a\nMKVLAGGHH\n>b\nKKLLAAGG\n");
  write_text(bad, ">a\nMK12\n");
  assert_int_equal(mkdir(mine, 0700), 0);
  struct stat before, after;
  assert_int_equal(stat(mine, &before), 0);
  /* a failure leaves it there, empty, same inode and mode */
  assert_int_equal(ingest(bad, mine), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "not an amino-acid letter"));
  assert_int_equal(stat(mine, &after), 0);
  assert_int_equal(after.st_ino, before.st_ino);
  assert_int_equal(after.st_mode & 07777, 0700);
  assert_int_equal(entries(mine), 0);
  /* success fills it: still the same directory with its mode */
  assert_int_equal(ingest(good, mine), ESMT_OK);
  assert_int_equal(stat(mine, &after), 0);
  assert_int_equal(after.st_ino, before.st_ino);
  assert_int_equal(after.st_mode & 07777, 0700);
  assert_true(exists(mine, "manifest.json"));
  assert_true(exists(mine, "train-00000.shard"));
  assert_int_equal(entries(mine), 2); /* no temporary left */
  /* now a dataset: refused, untouched */
  assert_int_equal(ingest(good, mine), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "not empty"));
  assert_int_equal(entries(mine), 2);
}

static void test_ingest_failure_removes_only_its_parents(void **state) {
  (void)state;
  const char *bad = path_in("bad2.fa");
  write_text(bad, "");
  assert_int_equal(mkdir(path_in("have"), 0755), 0);
  assert_int_equal(ingest(bad, path_in("have/new1/new2/data")), ESMT_ERR_FORMAT);
  assert_false(exists(g_dir, "have/new1")); /* made by ingest: removed */
  assert_true(exists(g_dir, "have"));       /* there before: kept */
  assert_int_equal(entries(path_in("have")), 0);
}

static esmt_model *small(void) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 1; c.hidden_size = 16; c.num_heads = 2; c.max_positions = 32;
  esmt_model *m = NULL;
  if (esmt_model_create(g_ctx, &c, 1, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return m;
}

static void test_export_overwrite_rules(void **state) {
  (void)state;
  esmt_model *m = small();
  /* into an empty directory the user made: its mode stays */
  const char *mine = path_in("hf-mine");
  assert_int_equal(mkdir(mine, 0750), 0);
  assert_int_equal(esmt_model_export_hf(m, mine, 0), ESMT_OK);
  struct stat sb;
  assert_int_equal(stat(mine, &sb), 0);
  assert_int_equal(sb.st_mode & 07777, 0750);
  assert_true(exists(mine, ".esmtrain-export"));
  assert_int_equal(entries(mine), 6);
  /* an earlier export: replaced with overwrite, refused without */
  assert_int_equal(esmt_model_export_hf(m, mine, 0), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "holds an earlier export"));
  assert_int_equal(esmt_model_export_hf(m, mine, 1), ESMT_OK);
  assert_int_equal(entries(mine), 6);
  /* a file the user put there: overwrite refused, the file kept */
  char notes[700];
  snprintf(notes, sizeof notes, "%s/notes.txt", mine);
  write_text(notes, "mine");
  assert_int_equal(esmt_model_export_hf(m, mine, 1), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "holds 'notes.txt'"));
  assert_true(exists(mine, "notes.txt"));
  assert_true(exists(mine, "model.safetensors"));
  /* a directory esmtrain did not write (no marker): never replaced */
  const char *other = path_in("other");
  assert_int_equal(mkdir(other, 0755), 0);
  snprintf(notes, sizeof notes, "%s/config.json", other);
  write_text(notes, "{}");
  assert_int_equal(esmt_model_export_hf(m, other, 1), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "not something esmtrain wrote"));
  assert_int_equal(entries(other), 1);
  esmt_model_destroy(m);
}

static void test_stale_temporary_of_dead_process(void **state) {
  (void)state;
  const char *mine = path_in("stale"), *good = path_in("good3.fa");
  write_text(good, ">a\nMKVLAGGHH\n");
  assert_int_equal(mkdir(mine, 0755), 0);
  /* pid 2147483646 (above any pid_max) is not running: a killed ingest left it */
  char tmp[700];
  snprintf(tmp, sizeof tmp, "%s/.esmtrain-tmp-2147483646-0", mine);
  assert_int_equal(mkdir(tmp, 0755), 0);
  assert_int_equal(ingest(good, mine), ESMT_OK);
  assert_int_equal(access(tmp, F_OK), -1);
  assert_int_equal(entries(mine), 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ingest_into_user_dir),
      cmocka_unit_test(test_ingest_failure_removes_only_its_parents),
      cmocka_unit_test(test_export_overwrite_rules),
      cmocka_unit_test(test_stale_temporary_of_dead_process),
  };
  return cmocka_run_group_tests(tests, cpu_dir_setup, cpu_dir_teardown);
}
