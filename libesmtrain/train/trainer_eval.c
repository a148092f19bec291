/* SPDX-License-Identifier: MIT */
/* Evaluation: loss, perplexity and masked-token accuracy on the eval
 * source, beside an amino-acid frequency (unigram) model on the same
 * positions, so users see what the model learned beyond composition. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "trainer.h"
#include "trainer_finetune.h"

/* Unigram log-probabilities from residue counts (add-one smoothing over
 * the 25 residue ids 4..28). */
static void unigram_logp(const uint64_t *counts, double *logp) {
  double total = 0;
  for (int a = 4; a < 29; a++) total += (double)counts[a] + 1.0;
  for (int a = 0; a < ESMT_VOCAB_SIZE; a++)
    logp[a] = (a >= 4 && a < 29) ? log(((double)counts[a] + 1.0) / total) : -INFINITY;
}

/* One pass over the evaluation source: eval_batches batches, or (0) until
 * the source ends or its epoch moves on from where reset left it. */
typedef struct eval_pass {
  esmt_trainer *t;
  int batches;                      /* used so far */
  uint64_t epoch0;                  /* of the first batch */
  double start;
} eval_pass;

static esmt_status pass_begin(esmt_trainer *t, eval_pass *p) {
  memset(p, 0, sizeof *p);
  p->t = t;
  p->start = esmt_now_s();
  return t->eval.reset ? t->eval.reset(t->eval.user) : ESMT_OK;
}

/* Progress for stage "eval"; non-zero: the caller asked to stop. */
static int pass_progress(eval_pass *p) {
  const esmt_trainer *t = p->t;
  esmt_progress pr = ESMT_PROGRESS_INIT;
  pr.stage = "eval";
  pr.done = (uint64_t)p->batches;
  pr.total = (uint64_t)t->o.eval_batches;
  pr.unit = "batches";
  pr.elapsed_s = esmt_now_s() - p->start;
  return esmt_report_progress(t->m->ctx, t->o.progress, t->o.progress_user, &pr);
}

/* The next batch into *b; *done when the pass is over. A stop request, the
 * run's deadline or the progress callback ends it with ESMT_ERR_CANCELLED. */
static esmt_status pass_next(eval_pass *p, esmt_batch *b, int *done) {
  esmt_trainer *t = p->t;
  *done = 0;
  if (t->stop_requested || pass_progress(p)) {
    t->stop_requested = 1;
    return esmt_fail(ESMT_ERR_CANCELLED, "evaluation stopped on request after %d batches",
                     p->batches);
  }
  if (t->run_deadline > 0 && esmt_now_s() >= t->run_deadline)
    return esmt_fail(ESMT_ERR_CANCELLED, "evaluation stopped after %d batches: the run's "
                     "max_time_s is over", p->batches);
  if (t->o.eval_batches > 0 && p->batches >= t->o.eval_batches) { *done = 1; return ESMT_OK; }
  esmt_status st = t->eval.next(t->eval.user, b);
  if (st == ESMT_ERR_STATE) { *done = 1; return ESMT_OK; }
  /* one pass: until a batch of another epoch than the first one's */
  if (!st && t->o.eval_batches == 0 && t->eval.epoch) {
    uint64_t e;
    if ((st = t->eval.epoch(t->eval.user, &e))) return st;
    if (p->batches == 0) p->epoch0 = e;
    else if (e != p->epoch0) { *done = 1; return ESMT_OK; }
  }
  if (!st) p->batches++;
  return st;
}

/* Residue counts of the eval source itself, for when no training batch
 * was seen yet (the baseline then knows the eval composition exactly). */
static esmt_status count_eval_residues(esmt_trainer *t, uint64_t *counts) {
  eval_pass p;
  esmt_status st = pass_begin(t, &p);
  for (int done = 0; !st;) {
    esmt_batch b = ESMT_BATCH_INIT;
    if ((st = pass_next(&p, &b, &done)) || done) break;
    size_t n = (size_t)b.batch * b.seq_len;
    for (size_t k = 0; k < n; k++) {
      int32_t id = b.labels && b.labels[k] >= 0 ? b.labels[k] : b.tokens[k];
      if (id >= 4 && id < 29) counts[id]++;
    }
  }
  return st;
}

/* Forward the pass's batches, adding this rank's sums and counts. */
static esmt_status eval_local(esmt_trainer *t, const double *logp, double sums[2],
                              uint64_t totals[2]) {
  const int head = t->m->cfg.head != ESMT_HEAD_NONE;
  /* a task head's outputs per position (residue head) fit in n x max(V, labels) */
  const int V = head && t->m->cfg.num_labels > ESMT_VOCAB_SIZE ? t->m->cfg.num_labels
                                                                : ESMT_VOCAB_SIZE;
  eval_pass p;
  esmt_status st = pass_begin(t, &p);
  /* ZeRO-3: every forward all-gathers the layers with the other ranks, so
   * the ranks run their forwards in step: while any rank has a batch left,
   * one that has run out runs a one-row stand-in that is not counted (one
   * 8-byte sum per batch) */
  const int lockstep = esmt_dp_zero(t->dp) >= 3 && esmt_dp_world(t->dp) > 1;
  static const int32_t stand_in[2] = {ESMT_TOKEN_CLS, ESMT_TOKEN_EOS};
  esmt_task_eval_begin(t);
  for (int done = 0; !st;) {
    esmt_batch b = ESMT_BATCH_INIT;
    if (!done && (st = pass_next(&p, &b, &done))) break;
    uint64_t left = !done;
    if (lockstep && (st = esmt_dp_sum_u64(t->dp, &left, 1))) break;
    if (!left) break;
    if (done) { /* (lockstep) */
      b.batch = 1;
      b.seq_len = 2;
      b.tokens = stand_in;
      esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
      if ((st = esmt_model_forward(t->m, &b, &r, NULL))) return st;
      continue;
    }
    size_t n = (size_t)b.batch * b.seq_len;
    if (n * V > t->eval_logits_cap) {
      float *buf = realloc(t->eval_logits, n * V * sizeof *buf);
      if (!buf) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory for evaluation logits");
      t->eval_logits = buf;
      t->eval_logits_cap = n * V;
    }
    b.loss_normalizer = 0;
    esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
    esmt_model_set_training(t->m, 0); /* evaluation: no LoRA dropout */
    st = esmt_model_forward(t->m, &b, &r, t->eval_logits);
    esmt_model_set_training(t->m, 1);
    if (st) return st;
    sums[0] += r.loss_sum;
    totals[0] += r.selected;
    if (head) { /* scored by the task metrics once the pass is over */
      if ((st = esmt_task_eval_add(t, &b, t->eval_logits))) return st;
      continue;
    }
    for (size_t k = 0; b.labels && k < n; k++) {
      int32_t y = b.labels[k];
      if (y < 0) continue;
      const float *z = t->eval_logits + k * V;
      int best = 0;
      for (int v = 1; v < V; v++) if (z[v] > z[best]) best = v;
      totals[1] += best == y;
      sums[1] -= (y >= 4 && y < 29) ? logp[y] : log(1e-9);
    }
  }
  return st;
}

esmt_status esmt_trainer_evaluate_in_run(esmt_trainer *t, esmt_eval_metrics *out) {
  const char *fn = "esmt_trainer_evaluate";
  ESMT_CHECK_ARG(t && out, fn, "trainer and metrics must not be NULL");
  /* an older caller's struct ends before `task` */
  esmt_status st = esmt_check_struct(fn, "esmt_eval_metrics", out->struct_size,
                                     offsetof(esmt_eval_metrics, task));
  if (st) return st;
  if (!t->has_eval) return esmt_fail(ESMT_ERR_STATE, "%s: no evaluation source was set", fn);
  uint64_t counts[ESMT_VOCAB_SIZE];
  memcpy(counts, t->aa_counts, sizeof counts);
  uint64_t seen = 0;
  for (int a = 0; a < ESMT_VOCAB_SIZE; a++) seen += counts[a];
  if ((st = esmt_dp_sum_u64(t->dp, &seen, 1))) return st;
  /* (a cancelled count leaves the request set: the pass below ends at once
   * on every rank that saw it, and the flag is combined after it) */
  if (!seen && (st = count_eval_residues(t, counts)) && st != ESMT_ERR_CANCELLED)
    return esmt_fail_prefix(st, "%s: ", fn);
  /* data parallel: the residues every rank saw, and each rank evaluates
   * its share of the validation batches; the sums are combined below */
  if ((st = esmt_dp_sum_u64(t->dp, counts, ESMT_VOCAB_SIZE))) return st;
  double logp[ESMT_VOCAB_SIZE];
  unigram_logp(counts, logp);

  double sums[2] = {0, 0};
  uint64_t totals[3] = {0, 0, 0}; /* selected, correct, ranks cancelled */
  char why[512] = "";
  st = eval_local(t, logp, sums, totals);
  if (st == ESMT_ERR_CANCELLED) {
    snprintf(why, sizeof why, "%s", esmt_last_error());
    totals[2] = 1;
  } else if (st) {
    return esmt_fail_prefix(st, "%s: ", fn);
  }
  /* every rank reaches the sums, stopped or not, so that none waits alone */
  if ((st = esmt_dp_sum_f64(t->dp, sums, 2)) || (st = esmt_dp_sum_u64(t->dp, totals, 3)))
    return st;
  if (totals[2])
    return esmt_fail(ESMT_ERR_CANCELLED, "%s: %s", fn,
                     why[0] ? why : "evaluation stopped on request on another rank");
  const uint64_t selected = totals[0], correct = totals[1];
  esmt_eval_metrics em = ESMT_EVAL_METRICS_INIT;
  em.step = t->step;
  em.selected = selected;
  em.loss = selected ? sums[0] / (double)selected : 0.0;
  em.perplexity = exp(em.loss);
  em.accuracy = selected ? (double)correct / (double)selected : 0.0;
  em.unigram_perplexity = selected ? exp(sums[1] / (double)selected) : 0.0;
  if (t->m->cfg.head != ESMT_HEAD_NONE) {
    if ((st = esmt_task_eval_finish(t))) return esmt_fail_prefix(st, "%s: ", fn);
    em.task = &t->task_metrics;
    em.accuracy = isnan(t->task_metrics.accuracy) ? 0.0 : t->task_metrics.accuracy;
    em.unigram_perplexity = 0.0; /* a residue-frequency model scores no task */
  }
  const uint32_t size = out->struct_size < sizeof em ? out->struct_size : (uint32_t)sizeof em;
  memcpy(out, &em, size);
  out->struct_size = size;
  return ESMT_OK;
}

esmt_status esmt_trainer_evaluate(esmt_trainer *t, esmt_eval_metrics *out) {
  esmt_status st = t ? esmt_model_enter(t->m, "esmt_trainer_evaluate") : ESMT_OK;
  if (st) return st;
  st = esmt_trainer_evaluate_in_run(t, out);
  if (t) esmt_model_leave(t->m);
  if (st == ESMT_ERR_CANCELLED) t->stop_requested = 0; /* consumed */
  if (!st) esmt_trainer_write_metrics(t, NULL, out); /* e.g. before training: step 0 */
  return st;
}
