/* SPDX-License-Identifier: MIT */
/* Evaluation with a task head: the head's outputs and the labels of every
 * scored row (residue, for a residue head) collected over the pass, then
 * scored with the task metrics (task_metrics.c); and the run's choice of
 * its best checkpoint by a named metric, with early stopping once
 * `patience` evaluations found none better. With data parallelism each
 * rank scores the validation rows it evaluated. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dp_group.h"
#include "trainer_finetune.h"

struct esmt_task_eval {
  float *outputs;            /* [n, num_labels] */
  int32_t *classes;          /* [n]: class heads */
  float *targets;            /* [n, num_labels]: multi-label and regression heads */
  uint64_t n, cap;
};

static esmt_status reserve(esmt_trainer *t, uint64_t more) {
  struct esmt_task_eval *e = t->task_eval;
  const size_t C = (size_t)t->m->cfg.num_labels;
  if (e->n + more <= e->cap) return ESMT_OK;
  uint64_t cap = e->cap ? e->cap : 256;
  while (cap < e->n + more) cap *= 2;
  float *o = realloc(e->outputs, cap * C * sizeof *o);
  if (o) e->outputs = o;
  int32_t *c = o ? realloc(e->classes, cap * sizeof *c) : NULL;
  if (c) e->classes = c;
  float *g = c ? realloc(e->targets, cap * C * sizeof *g) : NULL;
  if (g) e->targets = g;
  if (!g) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "evaluation: out of memory for head outputs");
  e->cap = cap;
  return ESMT_OK;
}

void esmt_task_eval_begin(esmt_trainer *t) {
  if (t->task_eval) t->task_eval->n = 0;
}

esmt_status esmt_task_eval_add(esmt_trainer *t, const esmt_batch *b, const float *out) {
  if (!t->task_eval && !(t->task_eval = calloc(1, sizeof *t->task_eval)))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "evaluation: out of memory");
  struct esmt_task_eval *e = t->task_eval;
  const int head = t->m->cfg.head;
  const size_t C = (size_t)t->m->cfg.num_labels;
  if (head == ESMT_HEAD_RESIDUE_CLASS) {
    const size_t n = (size_t)b->batch * (size_t)b->seq_len;
    for (size_t k = 0; b->labels && k < n; k++) {
      if (b->labels[k] < 0) continue;
      esmt_status st = reserve(t, 1);
      if (st) return st;
      memcpy(e->outputs + e->n * C, out + k * C, C * sizeof *out);
      e->classes[e->n++] = b->labels[k];
    }
    return ESMT_OK;
  }
  if (b->struct_size <= offsetof(esmt_batch, targets) || !b->targets) return ESMT_OK;
  esmt_status st = reserve(t, (uint64_t)b->batch);
  if (st) return st;
  for (int r = 0; r < b->batch; r++, e->n++) {
    memcpy(e->outputs + e->n * C, out + (size_t)r * C, C * sizeof *out);
    if (head == ESMT_HEAD_SEQ_CLASS) {
      const float y = b->targets[r];
      e->classes[e->n] = y == (float)ESMT_LABEL_IGNORE ? ESMT_LABEL_IGNORE : (int32_t)y;
    } else {
      memcpy(e->targets + e->n * C, b->targets + (size_t)r * C, C * sizeof *out);
    }
  }
  return ESMT_OK;
}

esmt_status esmt_task_eval_finish(esmt_trainer *t) {
  const struct esmt_task_eval *e = t->task_eval;
  esmt_task_metrics m = ESMT_TASK_METRICS_INIT;
  esmt_status st = esmt_task_metrics_compute(t->m->cfg.head, t->m->cfg.num_labels,
                                             e ? e->outputs : NULL, e ? e->classes : NULL,
                                             e ? e->targets : NULL, e ? e->n : 0, &m);
  if (st) return st;
  t->task_metrics = m;
  return ESMT_OK;
}

esmt_status esmt_task_eval_judge(esmt_trainer *t, const esmt_eval_metrics *m, int *best,
                                 int *stop) {
  *stop = 0;
  if (!t->best_metric) {
    *best = m->loss < t->best_eval_loss;
    return ESMT_OK;
  }
  double v;
  int higher;
  esmt_status st = esmt_task_metric_value(&t->task_metrics, m->loss, t->best_metric, &v, &higher);
  if (st) return st;
  *best = !isnan(v) && (isnan(t->best_value) || (higher ? v > t->best_value : v < t->best_value));
  if (*best) {
    t->best_value = v;
    t->evals_since_best = 0;
  } else {
    t->evals_since_best++;
  }
  *stop = t->o.patience > 0 && t->evals_since_best >= t->o.patience;
  /* each rank scored its own share: rank 0 decides for all (a checkpoint
   * and a stop are collective) */
  const int lead = esmt_dp_rank(t->dp) == 0;
  uint64_t decided[2] = {lead && *best, lead && *stop};
  if ((st = esmt_dp_sum_u64(t->dp, decided, 2))) return st;
  *best = decided[0] != 0;
  *stop = decided[1] != 0;
  return ESMT_OK;
}

esmt_status esmt_trainer_set_best_metric(esmt_trainer *t, const esmt_trainer_options *o,
                                         const char *fn) {
  /* t->o holds the caller's bytes only, the rest zero */
  if (o->struct_size < offsetof(esmt_trainer_options, patience) + sizeof o->patience)
    return ESMT_OK;
  if (o->patience < 0)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: patience %d must be >= 0", fn, o->patience);
  if (!o->best_metric) return ESMT_OK;
  esmt_task_metrics none = ESMT_TASK_METRICS_INIT;
  double v;
  esmt_status st = esmt_task_metric_value(&none, 0, o->best_metric, &v, NULL);
  if (st) return esmt_fail_prefix(st, "%s: best_metric: ", fn);
  if (strcmp(o->best_metric, "loss") && t->m->cfg.head == ESMT_HEAD_NONE)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: best_metric \"%s\" is a task metric, and "
                     "the model has no task head", fn, o->best_metric);
  if (!(t->best_metric = strdup(o->best_metric)))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  return ESMT_OK;
}

void esmt_task_eval_free(esmt_trainer *t) {
  if (!t->task_eval) return;
  free(t->task_eval->outputs);
  free(t->task_eval->classes);
  free(t->task_eval->targets);
  free(t->task_eval);
  t->task_eval = NULL;
}
