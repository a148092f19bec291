/* SPDX-License-Identifier: MIT */
/* esmt_masked_scorer (infer.h): masked rows batched through
 * esmt_model_infer: one residue replaced by <mask>, the logits at that
 * position turned into log-probabilities (log_softmax in double over the
 * whole vocabulary). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer_rows.h"

struct esmt_masked_scorer {
  esmt_model *model;
  int W;                     /* residues per row at most: max_positions - 2 */
  uint64_t budget;           /* B*T of a batch at most (one row always fits) */
  esmt_masked_row_fn fn;
  void *user;
  int rows, cap, T;          /* queued rows, their capacity, the longest row */
  const int32_t **tok;       /* each queued row: its protein, length, masked residue, tag */
  int *n, *r;
  uint64_t *tag;
  int32_t *tokens;           /* [B*T] the batch */
  float *logits;             /* [B*T*V] */
  size_t tokens_cap;
  uint64_t done;
};

esmt_status esmt_masked_scorer_create(esmt_model *model, uint64_t batch_tokens,
                                      esmt_masked_row_fn fn, void *user,
                                      esmt_masked_scorer **out) {
  const char *f = "esmt_masked_scorer_create";
  ESMT_CHECK_ARG(model && fn && out, f, "model, fn and out must not be NULL");
  *out = NULL;
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  esmt_status st = esmt_model_get_config(model, &cfg);
  if (st) return esmt_fail_prefix(st, "%s: model configuration: ", f);
  if (cfg.vocab_size != ESMT_VOCAB_SIZE || cfg.max_positions < 3)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "the model has a vocabulary of %d tokens and "
                     "rows of %d positions: scoring needs the ESM-2 alphabet (%d) and rows of 3 "
                     "or more", cfg.vocab_size, cfg.max_positions, ESMT_VOCAB_SIZE);
  esmt_masked_scorer *sb = calloc(1, sizeof *sb);
  if (!sb) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", f);
  sb->model = model;
  sb->W = cfg.max_positions - 2;
  sb->budget = batch_tokens;
  sb->fn = fn;
  sb->user = user;
  *out = sb;
  return ESMT_OK;
}

void esmt_masked_scorer_destroy(esmt_masked_scorer *sb) {
  if (!sb) return;
  free(sb->tok);
  free(sb->n);
  free(sb->r);
  free(sb->tag);
  free(sb->tokens);
  free(sb->logits);
  free(sb);
}

uint64_t esmt_masked_scorer_rows_done(const esmt_masked_scorer *sb) { return sb ? sb->done : 0; }
int esmt_masked_scorer_window(const esmt_masked_scorer *sb) { return sb ? sb->W : 0; }

/* The window rule (infer.h): first residue of the row of residue r. */
static int window_start(int n, int W, int r) {
  if (n <= W) return 0;
  int s = r - W / 2;
  if (s > n - W) s = n - W;
  return s < 0 ? 0 : s;
}

static esmt_status grow_rows(esmt_masked_scorer *sb) {
  if (sb->rows < sb->cap) return ESMT_OK;
  const int cap = sb->cap ? 2 * sb->cap : 256;
  const int32_t **tok = realloc(sb->tok, (size_t)cap * sizeof *tok);
  if (tok) sb->tok = tok;
  int *n = realloc(sb->n, (size_t)cap * sizeof *n);
  if (n) sb->n = n;
  int *r = realloc(sb->r, (size_t)cap * sizeof *r);
  if (r) sb->r = r;
  uint64_t *tag = realloc(sb->tag, (size_t)cap * sizeof *tag);
  if (tag) sb->tag = tag;
  if (!tok || !n || !r || !tag)
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_masked_scorer_add: out of memory queueing %d "
                     "rows", cap);
  sb->cap = cap;
  return ESMT_OK;
}

esmt_status esmt_masked_scorer_add(esmt_masked_scorer *sb, const int32_t *tok, int n, int r,
                                   uint64_t tag) {
  const char *f = "esmt_masked_scorer_add";
  ESMT_CHECK_ARG(sb && tok && n >= 1 && r >= 0 && r < n, f,
                 "scorer and residues must not be NULL, and 0 <= r < n");
  const int len = (n < sb->W ? n : sb->W) + 2;
  const int T = len > sb->T ? len : sb->T;
  esmt_status st;
  if (sb->rows > 0 && (uint64_t)(sb->rows + 1) * (uint64_t)T > sb->budget &&
      (st = esmt_masked_scorer_flush(sb)))
    return st;
  if ((st = grow_rows(sb))) return st;
  sb->tok[sb->rows] = tok;
  sb->n[sb->rows] = n;
  sb->r[sb->rows] = r;
  sb->tag[sb->rows] = tag;
  sb->rows++;
  if (len > sb->T) sb->T = len;
  return ESMT_OK;
}

/* The queued rows, right-padded, into sb->tokens [rows x T]. */
static esmt_status lay_out(esmt_masked_scorer *sb) {
  const size_t need = (size_t)sb->rows * (size_t)sb->T;
  if (need > sb->tokens_cap) {
    int32_t *t = realloc(sb->tokens, need * sizeof *t);
    if (t) sb->tokens = t;
    float *l = realloc(sb->logits, need * ESMT_VOCAB_SIZE * sizeof *l);
    if (l) sb->logits = l;
    if (!t || !l)
      return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_masked_scorer: out of memory for a batch "
                       "of %d x %d tokens", sb->rows, sb->T);
    sb->tokens_cap = need;
  }
  for (int i = 0; i < sb->rows; i++) {
    int32_t *row = sb->tokens + (size_t)i * sb->T;
    const int n = sb->n[i], s = window_start(n, sb->W, sb->r[i]), w = n < sb->W ? n : sb->W;
    esmt_row_write(row, sb->T, sb->tok[i] + s, w);
    row[1 + sb->r[i] - s] = ESMT_TOKEN_MASK;
  }
  return ESMT_OK;
}

esmt_status esmt_masked_scorer_flush(esmt_masked_scorer *sb) {
  ESMT_CHECK_ARG(sb, "esmt_masked_scorer_flush", "scorer must not be NULL");
  if (!sb->rows) return ESMT_OK;
  esmt_status st = lay_out(sb);
  if (st) return st;
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = sb->rows;
  b.seq_len = sb->T;
  b.tokens = sb->tokens;
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_LOGITS;
  q.logits = sb->logits;
  if ((st = esmt_model_infer(sb->model, &b, &q)))
    return esmt_fail_prefix(st, "inference of %d rows x %d positions: ", sb->rows, sb->T);
  double logp[ESMT_VOCAB_SIZE];
  for (int i = 0; i < sb->rows; i++) {
    const int s = window_start(sb->n[i], sb->W, sb->r[i]);
    const float *lg = sb->logits + ((size_t)i * sb->T + 1 + (size_t)(sb->r[i] - s)) *
                                       ESMT_VOCAB_SIZE;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < ESMT_VOCAB_SIZE; v++) mx = lg[v] > mx ? lg[v] : mx;
    for (int v = 0; v < ESMT_VOCAB_SIZE; v++) sum += exp((double)lg[v] - mx);
    const double lse = mx + log(sum);
    if (!isfinite(lse))
      return esmt_fail(ESMT_ERR_NUMERIC, "the model gave non-finite logits at masked residue %d "
                       "(of %d); nothing is written for it (a half-precision overflow? try the "
                       "cpu backend)", sb->r[i] + 1, sb->n[i]);
    for (int v = 0; v < ESMT_VOCAB_SIZE; v++) logp[v] = (double)lg[v] - lse;
    if (sb->fn(sb->user, sb->tag[i], logp))
      return esmt_fail(ESMT_ERR_CANCELLED, "esmt_masked_scorer: stopped by the row callback");
  }
  sb->done += (uint64_t)sb->rows;
  sb->rows = 0;
  sb->T = 0;
  return ESMT_OK;
}
