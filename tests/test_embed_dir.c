/* SPDX-License-Identifier: MIT */
/* An embedding output directory through the public API alone
 * (esmt_embed_dir, infer.h): a new directory filled and committed in two
 * steps, an interrupted one resumed after its committed proteins (ids
 * checked, the uncommitted rows cut), an identical finished one reported
 * complete, and another request over an unfinished one refused naming
 * what differs with nothing in the directory changed. */
#define _POSIX_C_SOURCE 200809L
#include "cpu_dir_fixture.h"
#include "test_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { D = 16, MAXPOS = 12 };

static esmt_model *g_model;
static const char *const k_ids[] = {"a", "b", "c"};
static const char *const k_seqs[] = {"MKTAYIAKQR", "GLSD", "MKTAYIAKQRQISFVKSHF"};
static const int k_layers[] = {2};

static int setup(void **state) {
  if (cpu_dir_setup(state) || cpu_dir_small_model(D, MAXPOS, &g_model)) return -1;
  write_text(path_in("in.fa"), ">a\nMKTAYIAKQR\n>b\nGLSD\n>c\nMKTAYIAKQRQISFVKSHF\n");
  return 0;
}

static int teardown(void **state) {
  esmt_model_destroy(g_model);
  return cpu_dir_teardown(state);
}

static esmt_embed_dir_options options(const char *out, unsigned include) {
  esmt_embed_dir_options o = ESMT_EMBED_DIR_OPTIONS_INIT;
  o.out = path_in(out);
  o.model = g_model;
  o.model_path = g_dir;
  o.model_kind = "esmtrain";
  o.backend = "cpu";
  o.input = path_in("in.fa");
  o.num_layers = 1;
  o.layers = k_layers;
  o.include = include;
  return o;
}

/* Proteins [first, first + n) embedded and appended. */
static void append(esmt_embed_dir *dir, int first, int n) {
  int32_t ids[3][64];
  const int32_t *res[3];
  int64_t len[3];
  esmt_embedding e[3];
  for (int i = 0; i < n; i++) {
    len[i] = (int64_t)strlen(k_seqs[first + i]);
    assert_int_equal(esmt_tokenize(k_seqs[first + i], (size_t)len[i], ids[i], 64, NULL), 0);
    res[i] = ids[i];
    e[i] = (esmt_embedding)ESMT_EMBEDDING_INIT;
  }
  esmt_embed_request q = ESMT_EMBED_REQUEST_INIT;
  q.num_layers = 1;
  q.layers = k_layers;
  q.per_token = 1;
  assert_int_equal(esmt_embed(g_model, &q, n, res, len, e), ESMT_OK);
  assert_int_equal(esmt_embed_dir_append(dir, n, k_ids + first, e, 0), ESMT_OK);
  esmt_embedding_release(e, n);
}

static esmt_embed_dir_state state_of(esmt_embed_dir *dir, uint64_t *proteins) {
  esmt_embed_dir_status s = ESMT_EMBED_DIR_STATUS_INIT;
  assert_int_equal(esmt_embed_dir_status_get(dir, &s), ESMT_OK);
  if (proteins) *proteins = s.proteins;
  return s.state;
}

static long file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* Names, sizes and modification times of a directory's files, as text. */
static void snapshot(const char *dir, char *out, size_t cap) {
  out[0] = 0;
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));) {
    char path[600];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    assert_int_equal(lstat(path, &sb), 0);
    const size_t n = strlen(out);
    snprintf(out + n, cap - n, "%s:%lld:%lld.%09ld;", e->d_name, (long long)sb.st_size,
             (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
  }
  closedir(d);
}

static void test_new_resume_complete(void **state) {
  (void)state;
  const unsigned inc = ESMT_EMBED_MEAN | ESMT_EMBED_PER_TOKEN;
  esmt_embed_dir_options o = options("out", inc);
  esmt_embed_dir *dir = NULL;
  assert_int_equal(esmt_embed_dir_open(&o, &dir), ESMT_OK);
  assert_int_equal(state_of(dir, NULL), ESMT_EMBED_DIR_NEW);
  assert_int_equal(esmt_embed_dir_begin(dir), ESMT_OK);
  append(dir, 0, 2);
  assert_int_equal(esmt_embed_dir_commit(dir), ESMT_OK);
  append(dir, 2, 1); /* appended, never committed: cut on resume */
  esmt_embed_dir_close(dir);
  assert_int_equal(file_size(path_in("out/lengths.npy")), 128 + 3 * 8);

  dir = NULL;
  uint64_t n = 0;
  assert_int_equal(esmt_embed_dir_open(&o, &dir), ESMT_OK);
  assert_int_equal(state_of(dir, &n), ESMT_EMBED_DIR_RESUME);
  assert_int_equal(n, 2);
  /* the input gives other ids than those committed: refused */
  assert_int_equal(esmt_embed_dir_skip(dir, "a"), ESMT_OK);
  assert_int_equal(esmt_embed_dir_skip(dir, "z"), ESMT_OK);
  assert_int_equal(esmt_embed_dir_begin(dir), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "the input changed"));
  assert_int_equal(esmt_embed_dir_check(dir), ESMT_OK);
  for (int i = 0; i < 2; i++) assert_int_equal(esmt_embed_dir_skip(dir, k_ids[i]), ESMT_OK);
  assert_int_equal(esmt_embed_dir_begin(dir), ESMT_OK);
  assert_int_equal(file_size(path_in("out/lengths.npy")), 128 + 2 * 8);
  append(dir, 2, 1);
  assert_int_equal(esmt_embed_dir_commit(dir), ESMT_OK);
  assert_int_equal(esmt_embed_dir_finish(dir), ESMT_OK);
  esmt_embed_dir_close(dir);
  assert_int_equal(file_size(path_in("out/lengths.npy")), 128 + 3 * 8);
  assert_int_equal(file_size(path_in("out/ids.txt")), 6);
  /* per_tok rows: 10 + 4 + the 10 residues of c's first window */
  assert_int_equal(file_size(path_in("out/per_tok.layer2.npy")), 128 + 24 * D * 4);

  dir = NULL;
  assert_int_equal(esmt_embed_dir_open(&o, &dir), ESMT_OK);
  assert_int_equal(state_of(dir, &n), ESMT_EMBED_DIR_COMPLETE);
  assert_int_equal(n, 3);
  assert_int_equal(esmt_embed_dir_begin(dir), ESMT_ERR_STATE);
  esmt_embed_dir_close(dir);
}

static void test_other_request_refused(void **state) {
  (void)state;
  esmt_embed_dir_options o = options("part", ESMT_EMBED_MEAN);
  esmt_embed_dir *dir = NULL;
  assert_int_equal(esmt_embed_dir_open(&o, &dir), ESMT_OK);
  assert_int_equal(esmt_embed_dir_begin(dir), ESMT_OK);
  append(dir, 0, 1);
  assert_int_equal(esmt_embed_dir_commit(dir), ESMT_OK);
  esmt_embed_dir_close(dir);
  char before[4096], after[4096];
  snapshot(path_in("part"), before, sizeof before);
  esmt_embed_dir_options other = options("part", ESMT_EMBED_CLS);
  dir = NULL;
  assert_int_equal(esmt_embed_dir_open(&other, &dir), ESMT_ERR_STATE);
  assert_null(dir);
  assert_non_null(strstr(esmt_last_error(), "unfinished embed of another request"));
  assert_non_null(strstr(esmt_last_error(), "include: was [\"mean\"], now [\"cls\"]"));
  snapshot(path_in("part"), after, sizeof after);
  assert_string_equal(before, after);
  /* a directory holding a file of another program: refused, nothing changed */
  assert_int_equal(mkdir(path_in("notes"), 0755), 0);
  write_text(path_in("notes/notes.txt"), "mine\n");
  esmt_embed_dir_options foreign = options("notes", ESMT_EMBED_MEAN);
  assert_int_equal(esmt_embed_dir_open(&foreign, &dir), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "holds no embed output"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_new_resume_complete),
      cmocka_unit_test(test_other_request_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
