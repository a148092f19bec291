// SPDX-License-Identifier: MIT
/* esmt_predict_table (finetune.h): the predictions written for a table are
 * esmt_model_infer's head outputs (softmax, sigmoid, values, per-residue
 * argmax) of each protein, the input's columns kept (a quoted field
 * included); an existing output is refused and kept; a model without a
 * head and a table without the sequence column are refused with nothing
 * written. */
#include "test_util.h"
#include "head_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "esmtrain/esmtrain.h"

enum { C = 3, N = 5 };
static const char *const seqs[N] = {"MKVLAG", "ACDEFGHIKLMNPQ", "KKRR", "MSTNPKPQRKTKRNTNRRPQDVKFPGG",
                                    "W"};
static const char *const names[C] = {"H", "E", "C"};

static esmt_model *make(esmt_context *ctx, esmt_head_kind head) {
  esmt_model_config c = head_fixture_config(head, head == ESMT_HEAD_NONE ? 0 : C);
  c.max_positions = 64;
  c.pooling = ESMT_POOL_MEAN;
  esmt_model *m = NULL;
  if (esmt_model_create(ctx, &c, 11, &m)) fail_msg("%s", esmt_last_error());
  if (head != ESMT_HEAD_NONE) assert_int_equal(esmt_model_set_label_names(m, names, C), ESMT_OK);
  return m;
}

/* The head's outputs for protein i alone: [C] or, residue head, [n, C]. */
static void infer_one(esmt_model *m, int i, float *out) {
  esmt_batch_builder *bb = NULL;
  int32_t ids[64];
  const size_t n = strlen(seqs[i]);
  assert_int_equal(esmt_tokenize(seqs[i], n, ids, 64, NULL), ESMT_OK);
  assert_int_equal(esmt_batch_builder_create(ESMT_ROWS_PADDED, 64, &bb), ESMT_OK);
  assert_int_equal(esmt_batch_builder_add(bb, ids, (int)n), ESMT_OK);
  esmt_batch b = ESMT_BATCH_INIT;
  assert_int_equal(esmt_batch_builder_get(bb, &b), ESMT_OK);
  float *h = calloc((size_t)b.seq_len * C, sizeof *h);
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_HEAD;
  q.head = h;
  if (esmt_model_infer(m, &b, &q)) fail_msg("%s", esmt_last_error());
  memcpy(out, h, (size_t)b.seq_len * C * sizeof *h);
  free(h);
  esmt_batch_builder_destroy(bb);
}

static void write_input(const char *path) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "id,note,sequence\n");
  for (int i = 0; i < N; i++) fprintf(f, "p%d,\"a, b\",%s\n", i, seqs[i]);
  fclose(f);
}

static esmt_status predict(esmt_model *m, const char *in, const char *out) {
  esmt_predict_options o = ESMT_PREDICT_OPTIONS_INIT;
  o.input = in;
  o.output = out;
  o.batch_rows = 2; /* several batches, padded rows of unequal length */
  uint64_t rows = 0;
  esmt_status st = esmt_predict_table(m, &o, &rows);
  if (!st) assert_int_equal(rows, N);
  return st;
}

static int argmax(const float *y) {
  int b = 0;
  for (int k = 1; k < C; k++) b = y[k] > y[b] ? k : b;
  return b;
}

static void check_task(esmt_head_kind head) {
  esmt_context *ctx = head_fixture_ctx();
  esmt_model *m = make(ctx, head);
  char in[512], out[512];
  snprintf(in, sizeof in, "%s/in.csv", test_tmpdir);
  snprintf(out, sizeof out, "%s/out-%d.csv", test_tmpdir, (int)head);
  write_input(in);
  if (predict(m, in, out)) fail_msg("%s", esmt_last_error());
  esmt_table_reader *r = NULL;
  assert_int_equal(esmt_table_reader_open(out, ESMT_TABLE_READ_CSV, &r), ESMT_OK);
  const char *const *f = NULL;
  int count = 0, got = 0;
  for (int i = 0; i < N; i++) {
    assert_int_equal(esmt_table_reader_next(r, &f, &count, &got), ESMT_OK);
    assert_int_equal(got, 1);
    assert_string_equal(f[1], "a, b"); /* the input's columns kept */
    assert_string_equal(f[2], seqs[i]);
    float y[64 * C];
    infer_one(m, i, y);
    if (head == ESMT_HEAD_SEQ_CLASS) {
      assert_int_equal(count, 3 + 1 + C);
      assert_string_equal(f[3], names[argmax(y)]);
      double z = 0;
      for (int k = 0; k < C; k++) z += exp((double)y[k] - y[argmax(y)]);
      for (int k = 0; k < C; k++)
        assert_true(fabs(atof(f[4 + k]) - exp((double)y[k] - y[argmax(y)]) / z) < 1e-5);
    } else if (head == ESMT_HEAD_MULTILABEL || head == ESMT_HEAD_REGRESSION) {
      assert_int_equal(count, 3 + C);
      for (int k = 0; k < C; k++) {
        const double want = head == ESMT_HEAD_REGRESSION ? y[k] : 1.0 / (1.0 + exp(-(double)y[k]));
        assert_true(fabs(atof(f[3 + k]) - want) < 1e-5);
      }
    } else {
      assert_int_equal(count, 4);
      const size_t n = strlen(seqs[i]);
      assert_int_equal(strlen(f[3]), n); /* aligned with the sequence */
      for (size_t p = 0; p < n; p++) assert_int_equal(f[3][p], names[argmax(y + (p + 1) * C)][0]);
    }
  }
  assert_int_equal(esmt_table_reader_next(r, &f, &count, &got), ESMT_OK);
  assert_int_equal(got, 0);
  esmt_table_reader_close(r);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

static void test_seq_class(void **s) { (void)s; check_task(ESMT_HEAD_SEQ_CLASS); }
static void test_multilabel(void **s) { (void)s; check_task(ESMT_HEAD_MULTILABEL); }
static void test_regression(void **s) { (void)s; check_task(ESMT_HEAD_REGRESSION); }
static void test_residue_class(void **s) { (void)s; check_task(ESMT_HEAD_RESIDUE_CLASS); }

static void test_refusals(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model *m = make(ctx, ESMT_HEAD_SEQ_CLASS), *plain = make(ctx, ESMT_HEAD_NONE);
  char in[512], out[512], noseq[512];
  snprintf(in, sizeof in, "%s/in.csv", test_tmpdir);
  snprintf(out, sizeof out, "%s/kept.csv", test_tmpdir);
  snprintf(noseq, sizeof noseq, "%s/noseq.csv", test_tmpdir);
  write_input(in);
  FILE *f = fopen(out, "w");
  fputs("the user's file\n", f);
  fclose(f);
  assert_int_equal(predict(m, in, out), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "exists; not replaced"));
  char text[64] = "";
  f = fopen(out, "r");
  assert_non_null(fgets(text, sizeof text, f));
  fclose(f);
  assert_string_equal(text, "the user's file\n");
  snprintf(out, sizeof out, "%s/none.csv", test_tmpdir);
  assert_int_equal(predict(plain, in, out), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "the model has no task head"));
  f = fopen(noseq, "w");
  fputs("seq,label\nMKV,a\n", f);
  fclose(f);
  assert_int_equal(predict(m, noseq, out), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "no sequence column 'sequence' (its columns: seq, "
                                            "label"));
  struct stat sb;
  assert_int_not_equal(stat(out, &sb), 0); /* nothing written */
  esmt_model_destroy(plain);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seq_class),  cmocka_unit_test(test_multilabel),
      cmocka_unit_test(test_regression), cmocka_unit_test(test_residue_class),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
