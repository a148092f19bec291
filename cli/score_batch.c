/* SPDX-License-Identifier: MIT */
/* `score`: masked rows batched through esmt_model_infer (score_common.h):
 * one residue replaced by <mask>, the logits at that position turned into
 * log-probabilities (log_softmax in double over the whole vocabulary). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "score_common.h"


struct score_batcher {
  esmt_model *model;
  int W;                     /* residues per row at most: max_positions - 2 */
  uint64_t budget;           /* B*T of a batch at most (one row always fits) */
  score_row_fn fn;
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

score_batcher *score_batcher_create(esmt_model *model, uint64_t batch_tokens, score_row_fn fn,
                                    void *user) {
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  esmt_status st = esmt_model_get_config(model, &cfg);
  if (st) {
    cli_error("score: model configuration", st);
    return NULL;
  }
  if (cfg.vocab_size != ESMT_VOCAB_SIZE || cfg.max_positions < 3) {
    fprintf(stderr, SCORE_PREFIX "the model has a vocabulary of %d tokens and rows of %d "
            "positions: scoring needs the ESM-2 alphabet (%d) and rows of 3 or more\n",
            cfg.vocab_size, cfg.max_positions, ESMT_VOCAB_SIZE);
    return NULL;
  }
  score_batcher *sb = calloc(1, sizeof *sb);
  if (!sb) {
    fprintf(stderr, SCORE_PREFIX "out of memory\n");
    return NULL;
  }
  sb->model = model;
  sb->W = cfg.max_positions - 2;
  sb->budget = batch_tokens;
  sb->fn = fn;
  sb->user = user;
  return sb;
}

void score_batcher_destroy(score_batcher *sb) {
  if (!sb) return;
  free(sb->tok);
  free(sb->n);
  free(sb->r);
  free(sb->tag);
  free(sb->tokens);
  free(sb->logits);
  free(sb);
}

uint64_t score_batcher_rows_done(const score_batcher *sb) { return sb->done; }
int score_batcher_window(const score_batcher *sb) { return sb->W; }

/* The window rule (score_common.h): first residue of the row of residue r. */
static int window_start(int n, int W, int r) {
  if (n <= W) return 0;
  int s = r - W / 2;
  if (s > n - W) s = n - W;
  return s < 0 ? 0 : s;
}

static int grow_rows(score_batcher *sb) {
  if (sb->rows < sb->cap) return 0;
  const int cap = sb->cap ? 2 * sb->cap : 256;
  const int32_t **tok = realloc(sb->tok, (size_t)cap * sizeof *tok);
  if (tok) sb->tok = tok;
  int *n = realloc(sb->n, (size_t)cap * sizeof *n);
  if (n) sb->n = n;
  int *r = realloc(sb->r, (size_t)cap * sizeof *r);
  if (r) sb->r = r;
  uint64_t *tag = realloc(sb->tag, (size_t)cap * sizeof *tag);
  if (tag) sb->tag = tag;
  if (!tok || !n || !r || !tag) {
    fprintf(stderr, SCORE_PREFIX "out of memory queueing %d rows\n", cap);
    return 1;
  }
  sb->cap = cap;
  return 0;
}

int score_batcher_add(score_batcher *sb, const int32_t *tok, int n, int r, uint64_t tag) {
  const int len = (n < sb->W ? n : sb->W) + 2;
  const int T = len > sb->T ? len : sb->T;
  if (sb->rows > 0 && (uint64_t)(sb->rows + 1) * (uint64_t)T > sb->budget &&
      score_batcher_flush(sb))
    return 1;
  if (grow_rows(sb)) return 1;
  sb->tok[sb->rows] = tok;
  sb->n[sb->rows] = n;
  sb->r[sb->rows] = r;
  sb->tag[sb->rows] = tag;
  sb->rows++;
  if (len > sb->T) sb->T = len;
  return 0;
}

/* The queued rows, right-padded, into sb->tokens [rows x T]. */
static int lay_out(score_batcher *sb) {
  const size_t need = (size_t)sb->rows * (size_t)sb->T;
  if (need > sb->tokens_cap) {
    int32_t *t = realloc(sb->tokens, need * sizeof *t);
    if (t) sb->tokens = t;
    float *l = realloc(sb->logits, need * ESMT_VOCAB_SIZE * sizeof *l);
    if (l) sb->logits = l;
    if (!t || !l) {
      fprintf(stderr, SCORE_PREFIX "out of memory for a batch of %d x %d tokens\n", sb->rows,
              sb->T);
      return 1;
    }
    sb->tokens_cap = need;
  }
  for (int i = 0; i < sb->rows; i++) {
    int32_t *row = sb->tokens + (size_t)i * sb->T;
    const int n = sb->n[i], s = window_start(n, sb->W, sb->r[i]), w = n < sb->W ? n : sb->W;
    row[0] = ESMT_TOKEN_CLS;
    memcpy(row + 1, sb->tok[i] + s, (size_t)w * sizeof *row);
    row[1 + sb->r[i] - s] = ESMT_TOKEN_MASK;
    row[w + 1] = ESMT_TOKEN_EOS;
    for (int t = w + 2; t < sb->T; t++) row[t] = ESMT_TOKEN_PAD;
  }
  return 0;
}

int score_batcher_flush(score_batcher *sb) {
  if (!sb->rows) return 0;
  if (lay_out(sb)) return 1;
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = sb->rows;
  b.seq_len = sb->T;
  b.tokens = sb->tokens;
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_LOGITS;
  q.logits = sb->logits;
  esmt_status st = esmt_model_infer(sb->model, &b, &q);
  if (st) {
    char what[96];
    snprintf(what, sizeof what, "score: inference of %d rows x %d positions", sb->rows, sb->T);
    cli_error(what, st);
    return 1;
  }
  double logp[ESMT_VOCAB_SIZE];
  for (int i = 0; i < sb->rows; i++) {
    const int s = window_start(sb->n[i], sb->W, sb->r[i]);
    const float *lg = sb->logits + ((size_t)i * sb->T + 1 + (size_t)(sb->r[i] - s)) *
                                       ESMT_VOCAB_SIZE;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < ESMT_VOCAB_SIZE; v++) mx = lg[v] > mx ? lg[v] : mx;
    for (int v = 0; v < ESMT_VOCAB_SIZE; v++) sum += exp((double)lg[v] - mx);
    const double lse = mx + log(sum);
    if (!isfinite(lse)) {
      fprintf(stderr, SCORE_PREFIX "the model gave non-finite logits at masked residue %d (of "
              "%d); nothing is written for it (a half-precision overflow? try --backend cpu)\n",
              sb->r[i] + 1, sb->n[i]);
      return 1;
    }
    for (int v = 0; v < ESMT_VOCAB_SIZE; v++) logp[v] = (double)lg[v] - lse;
    if (sb->fn(sb->user, sb->tag[i], logp)) return 1;
  }
  sb->done += (uint64_t)sb->rows;
  sb->rows = 0;
  sb->T = 0;
  return 0;
}
