/* SPDX-License-Identifier: MIT */
/* Contact maps as ESM-2 defines them (fair-esm's ContactPredictionHead,
 * transformers' EsmContactPredictionHead): the attention probabilities of
 * every layer and head, the <cls> and <eos> rows and columns removed, each
 * map symmetrised (A + A^T) and average-product corrected
 * (F_ij - F_i. F_.j / F_..), then the contact head's logistic regression
 * over the L x H maps and a sigmoid. One protein is one row with no
 * padding, which gives exactly fair-esm's values for the protein's
 * residues: padding only adds zero rows and columns, which change no APC
 * sum. Sums are in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer_rows.h"

/* The model's window and shape; checks the protein fits. */
static esmt_status shape_of(esmt_model *model, int n, const char *fn, int *L, int *H) {
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  esmt_status st = esmt_model_get_config(model, &cfg);
  if (st) return st;
  const int W = cfg.max_positions - 2;
  if (n < 1)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: the protein is empty (no residues)", fn);
  if (n > W)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: a protein of %d residues is longer than "
                     "the model's window of %d residues (max_positions %d); contact maps of longer "
                     "proteins are averaged over windows by esmt_predict_contacts_windowed", fn,
                     n, W, cfg.max_positions);
  *L = cfg.num_layers;
  *H = cfg.num_heads;
  return ESMT_OK;
}

/* Every layer's attention of one protein: [L, H, n + 2, n + 2] (malloc'd). */
static esmt_status attention_of(esmt_model *model, const int32_t *residues, int n, int L, int H,
                                float **out) {
  const int N = n + 2;
  int32_t *row = malloc((size_t)N * sizeof *row);
  float *att = malloc((size_t)L * H * N * N * sizeof *att);
  if (!row || !att) {
    free(row), free(att);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "contacts: out of memory for the attention maps "
                     "of a protein of %d residues", n);
  }
  esmt_row_write(row, N, residues, n);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = 1;
  b.seq_len = N;
  b.tokens = row;
  esmt_infer_request r = ESMT_INFER_REQUEST_INIT;
  r.outputs = ESMT_INFER_ATTENTION;
  r.attention = att;
  esmt_status st = esmt_model_infer(model, &b, &r);
  free(row);
  if (st) {
    free(att);
    return st;
  }
  *out = att;
  return ESMT_OK;
}

/* One map A [N, N] (with cls and eos) into F [n, n]: residues only,
 * symmetrised, APC. */
static void feature_map(const float *A, int n, double *sym, double *rows, float *F) {
  const int N = n + 2;
  double total = 0;
  for (int i = 0; i < n; i++) {
    double s = 0;
    for (int j = 0; j < n; j++) {
      const double v = (double)A[(size_t)(i + 1) * N + j + 1] + A[(size_t)(j + 1) * N + i + 1];
      sym[(size_t)i * n + j] = v;
      s += v;
    }
    rows[i] = s; /* the column sums are the same: the map is symmetric */
    total += s;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      F[(size_t)i * n + j] = (float)(sym[(size_t)i * n + j] -
                                     (total != 0 ? rows[i] * rows[j] / total : 0.0));
}

esmt_status esmt_contact_features(esmt_model *model, const int32_t *residues, int n,
                                  float *features) {
  const char *fn = "esmt_contact_features";
  ESMT_CHECK_ARG(model && features && (residues || n == 0), fn, "NULL argument");
  int L = 0, H = 0;
  esmt_status st = shape_of(model, n, fn, &L, &H);
  float *att = NULL;
  if (!st) st = attention_of(model, residues, n, L, H, &att);
  if (st) return st;
  double *sym = malloc((size_t)n * n * sizeof *sym), *rows = malloc((size_t)n * sizeof *rows);
  if (!sym || !rows) {
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory (a protein of %d residues)", fn, n);
  } else {
    const size_t N2 = (size_t)(n + 2) * (n + 2), n2 = (size_t)n * n;
    for (int k = 0; k < L * H; k++) feature_map(att + k * N2, n, sym, rows, features + k * n2);
  }
  free(sym), free(rows), free(att);
  return st;
}

esmt_status esmt_predict_contacts(esmt_model *model, const int32_t *residues, int n,
                                  float *contacts) {
  const char *fn = "esmt_predict_contacts";
  ESMT_CHECK_ARG(model && contacts && (residues || n == 0), fn, "NULL argument");
  int L = 0, H = 0;
  esmt_status st = shape_of(model, n, fn, &L, &H);
  if (st) return st;
  const int K = L * H;
  float *w = malloc((size_t)K * sizeof *w), bias = 0;
  if (!w) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  if ((st = esmt_model_contact_head(model, w, K, &bias))) {
    free(w);
    return esmt_fail_prefix(st, "%s: ", fn);
  }
  const size_t n2 = (size_t)n * n;
  float *feat = malloc((size_t)K * n2 * sizeof *feat);
  double *logit = malloc(n2 * sizeof *logit);
  if (!feat || !logit) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory (a protein of "
                                      "%d residues)", fn, n);
  if (!st) st = esmt_contact_features(model, residues, n, feat);
  if (!st) {
    for (size_t i = 0; i < n2; i++) logit[i] = bias;
    for (int k = 0; k < K; k++)
      for (size_t i = 0; i < n2; i++) logit[i] += (double)w[k] * feat[k * n2 + i];
    for (size_t i = 0; i < n2; i++) contacts[i] = (float)(1.0 / (1.0 + exp(-logit[i])));
  }
  free(w), free(feat), free(logit);
  return st;
}

/* A protein longer than the window: embed's windows (esmt_window_starts),
 * each window's contact map computed as a protein of its own, the maps
 * averaged where windows overlap. A pair no window holds together (over a
 * window apart, or straddling two windows that overlap too little) has no
 * evidence and is 0. The contacts array counts the windows of each pair
 * until the end, where it receives the averages. */
static esmt_status windowed(esmt_model *model, const int32_t *residues, int n, int W, int S,
                            float *contacts) {
  const char *fn = "esmt_predict_contacts_windowed";
  const size_t n2 = (size_t)n * n, w2 = (size_t)W * W;
  int64_t *starts = malloc(((size_t)n / S + 2) * sizeof *starts);
  double *sum = calloc(n2, sizeof *sum);
  float *map = malloc(w2 * sizeof *map);
  esmt_status st = ESMT_OK;
  if (!starts || !sum || !map)
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory for the contact map of a protein "
                   "of %d residues", fn, n);
  const int nw = st ? 0 : esmt_window_starts(n, W, S, starts);
  if (!st) memset(contacts, 0, n2 * sizeof *contacts);
  for (int w = 0; w < nw && !st; w++) {
    const int64_t s = starts[w];
    if ((st = esmt_predict_contacts(model, residues + s, W, map))) {
      st = esmt_fail_prefix(st, "%s: the window of residues %lld..%lld: ", fn, (long long)s + 1,
                            (long long)s + W);
      break;
    }
    for (int i = 0; i < W; i++)
      for (int j = 0; j < W; j++) {
        const size_t at = (size_t)(s + i) * n + (size_t)(s + j);
        sum[at] += map[(size_t)i * W + j];
        contacts[at] += 1.0f;
      }
  }
  for (size_t k = 0; k < n2 && !st; k++)
    contacts[k] = contacts[k] > 0 ? (float)(sum[k] / contacts[k]) : 0.0f;
  free(starts), free(sum), free(map);
  return st;
}

esmt_status esmt_predict_contacts_windowed(esmt_model *model, const int32_t *residues, int n,
                                           int stride, float *contacts) {
  const char *fn = "esmt_predict_contacts_windowed";
  ESMT_CHECK_ARG(model && contacts && (residues || n == 0), fn, "NULL argument");
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  esmt_status st = esmt_model_get_config(model, &cfg);
  if (st) return st;
  const int W = cfg.max_positions - 2;
  if (n <= W) return esmt_predict_contacts(model, residues, n, contacts);
  const int S = stride > 0 ? stride : (W / 2 > 0 ? W / 2 : 1);
  if (W < 1 || S > W)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: a stride of %d residues is more than the "
                     "window (%d): residues between windows would have no contacts", fn, S, W);
  return windowed(model, residues, n, W, S, contacts);
}
