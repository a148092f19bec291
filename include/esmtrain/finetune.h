/* SPDX-License-Identifier: MIT */
/* libesmtrain public API, part of esmtrain.h: fine-tuning (task metrics).
 * Include <esmtrain/esmtrain.h>, which includes this file where it belongs. */
#ifndef ESMTRAIN_FINETUNE_H
#define ESMTRAIN_FINETUNE_H

#ifndef ESMTRAIN_ESMTRAIN_H
#error "include <esmtrain/esmtrain.h>, not this file"
#endif

/* ------------------------------------------------------------------------ */
/* Task metrics                                                               */
/* ------------------------------------------------------------------------ */

/* What a task head's predictions score; a metric the task has not is NAN.
 * seq-class: accuracy and macro-F1 (the mean F1 over the classes that are
 * in the labels or the predictions, as scikit-learn's f1_score(average=
 * "macro")); multilabel: accuracy (of every 0/1 decision at logit 0),
 * AUROC and AUPRC (average precision) averaged over the labels whose
 * column holds both values, as roc_auc_score / average_precision_score
 * (average="macro"); regression: Pearson and Spearman (ranks, ties
 * averaged) of each target, averaged over the targets, and RMSE over every
 * value; residue-class: per-residue accuracy and
 * macro-F1 over the labelled residues. */
typedef struct esmt_task_metrics {
  uint32_t struct_size;
  uint64_t count;           /* rows scored (residues for residue-class) */
  double accuracy, macro_f1, auroc, auprc, pearson, spearman, rmse;
} esmt_task_metrics;

#define ESMT_TASK_METRICS_INIT ESMT_SIZED_INIT_(esmt_task_metrics)

/* Score `n` predictions of a task (esmt_head_kind) with `num_labels`
 * outputs each: outputs [n, num_labels] (logits or values as the head
 * writes them); seq-class and residue-class read class ids from `classes`
 * [n] (ESMT_LABEL_IGNORE: skipped), multilabel (0/1) and regression read
 * `targets` [n, num_labels]. */
ESMT_API esmt_status esmt_task_metrics_compute(int task, int num_labels, const float *outputs,
                                               const int32_t *classes, const float *targets,
                                               uint64_t n, esmt_task_metrics *metrics);

/* The value of a metric by name ("accuracy", "macro_f1", "auroc", "auprc",
 * "pearson", "spearman", "rmse", "loss" with the loss given), and whether
 * larger is better: what a best checkpoint and early stopping compare.
 * ESMT_ERR_INVALID_ARGUMENT naming the metrics when the name is none. */
ESMT_API esmt_status esmt_task_metric_value(const esmt_task_metrics *metrics, double loss,
                                            const char *name, double *value,
                                            int *higher_is_better);

#endif /* ESMTRAIN_FINETUNE_H */
