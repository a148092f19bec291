/* SPDX-License-Identifier: MIT */
/* esmt_embed (infer.h): proteins of any length through the model. Each
 * protein becomes one piece (it fits the window, or is truncated to it)
 * or several overlapping windows; the pieces are sorted by length and cut
 * into right-padded batches of at most batch_tokens positions, so that
 * padding stays small; each batch is one esmt_model_infer for every
 * requested layer. A protein's results are final when its last piece is
 * done. Windowed sums are kept in double, which holds the sum of a few
 * floats exactly: the result does not depend on the order in which the
 * windows were batched. */
#include <stdlib.h>
#include <string.h>

#include "infer_rows.h"

typedef struct piece {
  int protein;
  int len;
  int64_t start;  /* first residue */
} piece;

/* What a call needs besides the caller's arrays. */
typedef struct embed_job {
  int nl, W, S, d, per_token;
  const int *layers;
  double **acc;         /* windows: [nl * kept * d] sums then [nl * d] cls sums, per protein */
} embed_job;

static int by_length(const void *a, const void *b) {
  const piece *x = a, *y = b;
  if (x->len != y->len) return x->len < y->len ? 1 : -1; /* longest first */
  if (x->protein != y->protein) return x->protein < y->protein ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

static void mean_of(const float *rows, int64_t n, int d, float *mean) {
  for (int c = 0; c < d; c++) {
    double s = 0;
    for (int64_t t = 0; t < n; t++) s += rows[t * d + c];
    mean[c] = n ? (float)(s / (double)n) : 0.0f;
  }
}

/* All windows of p are in acc: per-residue averages, their mean, the
 * average cls. */
static esmt_status finish_windows(const embed_job *jb, esmt_embedding *p, const double *acc) {
  const int d = jb->d;
  int64_t *starts = malloc((size_t)(p->length / jb->S + 2) * sizeof *starts);
  int *cover = calloc((size_t)p->kept, sizeof *cover);
  double *ms = malloc((size_t)d * sizeof *ms);
  if (!starts || !cover || !ms) {
    free(starts), free(cover), free(ms);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_embed: out of memory averaging the windows "
                     "of a protein of %lld residues", (long long)p->length);
  }
  const int n = esmt_window_starts(p->length, jb->W, jb->S, starts);
  for (int w = 0; w < n; w++)
    for (int64_t r = starts[w]; r < starts[w] + jb->W; r++) cover[r]++;
  for (int j = 0; j < jb->nl; j++) {
    const double *a = acc + (size_t)j * p->kept * d;
    float *dst = p->per_token ? p->per_token + (size_t)j * p->kept * d : NULL;
    memset(ms, 0, (size_t)d * sizeof *ms);
    for (int64_t r = 0; r < p->kept; r++)
      for (int c = 0; c < d; c++) {
        const float v = (float)(a[r * d + c] / cover[r]);
        if (dst) dst[r * d + c] = v;
        ms[c] += v;
      }
    for (int c = 0; c < d; c++) p->mean[(size_t)j * d + c] = (float)(ms[c] / (double)p->kept);
    const double *ca = acc + (size_t)jb->nl * p->kept * d + (size_t)j * d;
    for (int c = 0; c < d; c++) p->cls[(size_t)j * d + c] = (float)(ca[c] / n);
  }
  free(starts);
  free(cover);
  free(ms);
  return ESMT_OK;
}

static int alloc_results(const embed_job *jb, esmt_embedding *p, double **acc, int windows) {
  const int64_t W = jb->W;
  p->kept = p->length <= W || !windows ? (p->length < W ? p->length : W) : p->length;
  p->pieces = p->length > W && windows ? esmt_window_starts(p->length, jb->W, jb->S, NULL) : 1;
  const size_t nd = (size_t)jb->nl * jb->d, td = (size_t)jb->nl * (size_t)p->kept * jb->d;
  p->mean = calloc(nd, sizeof(float));
  p->cls = calloc(nd, sizeof(float));
  p->per_token = jb->per_token && td ? malloc(td * sizeof(float)) : NULL;
  *acc = p->pieces > 1 ? calloc(td + nd, sizeof(double)) : NULL;
  return p->mean && p->cls && (p->per_token || !jb->per_token || !td) && (*acc || p->pieces == 1);
}

/* One batch's representations [nl][B][T][d] into the proteins. */
static esmt_status scatter(const embed_job *jb, esmt_embedding *out, int *done, const piece *pc,
                           int B, int T, const float *rep) {
  const int d = jb->d;
  for (int r = 0; r < B; r++) {
    esmt_embedding *p = &out[pc[r].protein];
    double *acc = jb->acc[pc[r].protein];
    for (int j = 0; j < jb->nl; j++) {
      const float *x = rep + (((size_t)j * B + r) * T) * d;
      if (p->pieces == 1) {
        memcpy(p->cls + (size_t)j * d, x, (size_t)d * sizeof(float));
        mean_of(x + d, pc[r].len, d, p->mean + (size_t)j * d);
        if (p->per_token)
          memcpy(p->per_token + (size_t)j * p->kept * d, x + d,
                 (size_t)pc[r].len * d * sizeof(float));
        continue;
      }
      double *a = acc + ((size_t)j * p->kept + (size_t)pc[r].start) * d;
      for (size_t k = 0; k < (size_t)pc[r].len * d; k++) a[k] += x[d + k];
      double *ca = acc + (size_t)jb->nl * p->kept * d + (size_t)j * d;
      for (int k = 0; k < d; k++) ca[k] += x[k];
    }
    if (++done[pc[r].protein] == p->pieces && p->pieces > 1) {
      esmt_status st = finish_windows(jb, p, acc);
      if (st) return st;
    }
  }
  return ESMT_OK;
}

/* The pieces of every protein, sorted longest first. */
static piece *make_pieces(const embed_job *jb, const esmt_embedding *out, int count, int np) {
  piece *pc = malloc((size_t)(np ? np : 1) * sizeof *pc);
  if (!pc) return NULL;
  int k = 0;
  for (int i = 0; i < count; i++) {
    const esmt_embedding *p = &out[i];
    if (p->pieces == 1) {
      pc[k++] = (piece){i, (int)p->kept, 0};
      continue;
    }
    for (int w = 0; w < p->pieces; w++) /* the same starts esmt_window_starts gives */
      pc[k++] = (piece){i, jb->W, w == p->pieces - 1 ? p->length - jb->W : (int64_t)w * jb->S};
  }
  qsort(pc, (size_t)np, sizeof *pc, by_length);
  return pc;
}

static esmt_status run_batches(const embed_job *jb, esmt_model *m, const esmt_embed_request *rq,
                               const int32_t *const *residues, esmt_embedding *out, int count,
                               int np) {
  const int64_t maxpos = (int64_t)jb->W + 2;
  const int64_t cap = rq->batch_tokens > maxpos ? rq->batch_tokens : maxpos;
  piece *pc = make_pieces(jb, out, count, np);
  int32_t *tok = malloc((size_t)cap * sizeof *tok);
  float *rep = malloc((size_t)cap * jb->d * jb->nl * sizeof *rep);
  int *done = calloc((size_t)(count ? count : 1), sizeof *done);
  esmt_status st = ESMT_OK;
  if (!pc || !tok || !rep || !done)
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_embed: out of memory for a batch of %lld "
                   "positions", (long long)cap);
  const double t0 = esmt_now_s();
  for (int at = 0; at < np && !st;) {
    const int T = pc[at].len + 2;
    int B = (int)(rq->batch_tokens / T);
    if (B < 1) B = 1;
    if (B > np - at) B = np - at;
    for (int r = 0; r < B; r++)
      esmt_row_write(tok + (size_t)r * T, T, residues[pc[at + r].protein] + pc[at + r].start,
                     pc[at + r].len);
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = B;
    b.seq_len = T;
    b.tokens = tok;
    esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
    q.outputs = ESMT_INFER_PER_TOKEN;
    q.per_token = rep;
    q.num_layers = jb->nl;
    q.layers = jb->layers;
    if ((st = esmt_model_infer(m, &b, &q)) || (st = scatter(jb, out, done, pc + at, B, T, rep)))
      break;
    at += B;
    esmt_progress pr = ESMT_PROGRESS_INIT;
    pr.stage = "embed";
    pr.unit = "windows";
    pr.done = (uint64_t)at;
    pr.total = (uint64_t)np;
    pr.elapsed_s = esmt_now_s() - t0;
    if (rq->progress && rq->progress(rq->progress_user, &pr))
      st = esmt_fail(ESMT_ERR_CANCELLED, "esmt_embed: cancelled by the progress callback");
  }
  free(pc);
  free(tok);
  free(rep);
  free(done);
  return st;
}

void esmt_embedding_release(esmt_embedding *e, int count) {
  for (int i = 0; e && i < count; i++) {
    free(e[i].mean);
    free(e[i].cls);
    free(e[i].per_token);
    e[i].mean = e[i].cls = e[i].per_token = NULL;
  }
}

static esmt_status check_request(esmt_model *m, const esmt_embed_request *rq, embed_job *jb,
                                 int count, const int32_t *const *residues,
                                 const int64_t *lengths, esmt_embedding *out) {
  const char *fn = "esmt_embed";
  ESMT_CHECK_ARG(m && rq && count >= 0 && (!count || (residues && lengths && out)), fn,
                 "model, request, residues, lengths and out must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_embed_request", rq->struct_size,
                                     sizeof(esmt_embed_request));
  for (int i = 0; !st && i < count; i++)
    st = esmt_check_struct(fn, "esmt_embedding", out[i].struct_size, sizeof(esmt_embedding));
  if (st) return st;
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  if ((st = esmt_model_get_config(m, &cfg))) return st;
  static const int last = -1;
  jb->nl = rq->num_layers > 0 ? rq->num_layers : 1;
  jb->layers = rq->num_layers > 0 ? rq->layers : &last;
  jb->W = cfg.max_positions - 2;
  jb->S = rq->stride > 0 ? rq->stride : (jb->W / 2 > 0 ? jb->W / 2 : 1);
  jb->d = cfg.hidden_size;
  jb->per_token = rq->per_token != 0;
  ESMT_CHECK_ARG(rq->num_layers <= 0 || rq->layers, fn, "layers must not be NULL");
  if (rq->long_policy != ESMT_LONG_TRUNCATE && rq->long_policy != ESMT_LONG_WINDOWS)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: long_policy %d (ESMT_LONG_TRUNCATE or "
                     "ESMT_LONG_WINDOWS)", fn, (int)rq->long_policy);
  if (jb->W < 1 || jb->S > jb->W)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: a stride of %d residues is more than the "
                     "window (%d): residues between windows would have no representation", fn,
                     jb->S, jb->W);
  if (rq->batch_tokens < 1)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: batch_tokens %lld (1 or more)", fn,
                     (long long)rq->batch_tokens);
  for (int i = 0; i < count; i++)
    if (lengths[i] < 0 || (lengths[i] && !residues[i]))
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: protein %d has no residues array or a "
                       "negative length", fn, i);
  return ESMT_OK;
}

esmt_status esmt_embed(esmt_model *m, const esmt_embed_request *rq, int count,
                       const int32_t *const *residues, const int64_t *lengths,
                       esmt_embedding *out) {
  embed_job jb = {0};
  esmt_status st = check_request(m, rq, &jb, count, residues, lengths, out);
  if (st) return st;
  jb.acc = calloc((size_t)(count ? count : 1), sizeof *jb.acc);
  if (!jb.acc) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_embed: out of memory");
  int np = 0;
  for (int i = 0; i < count; i++) out[i].mean = out[i].cls = out[i].per_token = NULL;
  for (int i = 0; i < count && !st; i++) {
    out[i].length = lengths[i];
    if (!alloc_results(&jb, &out[i], &jb.acc[i], rq->long_policy == ESMT_LONG_WINDOWS))
      st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_embed: out of memory for protein %d (%lld "
                     "residues)", i, (long long)lengths[i]);
    else
      np += out[i].pieces;
  }
  if (!st) st = run_batches(&jb, m, rq, residues, out, count, np);
  for (int i = 0; i < count; i++) free(jb.acc[i]);
  free(jb.acc);
  if (st) esmt_embedding_release(out, count);
  return st;
}
