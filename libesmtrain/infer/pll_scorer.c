/* SPDX-License-Identifier: MIT */
/* esmt_pll_scorer (infer.h): the pseudo-log-likelihood of each protein,
 * PLL = sum over residues i of log p(true token at i | the protein with i
 * masked). The masked copies of consecutive proteins share batches; a
 * protein's result is given when its last copy is scored, so results come
 * in input order and memory holds only the proteins of the batch being
 * filled. */
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

typedef struct pll_protein {
  int32_t *tok;
  int n, done;        /* residues; masked copies scored so far (in order) */
  double pll;
} pll_protein;

struct esmt_pll_scorer {
  esmt_masked_scorer *rows;
  esmt_pll_fn fn;
  void *user;
  pll_protein *open;  /* proteins with copies queued or unscored, input order */
  int n_open, cap_open;
  uint64_t first_tag; /* index of open[0] */
  uint64_t added;
  int stopped;        /* fn asked to stop */
};

/* One masked copy of protein `tag` scored: copies come back in the order
 * they were queued, so this one masks residue p->done. */
static int on_row(void *user, uint64_t tag, const double *logp) {
  esmt_pll_scorer *s = user;
  pll_protein *p = &s->open[tag - s->first_tag];
  p->pll += logp[p->tok[p->done]];
  if (++p->done < p->n) return 0;
  if (s->fn(s->user, tag, p->n, p->pll)) s->stopped = 1;
  return s->stopped;
}

/* Forget the finished proteins at the front (all of them finish in order). */
static void compact(esmt_pll_scorer *s) {
  int k = 0;
  while (k < s->n_open && s->open[k].done == s->open[k].n) free(s->open[k++].tok);
  if (!k) return;
  memmove(s->open, s->open + k, (size_t)(s->n_open - k) * sizeof *s->open);
  s->n_open -= k;
  s->first_tag += (uint64_t)k;
}

esmt_status esmt_pll_scorer_create(esmt_model *model, uint64_t batch_tokens, esmt_pll_fn fn,
                                   void *user, esmt_pll_scorer **out) {
  const char *f = "esmt_pll_scorer_create";
  ESMT_CHECK_ARG(model && fn && out, f, "model, fn and out must not be NULL");
  *out = NULL;
  esmt_pll_scorer *s = calloc(1, sizeof *s);
  if (!s) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", f);
  esmt_status st = esmt_masked_scorer_create(model, batch_tokens, on_row, s, &s->rows);
  if (st) {
    free(s);
    return st;
  }
  s->fn = fn;
  s->user = user;
  *out = s;
  return ESMT_OK;
}

void esmt_pll_scorer_destroy(esmt_pll_scorer *s) {
  if (!s) return;
  esmt_masked_scorer_destroy(s->rows);
  for (int k = 0; k < s->n_open; k++) free(s->open[k].tok);
  free(s->open);
  free(s);
}

uint64_t esmt_pll_scorer_rows_done(const esmt_pll_scorer *s) {
  return s ? esmt_masked_scorer_rows_done(s->rows) : 0;
}

/* The callback's stop as the scorer's status. */
static esmt_status stopped(const esmt_pll_scorer *s, esmt_status st) {
  if (st == ESMT_ERR_CANCELLED && s->stopped)
    return esmt_fail(ESMT_ERR_CANCELLED, "esmt_pll_scorer: stopped by the protein callback");
  return st;
}

esmt_status esmt_pll_scorer_add(esmt_pll_scorer *s, const int32_t *residues, int n) {
  const char *f = "esmt_pll_scorer_add";
  ESMT_CHECK_ARG(s && residues && n >= 1, f, "scorer and residues must not be NULL, n >= 1");
  if (s->stopped)
    return esmt_fail(ESMT_ERR_STATE, "%s: the protein callback stopped the scorer", f);
  if (s->n_open == s->cap_open) {
    const int cap = s->cap_open ? 2 * s->cap_open : 16;
    pll_protein *o = realloc(s->open, (size_t)cap * sizeof *o);
    if (!o) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", f);
    s->open = o;
    s->cap_open = cap;
  }
  pll_protein *p = &s->open[s->n_open];
  memset(p, 0, sizeof *p);
  p->n = n;
  if (!(p->tok = malloc((size_t)n * sizeof *p->tok)))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory for a protein of %d residues",
                     f, n);
  memcpy(p->tok, residues, (size_t)n * sizeof *p->tok);
  s->n_open++;
  const uint64_t tag = s->added++;
  esmt_status st = ESMT_OK;
  for (int r = 0; r < n && !st; r++)
    st = esmt_masked_scorer_add(s->rows, s->open[tag - s->first_tag].tok, n, r, tag);
  if (st) return stopped(s, st);
  compact(s);
  return ESMT_OK;
}

esmt_status esmt_pll_scorer_finish(esmt_pll_scorer *s) {
  ESMT_CHECK_ARG(s, "esmt_pll_scorer_finish", "scorer must not be NULL");
  esmt_status st = esmt_masked_scorer_flush(s->rows);
  if (st) return stopped(s, st);
  compact(s);
  return ESMT_OK;
}

static int keep_pll(void *user, uint64_t index, int length, double pll) {
  (void)index;
  (void)length;
  *(double *)user = pll;
  return 0;
}

esmt_status esmt_score_pll(esmt_model *model, const int32_t *residues, int n,
                           uint64_t batch_tokens, double *pll) {
  ESMT_CHECK_ARG(pll, "esmt_score_pll", "pll must not be NULL");
  esmt_pll_scorer *s = NULL;
  esmt_status st = esmt_pll_scorer_create(model, batch_tokens, keep_pll, pll, &s);
  if (!st) st = esmt_pll_scorer_add(s, residues, n);
  if (!st) st = esmt_pll_scorer_finish(s);
  esmt_pll_scorer_destroy(s);
  return st;
}
