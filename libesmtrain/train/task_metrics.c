/* SPDX-License-Identifier: MIT */
/* esmt_task_metrics_compute (finetune.h): what a task head's predictions
 * score on validation, with the definitions of scikit-learn and scipy
 * (f1_score macro, roc_auc_score, average_precision_score, pearsonr,
 * spearmanr, RMSE) so that figures compare with a Python pipeline's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

typedef struct scored {
  double value;
  uint64_t index;
} scored;

static int by_value(const void *a, const void *b) {
  const scored *x = a, *y = b;
  if (x->value != y->value) return x->value < y->value ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* 1-based ranks of v[0..n) (stride apart), ties given their mean rank;
 * `sorted` is scratch of n. */
static void average_ranks(const float *v, size_t stride, uint64_t n, scored *sorted,
                          double *rank) {
  for (uint64_t i = 0; i < n; i++) sorted[i] = (scored){v[i * stride], i};
  qsort(sorted, n, sizeof *sorted, by_value);
  for (uint64_t i = 0; i < n;) {
    uint64_t j = i + 1;
    while (j < n && sorted[j].value == sorted[i].value) j++;
    const double mean = 0.5 * (double)(i + 1 + j); /* ranks i+1..j */
    for (uint64_t k = i; k < j; k++) rank[sorted[k].index] = mean;
    i = j;
  }
}

static double pearson_of(const double *x, const double *y, uint64_t n) {
  double mx = 0, my = 0;
  for (uint64_t i = 0; i < n; i++) { mx += x[i]; my += y[i]; }
  mx /= (double)n;
  my /= (double)n;
  double sxy = 0, sxx = 0, syy = 0;
  for (uint64_t i = 0; i < n; i++) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN; /* a constant: undefined */
}

/* Argmax classes: accuracy and macro-F1 over the classes in labels or predictions. */
static esmt_status class_metrics(int K, const float *out, const int32_t *y, uint64_t n,
                                 esmt_task_metrics *m) {
  uint64_t *tp = calloc((size_t)K * 3, sizeof *tp);
  if (!tp) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "task metrics: out of memory");
  uint64_t *fp = tp + K, *fn = fp + K, scored_rows = 0, correct = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (y[i] == ESMT_LABEL_IGNORE) continue;
    if (y[i] < 0 || y[i] >= K) {
      free(tp);
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "task metrics: row %llu has class %d, "
                       "outside 0..%d", (unsigned long long)i, (int)y[i], K - 1);
    }
    const float *z = out + i * (uint64_t)K;
    int best = 0;
    for (int c = 1; c < K; c++) if (z[c] > z[best]) best = c;
    scored_rows++;
    if (best == y[i]) { correct++; tp[best]++; }
    else { fp[best]++; fn[y[i]]++; }
  }
  double f1 = 0;
  int present = 0;
  for (int c = 0; c < K; c++) {
    const uint64_t d = 2 * tp[c] + fp[c] + fn[c];
    if (!d) continue;
    f1 += 2.0 * (double)tp[c] / (double)d;
    present++;
  }
  free(tp);
  m->count = scored_rows;
  m->accuracy = scored_rows ? (double)correct / (double)scored_rows : NAN;
  m->macro_f1 = present ? f1 / present : NAN;
  return ESMT_OK;
}

/* One label's AUROC (Mann-Whitney, ties half) and average precision (the
 * precision at each distinct score, weighted by the recall it adds); NAN
 * when the column lacks positives or negatives. */
static void label_ranking(const float *score, const float *truth, size_t stride, uint64_t n,
                          scored *sorted, double *rank, double *auroc, double *auprc) {
  uint64_t pos = 0;
  for (uint64_t i = 0; i < n; i++) pos += truth[i * stride] > 0.5f;
  *auroc = *auprc = NAN;
  if (pos == 0 || pos == n) return;
  average_ranks(score, stride, n, sorted, rank);
  double rank_sum = 0;
  for (uint64_t i = 0; i < n; i++) if (truth[i * stride] > 0.5f) rank_sum += rank[i];
  const double P = (double)pos, N = (double)(n - pos);
  *auroc = (rank_sum - P * (P + 1) / 2) / (P * N);
  /* sorted ascends: walk it from the top, one distinct score at a time */
  double ap = 0, tp = 0, seen = 0, recall0 = 0;
  for (uint64_t j = n; j > 0;) {
    uint64_t k = j;
    while (k > 0 && sorted[k - 1].value == sorted[j - 1].value) {
      k--;
      tp += truth[sorted[k].index * stride] > 0.5f;
      seen++;
    }
    const double recall = tp / P;
    ap += (recall - recall0) * (tp / seen);
    recall0 = recall;
    j = k;
  }
  *auprc = ap;
}

static esmt_status multilabel_metrics(int K, const float *out, const float *t, uint64_t n,
                                      esmt_task_metrics *m) {
  scored *sorted = malloc(n * sizeof *sorted);
  double *rank = malloc(n * sizeof *rank);
  if (!sorted || !rank) {
    free(sorted);
    free(rank);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "task metrics: out of memory");
  }
  uint64_t correct = 0;
  for (uint64_t i = 0; i < n * (uint64_t)K; i++) correct += (out[i] > 0) == (t[i] > 0.5f);
  double roc = 0, pr = 0;
  int used = 0;
  for (int c = 0; c < K; c++) {
    double a, p;
    label_ranking(out + c, t + c, (size_t)K, n, sorted, rank, &a, &p);
    if (isnan(a)) continue;
    roc += a;
    pr += p;
    used++;
  }
  free(sorted);
  free(rank);
  m->count = n;
  m->accuracy = (double)correct / ((double)n * K);
  m->auroc = used ? roc / used : NAN;
  m->auprc = used ? pr / used : NAN;
  return ESMT_OK;
}

/* Pearson and Spearman per target, averaged; RMSE over every value. */
static esmt_status regression_metrics(int K, const float *out, const float *t, uint64_t n,
                                      esmt_task_metrics *m) {
  double *x = malloc(4 * n * sizeof *x);
  scored *sorted = malloc(n * sizeof *sorted);
  if (!x || !sorted) {
    free(x);
    free(sorted);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "task metrics: out of memory");
  }
  double *y = x + n, *rx = y + n, *ry = rx + n, sq = 0, pearson = 0, spearman = 0;
  for (int c = 0; c < K; c++) {
    for (uint64_t i = 0; i < n; i++) {
      x[i] = out[i * K + c];
      y[i] = t[i * K + c];
      sq += (x[i] - y[i]) * (x[i] - y[i]);
    }
    pearson += pearson_of(x, y, n);
    average_ranks(out + c, (size_t)K, n, sorted, rx);
    average_ranks(t + c, (size_t)K, n, sorted, ry);
    spearman += pearson_of(rx, ry, n);
  }
  free(x);
  free(sorted);
  m->count = n;
  m->pearson = pearson / K;
  m->spearman = spearman / K;
  m->rmse = sqrt(sq / ((double)n * K));
  return ESMT_OK;
}

esmt_status esmt_task_metrics_compute(int task, int num_labels, const float *outputs,
                                      const int32_t *classes, const float *targets, uint64_t n,
                                      esmt_task_metrics *metrics) {
  const char *fn = "esmt_task_metrics_compute";
  ESMT_CHECK_ARG(metrics && num_labels > 0 && (outputs || n == 0), fn,
                 "metrics and outputs must not be NULL, num_labels must be positive");
  esmt_status st = esmt_check_struct(fn, "esmt_task_metrics", metrics->struct_size,
                                     sizeof *metrics);
  if (st) return st;
  esmt_task_metrics m = ESMT_TASK_METRICS_INIT;
  m.accuracy = m.macro_f1 = m.auroc = m.auprc = m.pearson = m.spearman = m.rmse = NAN;
  const int by_class = task == ESMT_HEAD_SEQ_CLASS || task == ESMT_HEAD_RESIDUE_CLASS;
  if (!by_class && task != ESMT_HEAD_MULTILABEL && task != ESMT_HEAD_REGRESSION)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: task %d is not a task head", fn, task);
  if (n > 0 && (by_class ? !classes : !targets))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: the %s are NULL", fn,
                     by_class ? "classes" : "targets");
  if (n > 0) {
    if (by_class) st = class_metrics(num_labels, outputs, classes, n, &m);
    else if (task == ESMT_HEAD_MULTILABEL) st = multilabel_metrics(num_labels, outputs, targets,
                                                                   n, &m);
    else st = regression_metrics(num_labels, outputs, targets, n, &m);
    if (st) return esmt_fail_prefix(st, "%s: ", fn);
  }
  *metrics = m;
  return ESMT_OK;
}

static const struct {
  const char *name;
  size_t offset;
  int higher;
} known[] = {
    {"accuracy", offsetof(esmt_task_metrics, accuracy), 1},
    {"macro_f1", offsetof(esmt_task_metrics, macro_f1), 1},
    {"auroc", offsetof(esmt_task_metrics, auroc), 1},
    {"auprc", offsetof(esmt_task_metrics, auprc), 1},
    {"pearson", offsetof(esmt_task_metrics, pearson), 1},
    {"spearman", offsetof(esmt_task_metrics, spearman), 1},
    {"rmse", offsetof(esmt_task_metrics, rmse), 0},
};

esmt_status esmt_task_metric_value(const esmt_task_metrics *metrics, double loss,
                                   const char *name, double *value, int *higher_is_better) {
  const char *fn = "esmt_task_metric_value";
  ESMT_CHECK_ARG(metrics && name && value, fn, "metrics, name and value must not be NULL");
  int higher = 0;
  if (!strcmp(name, "loss")) {
    *value = loss;
  } else {
    size_t k = 0;
    while (k < sizeof known / sizeof *known && strcmp(name, known[k].name)) k++;
    if (k == sizeof known / sizeof *known)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: \"%s\" is no metric: one of loss, "
                       "accuracy, macro_f1, auroc, auprc, pearson, spearman, rmse", fn, name);
    memcpy(value, (const char *)metrics + known[k].offset, sizeof *value);
    higher = known[k].higher;
  }
  if (higher_is_better) *higher_is_better = higher;
  return ESMT_OK;
}
