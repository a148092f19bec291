/* SPDX-License-Identifier: MIT */
/* The trainer's parts for a task head (esmt_model_config.head): the
 * targets a micro-batch carries (trainer_targets.c), the outputs and
 * labels an evaluation collects and scores with the task metrics, and the
 * best checkpoint and early stop by a named metric (trainer_task_eval.c). */
#ifndef ESMTRAIN_TRAINER_FINETUNE_H
#define ESMTRAIN_TRAINER_FINETUNE_H

#include "trainer.h"

/* Copy batch->targets (a sequence head's) into the micro-batch and count
 * its scored rows or values as its selected positions. A batch without
 * targets, or a model without a sequence head, leaves mb->targets NULL. */
ESMT_HIDDEN esmt_status esmt_micro_batch_take_targets(esmt_micro_batch *mb, const esmt_model *m,
                                                      const esmt_batch *batch);

/* Evaluation with a task head: forget the last pass's outputs; add one
 * batch's head outputs with its labels; score what was added into
 * t->task_metrics. */
ESMT_HIDDEN void esmt_task_eval_begin(esmt_trainer *t);
ESMT_HIDDEN esmt_status esmt_task_eval_add(esmt_trainer *t, const esmt_batch *b,
                                           const float *outputs);
ESMT_HIDDEN esmt_status esmt_task_eval_finish(esmt_trainer *t);

/* After an evaluation: with options.best_metric, whether `m` is the best
 * so far (*best), and whether `patience` evaluations without a better one
 * have passed (*stop). Without best_metric: the loss decides, no stop. */
ESMT_HIDDEN esmt_status esmt_task_eval_judge(esmt_trainer *t, const esmt_eval_metrics *m,
                                             int *best, int *stop);

/* Check and copy options.best_metric and patience (appended fields: an
 * older caller's options have neither). */
ESMT_HIDDEN esmt_status esmt_trainer_set_best_metric(esmt_trainer *t,
                                                     const esmt_trainer_options *o,
                                                     const char *fn);

ESMT_HIDDEN void esmt_task_eval_free(esmt_trainer *t);

/* What esmt_finetune_create_from_config (finetune_config.c) gives its
 * trainer to own: the labelled table and its two loaders. Freed with the
 * trainer (finetune_owned.c, which knows nothing of the trainer, so that
 * trainer.c and the fine-tuning files depend on it and not on each other). */
struct esmt_finetune_owned {
  esmt_labelled *data;
  esmt_labelled_loader *train, *valid;
};
ESMT_HIDDEN void esmt_finetune_owned_free(struct esmt_finetune_owned *owned);
/* The table, or NULL (owned NULL: a trainer not made by finetune_config.c). */
ESMT_HIDDEN const esmt_labelled *esmt_finetune_owned_data(const struct esmt_finetune_owned *owned);

/* esmt_trainer_init_from for a task head or LoRA model (trainer_task_init.c):
 * the encoder's weights of a checkpoint or "hf:DIR" of the plain model's
 * shape; the head and adapters keep their initialisation. */
ESMT_HIDDEN esmt_status esmt_trainer_init_encoder(esmt_trainer *t, const char *spec);

#endif
