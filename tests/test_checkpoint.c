/* SPDX-License-Identifier: MIT */
/* Checkpoints: exact round trip, retention, resolution, and refusal of
 * truncated, corrupted, foreign, misshaped and non-finite files with the
 * previous checkpoint still loadable. */
#define _GNU_SOURCE
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "checkpoint.h"

static esmt_context *g_ctx;

static int setup(void **state) {
  (void)state;
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 1;
  return esmt_context_create(&o, &g_ctx) == ESMT_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  esmt_context_destroy(g_ctx);
  return 0;
}

static esmt_model *make(int d, uint64_t seed) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2; c.hidden_size = d; c.num_heads = 2; c.max_positions = 32;
  esmt_model *m = NULL;
  if (esmt_model_create(g_ctx, &c, seed, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return m;
}

static float *snapshot(esmt_model *m, float *dev_buf) {
  float *h = malloc(m->layout.total * sizeof *h);
  assert_int_equal(esmt_flat_download(m, h, dev_buf), ESMT_OK);
  return h;
}

/* Put recognisable values into the moments. */
static void fill_moments(esmt_model *m) {
  float *h = malloc(m->layout.total * sizeof *h);
  for (uint64_t i = 0; i < m->layout.total; i++) h[i] = (float)i * 1e-6f;
  assert_int_equal(esmt_flat_upload(m, h, m->mem.moment1), ESMT_OK);
  for (uint64_t i = 0; i < m->layout.total; i++) h[i] = (float)i * 2e-6f;
  assert_int_equal(esmt_flat_upload(m, h, m->mem.moment2), ESMT_OK);
  free(h);
}

static void test_round_trip(void **state) {
  (void)state;
  const char *run = test_mkdtemp();
  esmt_model *a = make(32, 1), *b = make(32, 2);
  fill_moments(a);
  char saved[4096];
  assert_int_equal(esmt_checkpoint_save(a, run, 7, "{\"step\":7,\"rng\":[1,2]}", 3, saved,
                                        sizeof saved), ESMT_OK);
  assert_non_null(strstr(saved, "checkpoints/step-00000007"));
  char resolved[4096];
  assert_int_equal(esmt_checkpoint_resolve(run, resolved, sizeof resolved), ESMT_OK);
  assert_string_equal(resolved, saved);
  char *tj = NULL;
  assert_int_equal(esmt_checkpoint_load(b, resolved, 1, &tj), ESMT_OK);
  assert_non_null(strstr(tj, "\"rng\""));
  free(tj);
  float *pa = snapshot(a, a->mem.master), *pb = snapshot(b, b->mem.master);
  assert_memory_equal(pa, pb, a->layout.total * sizeof *pa);
  float *ma = snapshot(a, a->mem.moment2), *mb = snapshot(b, b->mem.moment2);
  assert_memory_equal(ma, mb, a->layout.total * sizeof *ma);
  free(pa); free(pb); free(ma); free(mb);
  esmt_model_destroy(a);
  esmt_model_destroy(b);
  test_rmtree(run);
}

static int exists(const char *run, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/checkpoints/%s", run, name);
  return access(p, F_OK) == 0;
}

static void test_retention(void **state) {
  (void)state;
  const char *run = test_mkdtemp();
  esmt_model *a = make(32, 1);
  char saved[4096];
  assert_int_equal(esmt_checkpoint_save(a, run, 1, "{}", 2, saved, sizeof saved), ESMT_OK);
  assert_int_equal(esmt_checkpoint_mark_best(run, saved), ESMT_OK);
  for (int s = 2; s <= 5; s++)
    assert_int_equal(esmt_checkpoint_save(a, run, s, "{}", 2, NULL, 0), ESMT_OK);
  assert_true(exists(run, "step-00000001")); /* best survives */
  assert_false(exists(run, "step-00000002"));
  assert_false(exists(run, "step-00000003"));
  assert_true(exists(run, "step-00000004"));
  assert_true(exists(run, "step-00000005"));
  /* Re-saving an existing step replaces it atomically. */
  assert_int_equal(esmt_checkpoint_save(a, run, 5, "{\"again\":1}", 2, NULL, 0), ESMT_OK);
  char *tj = NULL;
  char dir[4096];
  assert_int_equal(esmt_checkpoint_resolve(run, dir, sizeof dir), ESMT_OK);
  assert_int_equal(esmt_checkpoint_load(a, dir, 1, &tj), ESMT_OK);
  assert_non_null(strstr(tj, "again"));
  free(tj);
  esmt_model_destroy(a);
  test_rmtree(run);
}

static void truncate_file(const char *path, long keep) {
  assert_int_equal(truncate(path, keep), 0);
}

static void flip_byte(const char *path, long off) {
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, off, SEEK_SET);
  int c = fgetc(f);
  fseek(f, off, SEEK_SET);
  fputc(c ^ 0x5a, f);
  fclose(f);
}

static void test_corruption_refused(void **state) {
  (void)state;
  const char *run = test_mkdtemp();
  esmt_model *a = make(32, 1), *b = make(32, 2);
  char good[4096], bad[4096], p[4200];
  assert_int_equal(esmt_checkpoint_save(a, run, 1, "{}", 0, good, sizeof good), ESMT_OK);
  assert_int_equal(esmt_checkpoint_save(a, run, 2, "{}", 0, bad, sizeof bad), ESMT_OK);
  float *before = snapshot(b, b->mem.master);

  snprintf(p, sizeof p, "%s/model.safetensors", bad);
  truncate_file(p, 1000);
  assert_int_equal(esmt_checkpoint_load(b, bad, 1, NULL), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "truncated"));
  assert_non_null(strstr(esmt_last_error(), "model.safetensors"));
  float *after = snapshot(b, b->mem.master);
  assert_memory_equal(before, after, b->layout.total * sizeof *before); /* untouched */
  free(after);
  /* The previous checkpoint still loads. */
  assert_int_equal(esmt_checkpoint_load(b, good, 1, NULL), ESMT_OK);

  assert_int_equal(esmt_checkpoint_save(a, run, 3, "{}", 0, bad, sizeof bad), ESMT_OK);
  snprintf(p, sizeof p, "%s/optimizer.safetensors", bad);
  flip_byte(p, 5000);
  assert_int_equal(esmt_checkpoint_load(b, bad, 1, NULL), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "checksum mismatch"));

  snprintf(p, sizeof p, "%s/state.json", good);
  FILE *f = fopen(p, "w");
  fputs("{\"format\":\"something-else\",\"version\":1}", f);
  fclose(f);
  assert_int_equal(esmt_checkpoint_load(b, good, 1, NULL), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "not an esmtrain checkpoint"));
  f = fopen(p, "w");
  fputs("{not json", f);
  fclose(f);
  assert_int_equal(esmt_checkpoint_load(b, good, 1, NULL), ESMT_ERR_FORMAT);
  free(before);
  esmt_model_destroy(a);
  esmt_model_destroy(b);
  test_rmtree(run);
}

static void test_shape_mismatch_and_nan(void **state) {
  (void)state;
  const char *run = test_mkdtemp();
  esmt_model *a = make(32, 1), *wide = make(64, 1);
  char dir[4096], p[4200];
  assert_int_equal(esmt_checkpoint_save(a, run, 1, "{}", 0, dir, sizeof dir), ESMT_OK);
  assert_int_equal(esmt_checkpoint_load(wide, dir, 1, NULL), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "esm.embeddings.word_embeddings.weight"));
  assert_non_null(strstr(esmt_last_error(), "shape"));
  /* A NaN in the weights is refused with the tensor's name. */
  float nan_vals[32];
  for (int i = 0; i < 32; i++) nan_vals[i] = i == 3 ? NAN : 1.0f;
  assert_int_equal(esmt_model_write_tensor(a, "lm_head.dense.bias", ESMT_BUF_PARAMS, nan_vals, 32),
                   ESMT_OK);
  snprintf(p, sizeof p, "%s/w.safetensors", run);
  assert_int_equal(esmt_weights_save(a, p, NULL), ESMT_OK);
  assert_int_equal(esmt_weights_load(wide, p), ESMT_ERR_FORMAT); /* shape first */
  esmt_model *c = make(32, 5);
  assert_int_equal(esmt_weights_load(c, p), ESMT_ERR_NUMERIC);
  assert_non_null(strstr(esmt_last_error(), "lm_head.dense.bias"));
  esmt_model_destroy(c);
  esmt_model_destroy(a);
  esmt_model_destroy(wide);
  test_rmtree(run);
}

static void test_unwritable_and_missing(void **state) {
  (void)state;
  const char *run = test_mkdtemp();
  esmt_model *a = make(32, 1);
  char blocker[4096], dir[4096];
  snprintf(blocker, sizeof blocker, "%s/file", run);
  FILE *f = fopen(blocker, "w");
  fputs("x", f);
  fclose(f);
  /* A run directory below a regular file cannot be created. */
  snprintf(dir, sizeof dir, "%s/file/run", run);
  assert_int_equal(esmt_checkpoint_save(a, dir, 1, "{}", 0, NULL, 0), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "saving checkpoint"));
  assert_int_equal(esmt_checkpoint_resolve(run, dir, sizeof dir), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "checkpoints/latest"));
  esmt_model_destroy(a);
  test_rmtree(run);
}

/* Disk full while saving (RLIMIT_FSIZE in a child): a clear error, no
 * half-written checkpoint, `latest` untouched, the previous one loads. */
static void test_disk_full_during_save(void **state) {
  (void)state;
  const char *run = test_mkdtemp();
  char rd[256];
  snprintf(rd, sizeof rd, "%s", run);
  esmt_model *a = make(64, 1);
  char good[4096];
  assert_int_equal(esmt_checkpoint_save(a, rd, 1, "{}", 0, good, sizeof good), ESMT_OK);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {20000, 20000};
    setrlimit(RLIMIT_FSIZE, &rl);
    esmt_status st = esmt_checkpoint_save(a, rd, 2, "{}", 0, NULL, 0);
    int ok = st == ESMT_ERR_IO && strstr(esmt_last_error(), "write failed") != NULL;
    if (!ok) fprintf(stderr, "child: %d %s\n", st, esmt_last_error());
    esmt_model_destroy(a); /* the child's copy, for the leak checkers */
    _exit(ok ? 0 : 1);
  }
  int wst = 0;
  waitpid(pid, &wst, 0);
  assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
  char p[4200];
  snprintf(p, sizeof p, "%s/checkpoints/step-00000002", rd);
  assert_int_not_equal(access(p, F_OK), 0);
  char latest[4096];
  assert_int_equal(esmt_checkpoint_resolve(rd, latest, sizeof latest), ESMT_OK);
  assert_string_equal(latest, good);
  esmt_model *b = make(64, 9);
  assert_int_equal(esmt_checkpoint_load(b, latest, 1, NULL), ESMT_OK);
  esmt_model_destroy(b);
  esmt_model_destroy(a);
  test_rmtree(rd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_retention),
      cmocka_unit_test(test_corruption_refused),
      cmocka_unit_test(test_shape_mismatch_and_nan),
      cmocka_unit_test(test_unwritable_and_missing),
      cmocka_unit_test(test_disk_full_during_save),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
