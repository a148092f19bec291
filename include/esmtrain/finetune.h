/* SPDX-License-Identifier: MIT */
/* libesmtrain public API, part of esmtrain.h: fine-tuning (labelled
 * tables, their train/valid/test splits as batch sources, task metrics).
 * Include <esmtrain/esmtrain.h>, which includes this file where it belongs. */
#ifndef ESMTRAIN_FINETUNE_H
#define ESMTRAIN_FINETUNE_H

#ifndef ESMTRAIN_ESMTRAIN_H
#error "include <esmtrain/esmtrain.h>, not this file"
#endif

/* ------------------------------------------------------------------------ */
/* Labelled proteins (docs/finetune.md)                                       */
/* ------------------------------------------------------------------------ */

/* A CSV or TSV table (plain or gzip, a header row; the table reader of
 * esmt_table_reader_open) with a sequence column and label column(s), read
 * whole into memory, each row given to a split. The labels by task
 * (esmt_head_kind):
 *  - ESMT_HEAD_SEQ_CLASS: one column of class names; the classes of the
 *    training split, sorted by name (byte order), are ids 0..K-1;
 *  - ESMT_HEAD_MULTILABEL: several 0/1 columns (one label each, named by
 *    its column), or one column of names joined by label_separator (the
 *    labels: every name seen in training, sorted);
 *  - ESMT_HEAD_REGRESSION: one float column per target;
 *  - ESMT_HEAD_RESIDUE_CLASS: one column, a string as long as the sequence
 *    with one class character per residue ('-' and '.': unlabelled), or,
 *    with label_separator, that many class names joined by it ("-" and "."
 *    unlabelled); classes as for SEQ_CLASS.
 * A MULTILABEL list may be empty (a protein with no label); any other
 * empty label is missing.
 * Any error names the file, its line and the column: a missing or empty
 * label, a label of the wrong type, per-residue labels of the wrong
 * length, a class in valid/test that training never saw. */
typedef struct esmt_labelled esmt_labelled;

typedef enum esmt_labelled_split {
  ESMT_LABELLED_TRAIN = 0,
  ESMT_LABELLED_VALID = 1,
  ESMT_LABELLED_TEST = 2
} esmt_labelled_split;

typedef struct esmt_labelled_options {
  uint32_t struct_size;
  const char *path;
  int format;                 /* esmt_table_format (ESMT_TABLE_BY_NAME: by the name) */
  int task;                   /* esmt_head_kind, not ESMT_HEAD_NONE */
  const char *seq_column;     /* NULL: "sequence" */
  const char *id_column;      /* NULL: "id" when the table has one, else rows are
                               * "row1", "row2", ...; needed by clusters */
  const char *const *label_columns; /* NULL (n_label_columns 0): "label" */
  int n_label_columns;        /* several: MULTILABEL 0/1 columns or REGRESSION targets */
  const char *label_separator; /* MULTILABEL / RESIDUE_CLASS lists; NULL: none */
  /* The split, by the first that applies: split_column (values "train",
   * "valid"/"validation"/"val", "test", any case); clusters (a cluster
   * file as ingest's --clusters: whole clusters drawn by the hash of their
   * representative, as ingest draws them, so validation and test hold no
   * member of a training cluster); else each distinct sequence by a hash
   * of its residues and the seed (duplicates never straddle splits). */
  const char *split_column;
  const char *clusters;
  double valid_fraction;      /* share drawn for validation (0.1) */
  double test_fraction;       /* share drawn for test (0) */
  uint64_t seed;
  int max_len;                /* tokens per row incl. cls/eos; longer proteins are
                               * cropped to their start (residue labels with them) */
} esmt_labelled_options;

#define ESMT_LABELLED_OPTIONS_INIT \
  { sizeof(esmt_labelled_options), NULL, 0, ESMT_HEAD_SEQ_CLASS, NULL, NULL, NULL, 0, NULL, \
    NULL, NULL, 0.1, 0.0, 1, 1024 }

ESMT_API esmt_status esmt_labelled_read(const esmt_labelled_options *opts, esmt_labelled **out);
ESMT_API void esmt_labelled_free(esmt_labelled *data);

/* Rows in a split. */
ESMT_API uint64_t esmt_labelled_count(const esmt_labelled *data, esmt_labelled_split split);
/* The head's width: classes (SEQ_CLASS, RESIDUE_CLASS), labels
 * (MULTILABEL) or targets (REGRESSION). */
ESMT_API int esmt_labelled_num_labels(const esmt_labelled *data);
/* Name of label `index` (a class, a label or a target column), or NULL. */
ESMT_API const char *esmt_labelled_label_name(const esmt_labelled *data, int index);
/* The label names as a JSON array (what a run stores beside its model). */
ESMT_API esmt_status esmt_labelled_label_json(const esmt_labelled *data, char *buf, size_t cap);

/* A split as micro-batches of `rows` right-padded rows, the rows in table
 * order or (shuffle) a new seeded order each epoch; endless when
 * `epochs` is 0. The source's epoch(), save_cursor() and restore_cursor()
 * let the trainer evaluate once over it and resume where it stopped. The
 * source is valid while `loader` lives, which is valid while `data` does. */
typedef struct esmt_labelled_loader esmt_labelled_loader;

ESMT_API esmt_status esmt_labelled_loader_create(const esmt_labelled *data,
                                                 esmt_labelled_split split, int rows,
                                                 int shuffle, int epochs, uint64_t seed,
                                                 esmt_labelled_loader **out);
ESMT_API void esmt_labelled_loader_destroy(esmt_labelled_loader *loader);
ESMT_API esmt_status esmt_labelled_loader_as_source(esmt_labelled_loader *loader,
                                                    esmt_batch_source *source);

/* Class weights of a seq-class table's cross-entropy, as transformers'
 * CrossEntropyLoss(weight=w): a row of class y counts w[y] times, and the
 * loss is divided by the sum of the weights of the rows scored.
 * esmt_labelled_balanced_weights: scikit-learn's "balanced" weights of the
 * training split, n_rows / (num_labels * rows of the class), into
 * weights[count] (count = num_labels). A loader given weights (copied;
 * count 0: none) puts them on every batch (esmt_batch.class_weights). */
ESMT_API esmt_status esmt_labelled_balanced_weights(const esmt_labelled *data, float *weights,
                                                    int count);
ESMT_API esmt_status esmt_labelled_loader_set_class_weights(esmt_labelled_loader *loader,
                                                            const float *weights, int count);

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

/* ------------------------------------------------------------------------ */
/* What a task model calls its outputs                                       */
/* ------------------------------------------------------------------------ */

/* The name of a head kind as the finetune.task key, checkpoints and
 * `predict` spell it ("none", "seq-class", "multilabel", "regression",
 * "residue-class"), or NULL; and back (-1: none of them). */
ESMT_API const char *esmt_head_name(int head);
ESMT_API int esmt_head_from_name(const char *name);

/* The names of the head's num_labels outputs: classes (seq-class,
 * residue-class; class id i is name i), labels (multilabel) or targets
 * (regression). A fine-tuning trainer sets them from its table; checkpoints
 * (esmt_model_save, the trainer's) record them with the head, and
 * esmt_model_load / esmt_model_create_from_checkpoint restore them. count
 * 0 forgets them; otherwise it must be num_labels. The names are copied. */
ESMT_API esmt_status esmt_model_set_label_names(esmt_model *model, const char *const *names,
                                                int count);
/* Name of output `index`, or NULL when the model has none. */
ESMT_API const char *esmt_model_label_name(const esmt_model *model, int index);

/* ------------------------------------------------------------------------ */
/* Predictions of a task model on a file of proteins                         */
/* ------------------------------------------------------------------------ */

/* esmt_predict_table: a new CSV `output` with every column of `input` (a
 * CSV/TSV table, plain or gzip, with a sequence column; or FASTA, plain or
 * gzip, giving the columns id and sequence) and, per row, what the model's
 * task head predicts, named by the model's output names
 * (esmt_model_label_name; "0", "1", ... when it has none):
 *  - seq-class: "predicted" (the most probable class) and "p_<class>" for
 *    each class (softmax);
 *  - multilabel: "p_<label>" for each label (sigmoid);
 *  - regression: "predicted_<target>" for each target;
 *  - residue-class: "predicted", one class per residue (joined without a
 *    separator when every class name is one character, else by spaces).
 * Outputs are those of esmt_model_infer (ESMT_INFER_HEAD) on batches of
 * batch_rows right-padded proteins, probabilities written with 9
 * significant digits (a float read back exactly). A protein longer than
 * the model's window (max_positions - 2 residues) is refused, naming its
 * line, unless truncate_long (its first window is predicted; a residue
 * head's later residues are '-'). The output is written to a temporary
 * beside it and published whole at the end (esmt_output_file): an existing
 * `output` is refused and kept, and on any error nothing is left. */
typedef struct esmt_predict_options {
  uint32_t struct_size;
  const char *input;
  const char *output;
  const char *seq_column;   /* tables: NULL is "sequence" */
  int batch_rows;           /* proteins per forward pass; 0: 16 */
  int truncate_long;
  esmt_progress_fn progress; /* stage "predict", unit "proteins"; non-zero cancels */
  void *progress_user;
} esmt_predict_options;

#define ESMT_PREDICT_OPTIONS_INIT \
  { sizeof(esmt_predict_options), NULL, NULL, NULL, 0, 0, NULL, NULL }

/* *rows (may be NULL): the proteins predicted. */
ESMT_API esmt_status esmt_predict_table(esmt_model *model, const esmt_predict_options *options,
                                        uint64_t *rows);

/* ------------------------------------------------------------------------ */
/* A fine-tuning run from a configuration                                    */
/* ------------------------------------------------------------------------ */

/* A trainer for the finetune.* keys (docs/finetune.md): finetune.data read
 * and split, a model of the model.* shape with the task head, pooling,
 * freezing and LoRA asked for (its num_labels from the table), the
 * training split in batches of finetune.batch_rows proteins shuffled each
 * epoch, the validation split scored at every evaluation, best_metric and
 * patience, and the train.*, optimizer.*, schedule.* keys as for
 * esmt_trainer_create_from_config. One process on one device: no
 * offload or data parallelism yet. The trainer owns the model and data;
 * esmt_trainer_model and esmt_trainer_labelled reach them. */
ESMT_API esmt_status esmt_finetune_create_from_config(esmt_context *ctx, const esmt_config *cfg,
                                                      const esmt_trainer_options *base,
                                                      esmt_trainer **out);
/* The labelled table of such a trainer (its label names), or NULL. */
ESMT_API const esmt_labelled *esmt_trainer_labelled(const esmt_trainer *trainer);

#endif /* ESMTRAIN_FINETUNE_H */
