/* SPDX-License-Identifier: MIT */
/* esmt_embed (infer.h): proteins of any length through the model. Each
 * protein becomes one piece (it fits the window, or is truncated to it)
 * or several overlapping windows; the pieces are sorted by length and cut
 * into right-padded batches of at most batch_tokens positions, so that
 * padding stays small; each batch is one esmt_model_infer for every
 * requested layer. A protein's results are final when its last piece is
 * done. Windowed sums are kept in double, which holds the sum of a few
 * floats exactly: the result does not depend on the order in which the
 * windows were batched. Attention maps (esmt_embed_request.attention) take
 * one protein a batch: every layer's [heads, T, T] maps of a batch are
 * held at once, and one protein bounds them by the maps it asked for. */
#include <stddef.h>
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
  int attention, L, H;  /* attention: maps wanted; the model's layers and heads */
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
  const size_t ad = (size_t)jb->nl * jb->H * (size_t)p->kept * (size_t)p->kept;
  if (jb->attention) p->attention = ad ? malloc(ad * sizeof(float)) : NULL;
  *acc = p->pieces > 1 ? calloc(td + nd, sizeof(double)) : NULL;
  return p->mean && p->cls && (p->per_token || !jb->per_token || !td) &&
         (!jb->attention || p->attention || !ad) && (*acc || p->pieces == 1);
}

/* One protein's maps, every layer's [H, T, T] (att, a batch of one row),
 * into its requested layers' [H, kept, kept] without <cls>/<eos>. */
static void keep_maps(const embed_job *jb, esmt_embedding *p, int T, const float *att) {
  const int64_t k = p->kept;
  for (int j = 0; j < jb->nl && k; j++) {
    const int l = jb->layers[j] < 0 ? jb->L : jb->layers[j]; /* block l's softmax */
    for (int h = 0; h < jb->H; h++) {
      const float *a = att + (((size_t)(l - 1) * jb->H + h) * T + 1) * T + 1;
      float *dst = p->attention + ((size_t)j * jb->H + h) * (size_t)k * (size_t)k;
      for (int64_t i = 0; i < k; i++) memcpy(dst + i * k, a + i * T, (size_t)k * sizeof *dst);
    }
  }
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
  /* the longest piece comes first: its maps are the largest a batch holds */
  const size_t T0 = np ? (size_t)pc[0].len + 2 : 0;
  float *att = jb->attention && np && pc ? malloc((size_t)jb->L * jb->H * T0 * T0 * sizeof *att)
                                         : NULL;
  esmt_status st = ESMT_OK;
  if (jb->attention && np && !att)
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_embed: out of memory for the attention maps "
                   "of a protein of %zu residues (%llu bytes)", T0 - 2,
                   (unsigned long long)((size_t)jb->L * jb->H * T0 * T0 * sizeof(float)));
  else if (!pc || !tok || !rep || !done)
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_embed: out of memory for a batch of %lld "
                   "positions", (long long)cap);
  const double t0 = esmt_now_s();
  for (int at = 0; at < np && !st;) {
    const int T = pc[at].len + 2;
    int B = (int)(rq->batch_tokens / T);
    if (B < 1 || jb->attention) B = 1;
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
    if (jb->attention) {
      q.outputs |= ESMT_INFER_ATTENTION;
      q.attention = att;
    }
    if ((st = esmt_model_infer(m, &b, &q)) || (st = scatter(jb, out, done, pc + at, B, T, rep)))
      break;
    if (jb->attention) keep_maps(jb, &out[pc[at].protein], T, att);
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
  free(att);
  return st;
}

void esmt_embedding_release(esmt_embedding *e, int count) {
  for (int i = 0; e && i < count; i++) {
    free(e[i].mean);
    free(e[i].cls);
    free(e[i].per_token);
    e[i].mean = e[i].cls = e[i].per_token = NULL;
    if (e[i].struct_size >= offsetof(esmt_embedding, attention) + sizeof e[i].attention) {
      free(e[i].attention);
      e[i].attention = NULL;
    }
  }
}

/* Attention maps asked for: layers 1..L, proteins that fit or are
 * truncated, each under the cap. */
static esmt_status check_attention(const embed_job *jb, const esmt_embed_request *rq, int count,
                                   const int64_t *lengths, esmt_embedding *out) {
  const char *fn = "esmt_embed";
  for (int i = 0; i < count; i++)
    if (out[i].struct_size < sizeof(esmt_embedding))
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: esmt_embedding %d ends before its "
                       "attention field (struct_size %u): attention maps need the current "
                       "struct", fn, i, out[i].struct_size);
  for (int j = 0; j < jb->nl; j++)
    if (jb->layers[j] == 0)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: layer 0 (the embedding) has no "
                       "attention maps; layers 1..%d do", fn, jb->L);
  for (int i = 0; i < count; i++) {
    if (lengths[i] > jb->W && rq->long_policy == ESMT_LONG_WINDOWS)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: protein %d (%lld residues) is longer "
                       "than the window of %d residues: attention maps of windows are not "
                       "averaged (truncate it, or leave attention out)", fn, i,
                       (long long)lengths[i], jb->W);
    const uint64_t k = (uint64_t)(lengths[i] < jb->W ? lengths[i] : jb->W);
    const uint64_t bytes = (uint64_t)jb->nl * jb->H * k * k * sizeof(float);
    if (rq->max_attention_bytes && bytes > rq->max_attention_bytes)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: protein %d (%lld residues): its "
                       "attention maps (%d layers x %d heads x %llu^2 fp32) take %llu bytes, "
                       "over the cap of %llu bytes", fn, i, (long long)lengths[i], jb->nl,
                       jb->H, (unsigned long long)k, (unsigned long long)bytes,
                       (unsigned long long)rq->max_attention_bytes);
  }
  return ESMT_OK;
}

static esmt_status check_request(esmt_model *m, const esmt_embed_request *rq0, embed_job *jb,
                                 int count, const int32_t *const *residues,
                                 const int64_t *lengths, esmt_embedding *out,
                                 esmt_embed_request *rq) {
  const char *fn = "esmt_embed";
  ESMT_CHECK_ARG(m && rq0 && count >= 0 && (!count || (residues && lengths && out)), fn,
                 "model, request, residues, lengths and out must not be NULL");
  /* a caller from before the attention fields: its structs end before them */
  esmt_status st = esmt_check_struct(fn, "esmt_embed_request", rq0->struct_size,
                                     offsetof(esmt_embed_request, attention));
  for (int i = 0; !st && i < count; i++)
    st = esmt_check_struct(fn, "esmt_embedding", out[i].struct_size,
                           offsetof(esmt_embedding, attention));
  if (st) return st;
  *rq = (esmt_embed_request)ESMT_EMBED_REQUEST_INIT;
  memcpy(rq, rq0, rq0->struct_size < sizeof *rq ? rq0->struct_size : sizeof *rq);
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  if ((st = esmt_model_get_config(m, &cfg))) return st;
  static const int last = -1;
  jb->nl = rq->num_layers > 0 ? rq->num_layers : 1;
  jb->layers = rq->num_layers > 0 ? rq->layers : &last;
  jb->W = cfg.max_positions - 2;
  jb->S = rq->stride > 0 ? rq->stride : (jb->W / 2 > 0 ? jb->W / 2 : 1);
  jb->d = cfg.hidden_size;
  jb->per_token = rq->per_token != 0;
  jb->attention = rq->attention != 0;
  jb->L = cfg.num_layers;
  jb->H = cfg.num_heads;
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
  return jb->attention ? check_attention(jb, rq, count, lengths, out) : ESMT_OK;
}

esmt_status esmt_embed(esmt_model *m, const esmt_embed_request *request, int count,
                       const int32_t *const *residues, const int64_t *lengths,
                       esmt_embedding *out) {
  embed_job jb = {0};
  esmt_embed_request rq = ESMT_EMBED_REQUEST_INIT;
  esmt_status st = check_request(m, request, &jb, count, residues, lengths, out, &rq);
  if (st) return st;
  jb.acc = calloc((size_t)(count ? count : 1), sizeof *jb.acc);
  if (!jb.acc) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_embed: out of memory");
  int np = 0;
  for (int i = 0; i < count; i++) {
    out[i].mean = out[i].cls = out[i].per_token = NULL;
    if (out[i].struct_size >= sizeof(esmt_embedding)) out[i].attention = NULL;
  }
  for (int i = 0; i < count && !st; i++) {
    out[i].length = lengths[i];
    if (!alloc_results(&jb, &out[i], &jb.acc[i], rq.long_policy == ESMT_LONG_WINDOWS))
      st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_embed: out of memory for protein %d (%lld "
                     "residues)", i, (long long)lengths[i]);
    else
      np += out[i].pieces;
  }
  if (!st) st = run_batches(&jb, m, &rq, residues, out, count, np);
  for (int i = 0; i < count; i++) free(jb.acc[i]);
  free(jb.acc);
  if (st) esmt_embedding_release(out, count);
  return st;
}

esmt_status esmt_embed_attention_bytes(esmt_model *model, int num_layers, int64_t residues,
                                       uint64_t *bytes) {
  ESMT_CHECK_ARG(model && bytes && num_layers >= 0 && residues >= 0,
                 "esmt_embed_attention_bytes", "model and bytes must not be NULL, counts >= 0");
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  esmt_status st = esmt_model_get_config(model, &cfg);
  if (st) return st;
  const int64_t W = cfg.max_positions - 2, k = residues < W ? residues : W;
  *bytes = (uint64_t)num_layers * (uint64_t)cfg.num_heads * (uint64_t)k * (uint64_t)k *
           sizeof(float);
  return ESMT_OK;
}
