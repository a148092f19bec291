/* SPDX-License-Identifier: MIT */
/* esmt_contact_head_train (infer.h): the contact head fitted the way
 * fair-esm fitted ESM-2's, a logistic regression on a frozen model's
 * contact features (esmt_contact_features: attention maps symmetrised and
 * APC-corrected, layers x heads values a residue pair), here with an L2
 * penalty and Newton's method: the K + 1 unknowns are few (K = layers x
 * heads), so each step solves the exact Hessian by Cholesky and the fit
 * does not depend on a learning rate. The features are standardised for
 * the fit (so that the penalty weighs each alike whatever its scale: the
 * APC-corrected maps of a model are small numbers) and the weights mapped
 * back to the raw features. Samples: every pair i < j of each
 * protein with j - i >= min_separation, labelled 1 when listed as a
 * contact. Sums are in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer_rows.h"

/* At most this many feature floats (1 GiB) are kept for the fit. */
#define MAX_FEATURE_FLOATS ((uint64_t)1 << 28)

typedef struct samples {
  int K;
  uint64_t n, positives;
  float *x;          /* [n, K] */
  unsigned char *y;  /* [n] */
  int *protein;      /* [n] */
  float *sep;        /* [n] j - i */
  double *mean, *sd; /* [K] of the raw features; x is standardised */
} samples;

/* Pair (i, j) of a protein of n residues, i < j, j - i >= s0: its index. */
static uint64_t pairs_of(int n, int s0) {
  uint64_t c = 0;
  for (int d = s0; d < n; d++) c += (uint64_t)(n - d);
  return c;
}

static esmt_status collect(esmt_model *m, const esmt_contact_train_options *o, int count,
                           const int32_t *const *res, const int *len,
                           const esmt_contact_pair *pairs, size_t npairs, samples *s) {
  const char *fn = "esmt_contact_head_train";
  uint64_t total = 0;
  int maxn = 0;
  for (int p = 0; p < count; p++) {
    total += pairs_of(len[p], o->min_separation);
    if (len[p] > maxn) maxn = len[p];
  }
  if (!total)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: no residue pair at least %d apart in the "
                     "%d proteins", fn, o->min_separation, count);
  if (total * (uint64_t)s->K > MAX_FEATURE_FLOATS)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %llu residue pairs x %d features is more "
                     "than the %llu values a fit keeps; use fewer or shorter proteins", fn,
                     (unsigned long long)total, s->K, (unsigned long long)MAX_FEATURE_FLOATS);
  s->x = malloc(total * (uint64_t)s->K * sizeof *s->x);
  s->y = calloc(total, 1);
  s->protein = malloc(total * sizeof *s->protein);
  s->sep = malloc(total * sizeof *s->sep);
  float *feat = malloc((size_t)s->K * maxn * maxn * sizeof *feat);
  unsigned char *mark = malloc((size_t)maxn * maxn);
  esmt_status st = ESMT_OK;
  if (!s->x || !s->y || !s->protein || !s->sep || !feat || !mark)
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory for %llu residue pairs", fn,
                   (unsigned long long)total);
  for (int p = 0; p < count && !st; p++) {
    const int n = len[p];
    if ((st = esmt_contact_features(m, res[p], n, feat))) {
      st = esmt_fail_prefix(st, "%s: protein %d: ", fn, p + 1);
      break;
    }
    memset(mark, 0, (size_t)n * n);
    for (size_t k = 0; k < npairs; k++)
      if (pairs[k].protein == p) {
        mark[(size_t)pairs[k].i * n + pairs[k].j] = 1;
        mark[(size_t)pairs[k].j * n + pairs[k].i] = 1;
      }
    const size_t n2 = (size_t)n * n;
    for (int i = 0; i < n; i++)
      for (int j = i + o->min_separation; j < n; j++) {
        float *x = s->x + s->n * (uint64_t)s->K;
        for (int k = 0; k < s->K; k++) x[k] = feat[k * n2 + (size_t)i * n + j];
        s->y[s->n] = mark[(size_t)i * n + j];
        s->positives += s->y[s->n];
        s->protein[s->n] = p;
        s->sep[s->n] = (float)(j - i);
        s->n++;
      }
  }
  free(feat);
  free(mark);
  if (!st && !(s->mean = calloc((size_t)s->K, sizeof *s->mean)))
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  if (!st && !(s->sd = calloc((size_t)s->K, sizeof *s->sd)))
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  for (int k = 0; k < s->K && !st; k++) {
    double sum = 0, sq = 0;
    for (uint64_t r = 0; r < s->n; r++) sum += s->x[r * (uint64_t)s->K + k];
    const double mu = sum / (double)s->n;
    for (uint64_t r = 0; r < s->n; r++) {
      const double d = s->x[r * (uint64_t)s->K + k] - mu;
      sq += d * d;
    }
    const double sd = sqrt(sq / (double)s->n);
    s->mean[k] = mu;
    s->sd[k] = sd > 0 ? sd : 1; /* a constant feature stays 0 */
    for (uint64_t r = 0; r < s->n; r++) {
      float *x = &s->x[r * (uint64_t)s->K + k];
      *x = (float)((*x - mu) / s->sd[k]);
    }
  }
  if (!st && (s->positives == 0 || s->positives == s->n))
    st = esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: the %llu pairs at least %d apart are all %s; "
                   "a fit needs contacts and non-contacts", fn, (unsigned long long)s->n,
                   o->min_separation, s->positives ? "contacts" : "non-contacts");
  return st;
}

/* Mean log-loss + l2/2 |w|^2 (bias w[K] not penalised); with g and Hs
 * non-NULL also its gradient and Hessian ([K+1]^2). */
static double objective(const samples *s, double l2, const double *w, double *g, double *Hs) {
  const int K = s->K, P = K + 1;
  double loss = 0;
  if (g) memset(g, 0, (size_t)P * sizeof *g);
  if (Hs) memset(Hs, 0, (size_t)P * P * sizeof *Hs);
  for (uint64_t r = 0; r < s->n; r++) {
    const float *x = s->x + r * (uint64_t)K;
    double z = w[K];
    for (int k = 0; k < K; k++) z += w[k] * x[k];
    const double y = s->y[r];
    loss += (z > 0 ? z + log1p(exp(-z)) : log1p(exp(z))) - y * z;
    if (!g) continue;
    const double pr = 1 / (1 + exp(-z)), e = pr - y, v = pr * (1 - pr);
    for (int a = 0; a < P; a++) {
      const double xa = a < K ? x[a] : 1.0;
      g[a] += e * xa;
      for (int b = 0; b <= a; b++) Hs[a * P + b] += v * xa * (b < K ? x[b] : 1.0);
    }
  }
  const double inv = 1.0 / (double)s->n;
  loss *= inv;
  for (int k = 0; k < K; k++) loss += 0.5 * l2 * w[k] * w[k];
  if (!g) return loss;
  for (int a = 0; a < P; a++) {
    g[a] = g[a] * inv + (a < K ? l2 * w[a] : 0);
    for (int b = 0; b <= a; b++) {
      Hs[a * P + b] = Hs[a * P + b] * inv + (a == b ? (a < K ? l2 : 1e-12) : 0);
      Hs[b * P + a] = Hs[a * P + b];
    }
  }
  return loss;
}

/* Solve H d = g in place (d into g) by Cholesky; 0 when H is not positive definite. */
static int cholesky_solve(double *H, double *g, int P) {
  for (int j = 0; j < P; j++) {
    double d = H[j * P + j];
    for (int k = 0; k < j; k++) d -= H[j * P + k] * H[j * P + k];
    if (!(d > 0)) return 0;
    H[j * P + j] = sqrt(d);
    for (int i = j + 1; i < P; i++) {
      double v = H[i * P + j];
      for (int k = 0; k < j; k++) v -= H[i * P + k] * H[j * P + k];
      H[i * P + j] = v / H[j * P + j];
    }
  }
  for (int i = 0; i < P; i++) {
    for (int k = 0; k < i; k++) g[i] -= H[i * P + k] * g[k];
    g[i] /= H[i * P + i];
  }
  for (int i = P - 1; i >= 0; i--) {
    for (int k = i + 1; k < P; k++) g[i] -= H[k * P + i] * g[k];
    g[i] /= H[i * P + i];
  }
  return 1;
}

typedef struct scored {
  float p;
  unsigned char y;
} scored;

static int by_score(const void *a, const void *b) {
  const float x = ((const scored *)a)->p, y = ((const scored *)b)->p;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Mean over proteins of the precision of the top n/5 pairs 24 or more apart. */
static double precision_long_l5(const samples *s, const double *w, int count, const int *len) {
  scored *buf = malloc(s->n * sizeof *buf);
  if (!buf) return -1;
  double sum = 0;
  int used = 0;
  for (int p = 0; p < count; p++) {
    uint64_t m = 0;
    for (uint64_t r = 0; r < s->n; r++) {
      if (s->protein[r] != p || s->sep[r] < 24) continue;
      double z = w[s->K];
      for (int k = 0; k < s->K; k++) z += w[k] * s->x[r * (uint64_t)s->K + k];
      buf[m++] = (scored){(float)z, s->y[r]};
    }
    const uint64_t top = (uint64_t)(len[p] / 5);
    if (!m || !top) continue;
    qsort(buf, m, sizeof *buf, by_score);
    uint64_t hit = 0;
    for (uint64_t r = 0; r < top && r < m; r++) hit += buf[r].y;
    sum += (double)hit / (double)(top < m ? top : m);
    used++;
  }
  free(buf);
  return used ? sum / used : -1;
}

static void samples_free(samples *s) {
  free(s->x), free(s->y), free(s->protein), free(s->sep), free(s->mean), free(s->sd);
}

esmt_status esmt_contact_head_train(esmt_model *model, const esmt_contact_train_options *options,
                                    int count, const int32_t *const *residues, const int *lengths,
                                    const esmt_contact_pair *contacts, size_t num_contacts,
                                    esmt_contact_train_result *result) {
  const char *fn = "esmt_contact_head_train";
  ESMT_CHECK_ARG(model && count > 0 && residues && lengths && (contacts || !num_contacts), fn,
                 "NULL argument or no protein");
  esmt_contact_train_options o = ESMT_CONTACT_TRAIN_OPTIONS_INIT;
  if (options) {
    esmt_status st = esmt_check_struct(fn, "esmt_contact_train_options", options->struct_size,
                                       sizeof o);
    if (st) return st;
    o = *options;
  }
  if (o.min_separation < 1 || !(o.l2 >= 0) || o.max_iterations < 1)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: min_separation %d (>= 1), l2 %g (>= 0), "
                     "max_iterations %d (>= 1)", fn, o.min_separation, o.l2, o.max_iterations);
  for (size_t k = 0; k < num_contacts; k++) {
    const esmt_contact_pair *c = &contacts[k];
    if (c->protein < 0 || c->protein >= count || c->i < 0 || c->j < 0 ||
        c->i >= lengths[c->protein] || c->j >= lengths[c->protein])
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: contact %zu (protein %d, residues %d, "
                       "%d) is outside the proteins given", fn, k, c->protein, c->i, c->j);
  }
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  esmt_status st = esmt_model_get_config(model, &cfg);
  if (st) return st;
  samples s = {.K = cfg.num_layers * cfg.num_heads};
  const int K = s.K, P = K + 1;
  if ((st = collect(model, &o, count, residues, lengths, contacts, num_contacts, &s))) {
    samples_free(&s);
    return st;
  }
  double *w = calloc((size_t)P, sizeof *w), *g = malloc((size_t)P * sizeof *g);
  double *Hs = malloc((size_t)P * P * sizeof *Hs), *t = malloc((size_t)P * sizeof *t);
  if (!w || !g || !Hs || !t) {
    free(w), free(g), free(Hs), free(t);
    samples_free(&s);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  /* start from the base rate */
  const double rate = (double)s.positives / (double)s.n;
  w[K] = log(rate / (1 - rate));
  double loss = objective(&s, o.l2, w, NULL, NULL);
  int it = 0;
  for (; it < o.max_iterations; it++) {
    objective(&s, o.l2, w, g, Hs);
    if (!cholesky_solve(Hs, g, P)) {
      st = esmt_fail(ESMT_ERR_NUMERIC, "%s: the Hessian is singular at step %d; raise l2", fn,
                     it + 1);
      break;
    }
    double step = 1, next = loss;
    for (int half = 0; half < 30; half++, step *= 0.5) { /* backtracking */
      for (int a = 0; a < P; a++) t[a] = w[a] - step * g[a];
      next = objective(&s, o.l2, t, NULL, NULL);
      if (next <= loss) break;
    }
    double moved = 0;
    for (int a = 0; a < P; a++) moved = fmax(moved, fabs(t[a] - w[a]));
    memcpy(w, t, (size_t)P * sizeof *w);
    const double gain = loss - next;
    loss = next;
    if (moved < 1e-10 || gain < 1e-12 * fmax(1.0, loss)) {
      it++;
      break;
    }
  }
  if (!st) {
    float *wf = malloc((size_t)K * sizeof *wf);
    if (!wf) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    double bias = w[K]; /* back to the raw features */
    for (int k = 0; k < K && !st; k++) {
      wf[k] = (float)(w[k] / s.sd[k]);
      bias -= w[k] * s.mean[k] / s.sd[k];
    }
    if (!st) st = esmt_model_set_contact_head(model, wf, K, (float)bias);
    free(wf);
  }
  if (!st && result) {
    esmt_contact_train_result r = ESMT_CONTACT_TRAIN_RESULT_INIT;
    r.pairs = s.n;
    r.contacts = s.positives;
    r.iterations = it;
    r.loss = loss;
    r.precision_long_l5 = precision_long_l5(&s, w, count, lengths);
    const uint32_t size = result->struct_size < sizeof r ? result->struct_size : sizeof r;
    memcpy(result, &r, size);
    result->struct_size = size;
  }
  free(w), free(g), free(Hs), free(t);
  samples_free(&s);
  return st;
}
