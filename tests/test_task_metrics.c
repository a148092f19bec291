/* SPDX-License-Identifier: MIT */
/* esmt_task_metrics_compute and esmt_task_metric_value (finetune.h) on
 * small fixed inputs whose figures are worked out by hand below and agree
 * with scikit-learn (f1_score macro, roc_auc_score, average_precision_score;
 * the first AUROC/AP case is the example of their documentation) and
 * scipy (pearsonr, spearmanr). */
#include "esmtrain/esmtrain.h"
#include "test_util.h"

#include <math.h>
#include <string.h>

static esmt_task_metrics compute(int task, int K, const float *out, const int32_t *cls,
                                 const float *t, uint64_t n) {
  esmt_task_metrics m = ESMT_TASK_METRICS_INIT;
  assert_int_equal(esmt_task_metrics_compute(task, K, out, cls, t, n, &m), ESMT_OK);
  return m;
}

/* One-hot logits of the predicted classes. */
static void one_hot(const int *pred, int n, int K, float *out) {
  memset(out, 0, sizeof(float) * (size_t)n * K);
  for (int i = 0; i < n; i++) out[i * K + pred[i]] = 1.0f;
}

static void test_seq_class(void **state) {
  (void)state;
  /* y 0 0 1 1 2 2 (and an ignored row), predicted 0 1 1 1 2 0: 4 of 6
   * right; F1 = 2tp / (2tp + fp + fn): class 0 2/4, class 1 4/5, class 2
   * 2/3, macro 0.65556 */
  const int pred[7] = {0, 1, 1, 1, 2, 0, 2};
  const int32_t y[7] = {0, 0, 1, 1, 2, 2, ESMT_LABEL_IGNORE};
  float out[7 * 3];
  one_hot(pred, 7, 3, out);
  esmt_task_metrics m = compute(ESMT_HEAD_SEQ_CLASS, 3, out, y, NULL, 7);
  assert_int_equal(m.count, 6);
  assert_float_equal(m.accuracy, 4.0 / 6, 1e-12);
  assert_float_equal(m.macro_f1, (0.5 + 0.8 + 2.0 / 3) / 3, 1e-12);
  assert_true(isnan(m.auroc) && isnan(m.pearson) && isnan(m.rmse));
  /* a class only predicted counts (F1 0), one in neither does not:
   * f1_score([0, 0], [0, 3], average="macro") = (2/3 + 0) / 2 */
  const int pred2[2] = {0, 3};
  const int32_t y2[2] = {0, 0};
  float out2[2 * 4];
  one_hot(pred2, 2, 4, out2);
  m = compute(ESMT_HEAD_RESIDUE_CLASS, 4, out2, y2, NULL, 2);
  assert_float_equal(m.accuracy, 0.5, 1e-12);
  assert_float_equal(m.macro_f1, 1.0 / 3, 1e-12);
  /* a class outside the head is the caller's error */
  const int32_t bad[1] = {3};
  esmt_task_metrics e = ESMT_TASK_METRICS_INIT;
  assert_int_equal(esmt_task_metrics_compute(ESMT_HEAD_SEQ_CLASS, 3, out, bad, NULL, 1, &e),
                   ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "outside 0..2"));
}

static void test_multilabel(void **state) {
  (void)state;
  /* label 0: scores in the order of sklearn's example (0.1 0.4 0.35 0.8,
   * truth 0 0 1 1): AUROC 0.75, AP 0.8333. label 1: a tie between a
   * positive and a negative (0 0 -1 2, truth 1 0 0 1): ranks 2.5 2.5 1 4,
   * AUROC (6.5 - 3) / 4 = 0.875; AP: at 2 recall 1/2 precision 1, at 0
   * recall 1 precision 2/3, so 0.8333. label 2 has no positive: left out
   * of the averages. Accuracy at logit 0: 3/4, 3/4, 4/4 = 10/12. */
  const float out[4 * 3] = {-2.2f, 0, -1, -0.4f, 0, -1, -0.6f, -1, -1, 1.4f, 2, -1};
  const float t[4 * 3] = {0, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0};
  esmt_task_metrics m = compute(ESMT_HEAD_MULTILABEL, 3, out, NULL, t, 4);
  assert_int_equal(m.count, 4);
  assert_float_equal(m.auroc, (0.75 + 0.875) / 2, 1e-12);
  assert_float_equal(m.auprc, 5.0 / 6, 1e-12);
  assert_float_equal(m.accuracy, 10.0 / 12, 1e-12);
  assert_true(isnan(m.macro_f1) && isnan(m.spearman));
}

static void test_regression(void **state) {
  (void)state;
  /* target 0: predicted 1 2 3 4 5 for 2 1 4 3 5: Pearson = Spearman =
   * 8 / sqrt(10 * 10) = 0.8. target 1: predicted 1 2 2 3 4 for 1 2 3 4 5:
   * Pearson 7 / sqrt(52); Spearman on ranks 1 2.5 2.5 4 5: 9.5 / sqrt(95).
   * RMSE: squared errors 4 + 3 over 10 values. */
  const float out[5 * 2] = {1, 1, 2, 2, 3, 2, 4, 3, 5, 4};
  const float t[5 * 2] = {2, 1, 1, 2, 4, 3, 3, 4, 5, 5};
  esmt_task_metrics m = compute(ESMT_HEAD_REGRESSION, 2, out, NULL, t, 5);
  assert_int_equal(m.count, 5);
  assert_float_equal(m.pearson, (0.8 + 7 / sqrt(52)) / 2, 1e-12);
  assert_float_equal(m.spearman, (0.8 + 9.5 / sqrt(95)) / 2, 1e-12);
  assert_float_equal(m.rmse, sqrt(0.7), 1e-12);
  assert_true(isnan(m.accuracy) && isnan(m.auroc));
}

static void test_metric_by_name(void **state) {
  (void)state;
  esmt_task_metrics m = ESMT_TASK_METRICS_INIT;
  m.macro_f1 = 0.5;
  m.rmse = 2.0;
  double v = 0;
  int higher = -1;
  assert_int_equal(esmt_task_metric_value(&m, 1.25, "macro_f1", &v, &higher), ESMT_OK);
  assert_float_equal(v, 0.5, 0);
  assert_int_equal(higher, 1);
  assert_int_equal(esmt_task_metric_value(&m, 1.25, "rmse", &v, &higher), ESMT_OK);
  assert_float_equal(v, 2.0, 0);
  assert_int_equal(higher, 0);
  assert_int_equal(esmt_task_metric_value(&m, 1.25, "loss", &v, &higher), ESMT_OK);
  assert_float_equal(v, 1.25, 0);
  assert_int_equal(higher, 0);
  assert_int_equal(esmt_task_metric_value(&m, 1.25, "f1", &v, &higher),
                   ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "\"f1\" is no metric"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seq_class), cmocka_unit_test(test_multilabel),
      cmocka_unit_test(test_regression), cmocka_unit_test(test_metric_by_name)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
