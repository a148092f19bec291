/* SPDX-License-Identifier: MIT */
/* Variant scores (infer.h): mutations such as "A123G:L45P" parsed, and
 * masked marginals (Meier et al. 2021; fair-esm examples/variant-
 * prediction): each distinct mutated (protein, residue) is masked once; a
 * variant scores the sum over its mutations of log p(mutant) - log p(wild
 * type) there. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

esmt_status esmt_mutations_parse(const char *text, esmt_mutation *out, int cap, int *count) {
  ESMT_CHECK_ARG(text && (out || cap == 0) && count, "esmt_mutations_parse",
                 "text, out and count must not be NULL");
  *count = 0;
  int n = 0;
  const char *p = text;
  const int several = strchr(text, ':') != NULL; /* name the part in messages */
  if (!*p) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "the mutation is empty");
  for (;;) {
    while (*p == ' ' || *p == '\t') p++;
    const char *start = p;
    const char *colon = strchr(p, ':');
    const size_t len = colon ? (size_t)(colon - p) : strlen(p);
    char one[64];
    size_t k = len;
    while (k > 0 && (p[k - 1] == ' ' || p[k - 1] == '\t')) k--;
    if (k == 0 || k >= sizeof one)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "'%.*s' is not a mutation: expected the "
                       "wild-type letter, the position and the mutant letter (A123G), several "
                       "joined by ':'", (int)len, start);
    memcpy(one, p, k);
    one[k] = 0;
    char *end = NULL;
    const int ok_shape = k >= 3 && isalpha((unsigned char)one[0]) &&
                         isalpha((unsigned char)one[k - 1]) &&
                         (isdigit((unsigned char)one[1]) ||
                          (one[1] == '-' && isdigit((unsigned char)one[2])));
    errno = 0;
    const long long pos = ok_shape ? strtoll(one + 1, &end, 10) : 0;
    if (!ok_shape || end != one + k - 1 || errno == ERANGE)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s%s%snot a mutation: expected the wild-type "
                       "letter, the position and the mutant letter (A123G), several joined by "
                       "':'", several ? "'" : "", several ? one : "", several ? "' is " : "");
    const int wt = esmt_token_id(one[0]), mt = esmt_token_id(one[k - 1]);
    if (wt < 0 || mt < 0)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s%s%s'%c' is not a letter of the ESM-2 "
                       "alphabet", several ? "'" : "", several ? one : "", several ? "': " : "",
                       wt < 0 ? one[0] : one[k - 1]);
    if (n == cap) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "too many mutations");
    for (int j = 0; j < n; j++)
      if (out[j].residue == pos)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "position %lld is mutated twice", pos);
    out[n].wt = wt;
    out[n].mt = mt;
    out[n].residue = pos;
    n++;
    if (!colon) {
      *count = n;
      return ESMT_OK;
    }
    p = colon + 1;
  }
}

typedef struct slot { int prot; int64_t r; } slot;

typedef struct marginals {
  const slot *s;
  size_t n_s;
  double *logp;              /* [n_s x 33] */
  uint64_t prots_done;
} marginals;

static int slot_cmp(const void *x, const void *y) {
  const slot *a = x, *b = y;
  return a->prot != b->prot ? (a->prot > b->prot) - (a->prot < b->prot)
                            : (a->r > b->r) - (a->r < b->r);
}

static int on_row(void *user, uint64_t tag, const double *logp) {
  marginals *v = user;
  memcpy(v->logp + tag * ESMT_VOCAB_SIZE, logp, ESMT_VOCAB_SIZE * sizeof *logp);
  if (tag + 1 == v->n_s || v->s[tag + 1].prot != v->s[tag].prot) v->prots_done++;
  return 0;
}

static esmt_status check_variants(int np, const int32_t *const *res, const int *len,
                                  const esmt_variant *v, size_t nv, size_t *n_m) {
  const char *fn = "esmt_score_variants";
  *n_m = 0;
  for (size_t i = 0; i < nv; i++) {
    if (v[i].protein < 0 || v[i].protein >= np || v[i].count < 0 ||
        (v[i].count && !v[i].mutations))
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: variant %zu names protein %d of %d, or "
                       "has no mutations array", fn, i, v[i].protein, np);
    const int p = v[i].protein;
    for (int j = 0; j < v[i].count; j++) {
      const esmt_mutation *m = &v[i].mutations[j];
      if (m->residue < 0 || m->residue >= len[p])
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: variant %zu: residue %lld is outside "
                         "protein %d (%d residues)", fn, i, (long long)m->residue, p, len[p]);
      if (res[p][m->residue] != m->wt || m->mt < 0 || m->mt >= ESMT_VOCAB_SIZE)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: variant %zu: protein %d has %s at "
                         "residue %lld, not %s (or the mutant is no token)", fn, i, p,
                         esmt_token_string(res[p][m->residue]), (long long)m->residue,
                         esmt_token_string(m->wt) ? esmt_token_string(m->wt) : "?");
    }
    *n_m += (size_t)v[i].count;
  }
  return ESMT_OK;
}

/* The distinct masked positions, sorted. */
static slot *make_slots(const esmt_variant *v, size_t nv, size_t n_m, size_t *n_s) {
  slot *s = malloc((n_m ? n_m : 1) * sizeof *s);
  if (!s) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < nv; i++)
    for (int j = 0; j < v[i].count; j++)
      s[k++] = (slot){v[i].protein, v[i].mutations[j].residue};
  qsort(s, n_m, sizeof *s, slot_cmp);
  size_t n = 0;
  for (size_t i = 0; i < n_m; i++)
    if (!n || slot_cmp(&s[n - 1], &s[i])) s[n++] = s[i];
  *n_s = n;
  return s;
}

static int tick(esmt_progress_fn progress, void *user, const marginals *mg, uint64_t done,
                double t0) {
  if (!progress) return 0;
  esmt_progress pr = ESMT_PROGRESS_INIT;
  pr.stage = "score";
  pr.unit = "positions";
  pr.done = done;
  pr.total = mg->n_s;
  pr.items = mg->prots_done;
  pr.elapsed_s = esmt_now_s() - t0;
  return progress(user, &pr);
}

esmt_status esmt_score_variants(esmt_model *model, int num_proteins,
                                const int32_t *const *residues, const int *lengths,
                                const esmt_variant *variants, size_t num_variants,
                                uint64_t batch_tokens, esmt_progress_fn progress,
                                void *progress_user, double *scores) {
  const char *fn = "esmt_score_variants";
  ESMT_CHECK_ARG(model && (!num_proteins || (residues && lengths)) &&
                 (!num_variants || (variants && scores)) && num_proteins >= 0, fn,
                 "model, residues, lengths, variants and scores must not be NULL");
  size_t n_m = 0;
  esmt_status st = check_variants(num_proteins, residues, lengths, variants, num_variants, &n_m);
  if (st) return st;
  marginals mg = {0};
  slot *s = make_slots(variants, num_variants, n_m, &mg.n_s);
  mg.s = s;
  mg.logp = malloc((mg.n_s ? mg.n_s : 1) * ESMT_VOCAB_SIZE * sizeof *mg.logp);
  esmt_masked_scorer *sb = NULL;
  if (!s || !mg.logp)
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu mutations", fn, n_m);
  if (!st) st = esmt_masked_scorer_create(model, batch_tokens, on_row, &mg, &sb);
  const double t0 = esmt_now_s();
  for (size_t i = 0; i < mg.n_s && !st; i++) {
    const int p = s[i].prot;
    st = esmt_masked_scorer_add(sb, residues[p], lengths[p], (int)s[i].r, i);
    if (!st && tick(progress, progress_user, &mg, esmt_masked_scorer_rows_done(sb), t0))
      st = esmt_fail(ESMT_ERR_CANCELLED, "%s: cancelled by the progress callback", fn);
  }
  if (!st) st = esmt_masked_scorer_flush(sb);
  if (!st && tick(progress, progress_user, &mg, esmt_masked_scorer_rows_done(sb), t0))
    st = esmt_fail(ESMT_ERR_CANCELLED, "%s: cancelled by the progress callback", fn);
  for (size_t i = 0; i < num_variants && !st; i++) {
    double score = 0;
    for (int j = 0; j < variants[i].count; j++) {
      const esmt_mutation *m = &variants[i].mutations[j];
      const slot key = {variants[i].protein, m->residue};
      const slot *at = bsearch(&key, s, mg.n_s, sizeof key, slot_cmp);
      const double *lp = mg.logp + (size_t)(at - s) * ESMT_VOCAB_SIZE;
      score += lp[m->mt] - lp[m->wt];
    }
    scores[i] = score;
  }
  esmt_masked_scorer_destroy(sb);
  free(s);
  free(mg.logp);
  return st;
}
