// SPDX-License-Identifier: MIT
/* A fine-tuned checkpoint knows itself (docs/formats.md, "task"): the head,
 * its outputs' names, pooling and LoRA saved with the weights, a model
 * reopened from the checkpoint alone predicting what the saved one did,
 * a model of another head refused with both named, and a checkpoint
 * without the record (a plain model's) loading as before. */
#include "test_util.h"
#include "head_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"

enum { B = 2, T = 8, C = 3 };

static const int32_t tokens[B * T] = {0, 5, 6, 7, 8, 9, 10, 2, 0, 11, 12, 13, 2, 1, 1, 1};
static const char *const names[C] = {"cytoplasm", "membrane", "nucleus"};

static esmt_model_config lora_seq_class(void) {
  esmt_model_config c = head_fixture_config(ESMT_HEAD_SEQ_CLASS, C);
  c.pooling = ESMT_POOL_MEAN;
  c.lora_rank = 4;
  c.lora_alpha = 8.0f;
  c.lora_targets = ESMT_LORA_QUERY | ESMT_LORA_VALUE;
  return c;
}

static void head_outputs(esmt_model *m, float *out) {
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tokens;
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_HEAD;
  q.head = out;
  if (esmt_model_infer(m, &b, &q)) fail_msg("%s", esmt_last_error());
}

/* LoRA's B starts at zero: give it values so that the adapters matter. */
static void perturb_adapters(esmt_model *m) { head_fixture_set_lora_b(m, 0.01f, 13, 0.06f); }

static void test_reopened_from_checkpoint_alone(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = lora_seq_class();
  esmt_model *m = NULL, *back = NULL;
  if (esmt_model_create(ctx, &c, 3, &m)) fail_msg("%s", esmt_last_error());
  perturb_adapters(m);
  assert_int_equal(esmt_model_set_label_names(m, names, C), ESMT_OK);
  assert_int_not_equal(esmt_model_set_label_names(m, names, 2), ESMT_OK); /* not num_labels */
  char dir[512];
  snprintf(dir, sizeof dir, "%s/ckpt", test_tmpdir);
  if (esmt_model_save(m, dir, 5)) fail_msg("%s", esmt_last_error());
  if (esmt_model_create_from_checkpoint(ctx, dir, &back)) fail_msg("%s", esmt_last_error());
  esmt_model_config got = ESMT_MODEL_CONFIG_INIT;
  assert_int_equal(esmt_model_get_config(back, &got), ESMT_OK);
  assert_int_equal(got.head, ESMT_HEAD_SEQ_CLASS);
  assert_int_equal(got.num_labels, C);
  assert_int_equal(got.pooling, ESMT_POOL_MEAN);
  assert_int_equal(got.lora_rank, 4);
  assert_true(got.lora_alpha == 8.0f);
  assert_int_equal(got.lora_targets, ESMT_LORA_QUERY | ESMT_LORA_VALUE);
  for (int i = 0; i < C; i++) assert_string_equal(esmt_model_label_name(back, i), names[i]);
  assert_null(esmt_model_label_name(back, C));
  float a[B * C], b[B * C];
  head_outputs(m, a);
  head_outputs(back, b);
  assert_memory_equal(a, b, sizeof a);
  esmt_model_destroy(back);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

static void test_other_head_refused(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = lora_seq_class();
  c.lora_rank = 0;
  esmt_model *m = NULL, *other = NULL;
  if (esmt_model_create(ctx, &c, 3, &m)) fail_msg("%s", esmt_last_error());
  char dir[512];
  snprintf(dir, sizeof dir, "%s/seq", test_tmpdir);
  if (esmt_model_save(m, dir, 1)) fail_msg("%s", esmt_last_error());
  c.head = ESMT_HEAD_MULTILABEL;
  if (esmt_model_create(ctx, &c, 3, &other)) fail_msg("%s", esmt_last_error());
  assert_int_not_equal(esmt_model_load(other, dir, 0, NULL), ESMT_OK);
  assert_non_null(strstr(esmt_last_error(), "head is seq-class with 3 outputs, this model's is "
                                            "multilabel with 3"));
  esmt_model_destroy(other);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

/* A plain model writes no record; its checkpoint reopens as a plain model. */
static void test_plain_checkpoint_unchanged(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = lora_seq_class();
  c.head = ESMT_HEAD_NONE;
  c.num_labels = 0;
  c.lora_rank = 0;
  c.lora_targets = 0;
  esmt_model *m = NULL, *back = NULL;
  if (esmt_model_create(ctx, &c, 3, &m)) fail_msg("%s", esmt_last_error());
  char dir[512], path[600], text[8192];
  snprintf(dir, sizeof dir, "%s/plain", test_tmpdir);
  if (esmt_model_save(m, dir, 1)) fail_msg("%s", esmt_last_error());
  snprintf(path, sizeof path, "%s/state.json", dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  text[fread(text, 1, sizeof text - 1, f)] = '\0';
  fclose(f);
  assert_null(strstr(text, "\"task\""));
  if (esmt_model_create_from_checkpoint(ctx, dir, &back)) fail_msg("%s", esmt_last_error());
  esmt_model_config got = ESMT_MODEL_CONFIG_INIT;
  assert_int_equal(esmt_model_get_config(back, &got), ESMT_OK);
  assert_int_equal(got.head, ESMT_HEAD_NONE);
  assert_null(esmt_model_label_name(back, 0));
  esmt_model_destroy(back);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reopened_from_checkpoint_alone),
      cmocka_unit_test(test_other_head_refused),
      cmocka_unit_test(test_plain_checkpoint_unchanged),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
