/* SPDX-License-Identifier: MIT */
/* An embedder's strings through the installed library (issue #37):
 * esmt_tokenize with its unknown-letter policy, then esmt_embed of a batch
 * holding a protein longer than the model's window, truncated and in
 * fair-esm windows. Each protein's result is the same alone and batched
 * with the others, and the windowed long protein is not its truncation.
 * Public API only (built against an installed prefix). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "cpu_dir_fixture.h"

#include "esmtrain/esmtrain.h"

#define N 3

static esmt_model *tiny_model(void) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.num_heads = 4;
  c.max_positions = 40; /* a window of 38 residues */
  c.precision = ESMT_PRECISION_FP32;
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create(g_ctx, &c, 5, &m), ESMT_OK);
  return m;
}

static void test_tokenize_policy(void **state) {
  (void)state;
  int32_t ids[8];
  uint64_t unknown = 0;
  /* J is no letter of the alphabet and '*' a stop: both <unk>; z is Z */
  assert_int_equal(esmt_tokenize("MKJz*", 5, ids, 8, &unknown), ESMT_OK);
  assert_int_equal(unknown, 2);
  int32_t z = 0;
  assert_int_equal(esmt_tokenize("Z", 1, &z, 1, NULL), ESMT_OK);
  assert_int_equal(ids[3], z);
  assert_int_equal(ids[2], ids[4]);
  /* anything else is refused, naming its position */
  assert_int_equal(esmt_tokenize("MK1", 3, ids, 8, NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "3"));
}

/* Strings of N proteins, the last longer than the window. */
static void make_proteins(char **text, int32_t **ids, int64_t *len) {
  static const char *const base[N] = {"MKTAYIAKQRQISFVKSHFSRQ", "GLSDGEWQQVLNVWGKVEAD", NULL};
  for (int i = 0; i < N; i++) {
    const int n = base[i] ? (int)strlen(base[i]) : 3 * 38 + 7;
    text[i] = malloc((size_t)n + 1);
    ids[i] = malloc((size_t)n * sizeof *ids[i]);
    assert_non_null(text[i]);
    assert_non_null(ids[i]);
    for (int k = 0; k < n; k++) text[i][k] = base[i] ? base[i][k] : "ACDEFGHIKLMNPQRSTVWY"[(k * 7) % 20];
    text[i][n] = 0;
    len[i] = n;
    assert_int_equal(esmt_tokenize(text[i], (size_t)n, ids[i], (size_t)n, NULL), ESMT_OK);
  }
}

static double max_diff(const float *a, const float *b, int n) {
  double d = 0;
  for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
  return d;
}

static void test_embed_long_protein(void **state) {
  (void)state;
  esmt_model *m = tiny_model();
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  assert_int_equal(esmt_model_get_config(m, &cfg), ESMT_OK);
  const int window = cfg.max_positions - 2, d = cfg.hidden_size;
  char *text[N];
  int32_t *ids[N];
  int64_t len[N];
  make_proteins(text, ids, len);
  assert_true(len[N - 1] > window);
  esmt_embed_request rq = ESMT_EMBED_REQUEST_INIT;
  esmt_embedding trunc[N], win[N], alone = ESMT_EMBEDDING_INIT;
  for (int i = 0; i < N; i++) trunc[i] = win[i] = alone;
  rq.long_policy = ESMT_LONG_TRUNCATE;
  assert_int_equal(esmt_embed(m, &rq, N, (const int32_t *const *)ids, len, trunc), ESMT_OK);
  rq.long_policy = ESMT_LONG_WINDOWS;
  assert_int_equal(esmt_embed(m, &rq, N, (const int32_t *const *)ids, len, win), ESMT_OK);
  assert_int_equal(trunc[N - 1].kept, window);
  assert_int_equal(trunc[N - 1].pieces, 1);
  assert_int_equal(win[N - 1].kept, len[N - 1]);
  assert_true(win[N - 1].pieces > 1);
  assert_true(max_diff(trunc[N - 1].mean, win[N - 1].mean, d) > 1e-4);
  for (int i = 0; i < N; i++) {
    for (int c = 0; c < d; c++) assert_true(isfinite(win[i].mean[c]));
    /* one protein alone: the same as in the batch */
    assert_int_equal(esmt_embed(m, &rq, 1, (const int32_t *const *)&ids[i], &len[i], &alone),
                     ESMT_OK);
    assert_true(max_diff(alone.mean, win[i].mean, d) < 1e-5);
    if (i < N - 1) assert_true(max_diff(trunc[i].mean, win[i].mean, d) < 1e-6);
    esmt_embedding_release(&alone, 1);
    free(text[i]);
    free(ids[i]);
  }
  esmt_embedding_release(trunc, N);
  esmt_embedding_release(win, N);
  esmt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tokenize_policy),
      cmocka_unit_test(test_embed_long_protein),
  };
  return cmocka_run_group_tests(tests, cpu_dir_setup, cpu_dir_teardown);
}
