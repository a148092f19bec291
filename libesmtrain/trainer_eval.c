/* Evaluation: loss, perplexity and masked-token accuracy on the eval
 * source, beside an amino-acid frequency (unigram) model on the same
 * positions, so users see what the model learned beyond composition. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

/* Unigram log-probabilities from residue counts (add-one smoothing over
 * the 25 residue ids 4..28). */
static void unigram_logp(const uint64_t *counts, double *logp) {
  double total = 0;
  for (int a = 4; a < 29; a++) total += (double)counts[a] + 1.0;
  for (int a = 0; a < ESMT_VOCAB_SIZE; a++)
    logp[a] = (a >= 4 && a < 29) ? log(((double)counts[a] + 1.0) / total) : -INFINITY;
}

/* Residue counts of the eval source itself, for when no training batch
 * was seen yet (the baseline then knows the eval composition exactly). */
static esmt_status count_eval_residues(esmt_trainer *t, uint64_t *counts) {
  esmt_status st = t->eval.reset ? t->eval.reset(t->eval.user) : ESMT_OK;
  for (int i = 0; !st && (t->o.eval_batches == 0 || i < t->o.eval_batches); i++) {
    esmt_batch b = ESMT_BATCH_INIT;
    st = t->eval.next(t->eval.user, &b);
    if (st == ESMT_ERR_STATE) { st = ESMT_OK; break; }
    size_t n = (size_t)b.batch * b.seq_len;
    for (size_t k = 0; !st && k < n; k++) {
      int32_t id = b.labels && b.labels[k] >= 0 ? b.labels[k] : b.tokens[k];
      if (id >= 4 && id < 29) counts[id]++;
    }
  }
  return st;
}

esmt_status esmt_trainer_evaluate(esmt_trainer *t, esmt_eval_metrics *out) {
  const char *fn = "esmt_trainer_evaluate";
  ESMT_CHECK_ARG(t && out, fn, "trainer and metrics must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_eval_metrics", out->struct_size, sizeof *out);
  if (st) return st;
  if (!t->has_eval) return esmt_fail(ESMT_ERR_STATE, "%s: no evaluation source was set", fn);
  uint64_t counts[ESMT_VOCAB_SIZE];
  memcpy(counts, t->aa_counts, sizeof counts);
  uint64_t seen = 0;
  for (int a = 0; a < ESMT_VOCAB_SIZE; a++) seen += counts[a];
  if ((st = esmt_dp_sum_u64(t->dp, &seen, 1))) return st;
  if (!seen && (st = count_eval_residues(t, counts))) return esmt_fail_prefix(st, "%s: ", fn);
  /* data parallel: the residues every rank saw, and each rank evaluates
   * its share of the validation batches; the sums are combined below */
  if ((st = esmt_dp_sum_u64(t->dp, counts, ESMT_VOCAB_SIZE))) return st;
  double logp[ESMT_VOCAB_SIZE];
  unigram_logp(counts, logp);

  if (t->eval.reset && (st = t->eval.reset(t->eval.user))) return esmt_fail_prefix(st, "%s: ", fn);
  double loss_sum = 0, uni_sum = 0;
  uint64_t selected = 0, correct = 0;
  const int V = ESMT_VOCAB_SIZE;
  for (int i = 0; t->o.eval_batches == 0 || i < t->o.eval_batches; i++) {
    esmt_batch b = ESMT_BATCH_INIT;
    st = t->eval.next(t->eval.user, &b);
    if (st == ESMT_ERR_STATE) { st = ESMT_OK; break; }
    if (st) return esmt_fail_prefix(st, "%s: reading evaluation batch: ", fn);
    size_t n = (size_t)b.batch * b.seq_len;
    if (n * V > t->eval_logits_cap) {
      float *buf = realloc(t->eval_logits, n * V * sizeof *buf);
      if (!buf) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
      t->eval_logits = buf;
      t->eval_logits_cap = n * V;
    }
    b.loss_normalizer = 0;
    esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
    if ((st = esmt_model_forward(t->m, &b, &r, t->eval_logits))) return st;
    loss_sum += r.loss_sum;
    selected += r.selected;
    for (size_t k = 0; b.labels && k < n; k++) {
      int32_t y = b.labels[k];
      if (y < 0) continue;
      const float *z = t->eval_logits + k * V;
      int best = 0;
      for (int v = 1; v < V; v++) if (z[v] > z[best]) best = v;
      correct += best == y;
      uni_sum -= (y >= 4 && y < 29) ? logp[y] : log(1e-9);
    }
  }
  double sums[2] = {loss_sum, uni_sum};
  uint64_t totals[2] = {selected, correct};
  if ((st = esmt_dp_sum_f64(t->dp, sums, 2)) || (st = esmt_dp_sum_u64(t->dp, totals, 2)))
    return st;
  loss_sum = sums[0];
  uni_sum = sums[1];
  selected = totals[0];
  correct = totals[1];
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->step = t->step;
  out->selected = selected;
  out->loss = selected ? loss_sum / (double)selected : 0.0;
  out->perplexity = exp(out->loss);
  out->accuracy = selected ? (double)correct / (double)selected : 0.0;
  out->unigram_perplexity = selected ? exp(uni_sum / (double)selected) : 0.0;
  return ESMT_OK;
}
