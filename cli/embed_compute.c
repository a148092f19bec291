/* SPDX-License-Identifier: MIT */
/* A chunk of proteins through the model (embed.h): each protein becomes
 * one piece (it fits the window, or is truncated to it) or several
 * overlapping windows; the pieces are sorted by length and cut into
 * right-padded batches of at most --batch-tokens positions, so that
 * padding stays small; each batch is one esmt_model_infer for every
 * requested layer. A protein's results are final when its last piece is
 * done. Windowed sums are kept in double, which holds the sum of a few
 * floats exactly: the result does not depend on the order in which the
 * windows were batched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embed.h"

typedef struct piece {
  int protein;
  int len;
  int64_t start;  /* first residue */
} piece;

/* Window starts of a protein of n > W residues: 0, S, 2S, ... and a last
 * one ending at the protein's end. Returns the count; fills starts when
 * not NULL (room for n / S + 2). */
static int window_starts(int64_t n, int W, int S, int64_t *starts) {
  int k = 0;
  int64_t s = 0;
  for (; s + W < n; s += S, k++)
    if (starts) starts[k] = s;
  if (starts) starts[k] = n - W;
  return k + 1;
}

uint64_t embed_id_hash(uint64_t h, const char *id) {
  if (!h) h = 1469598103934665603ull;
  for (const char *p = id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return (h ^ '\n') * 1099511628211ull;
}

void embed_chunk_clear(embed_chunk *c) {
  for (int i = 0; i < c->n; i++) {
    embed_protein *p = &c->p[i];
    free(p->id);
    free(p->tokens);
    free(p->mean);
    free(p->cls);
    free(p->tok);
    free(p->acc);
  }
  c->n = 0;
  c->residues = 0;
}

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
 * average cls. Returns 0, or -1 out of memory. */
static int finish_windows(const embed_options *o, embed_protein *p, int d) {
  int64_t *starts = malloc((size_t)(p->length / o->stride + 2) * sizeof *starts);
  int *cover = calloc((size_t)p->kept, sizeof *cover);
  double *ms = malloc((size_t)d * sizeof *ms);
  if (!starts || !cover || !ms) return free(starts), free(cover), free(ms), -1;
  const int n = window_starts(p->length, o->window, o->stride, starts);
  for (int w = 0; w < n; w++)
    for (int64_t r = starts[w]; r < starts[w] + o->window; r++) cover[r]++;
  for (int j = 0; j < o->nl; j++) {
    const double *a = p->acc + (size_t)j * p->kept * d;
    float *dst = p->tok ? p->tok + (size_t)j * p->kept * d : NULL;
    memset(ms, 0, (size_t)d * sizeof *ms);
    for (int64_t r = 0; r < p->kept; r++)
      for (int c = 0; c < d; c++) {
        const float v = (float)(a[r * d + c] / cover[r]);
        if (dst) dst[r * d + c] = v;
        ms[c] += v;
      }
    for (int c = 0; c < d; c++) p->mean[(size_t)j * d + c] = (float)(ms[c] / (double)p->kept);
    const double *ca = p->acc + (size_t)o->nl * p->kept * d + (size_t)j * d;
    for (int c = 0; c < d; c++) p->cls[(size_t)j * d + c] = (float)(ca[c] / n);
  }
  free(starts);
  free(cover);
  free(ms);
  return 0;
}

static int alloc_results(const embed_options *o, embed_protein *p, int d) {
  const int64_t W = o->window;
  p->kept = p->length <= W || o->long_policy == EMBED_TRUNCATE ? (p->length < W ? p->length : W)
                                                              : p->length;
  p->pieces = p->length > W && o->long_policy == EMBED_WINDOWS
                  ? window_starts(p->length, o->window, o->stride, NULL) : 1;
  p->pieces_done = 0;
  const size_t nd = (size_t)o->nl * d, td = (size_t)o->nl * (size_t)p->kept * d;
  p->mean = calloc(nd, sizeof(float));
  p->cls = calloc(nd, sizeof(float));
  p->tok = (o->include & EMBED_PER_TOK) && td ? malloc(td * sizeof(float)) : NULL;
  p->acc = p->pieces > 1 ? calloc(td + nd, sizeof(double)) : NULL;
  return p->mean && p->cls && (p->tok || !(o->include & EMBED_PER_TOK) || !td) &&
         (p->acc || p->pieces == 1);
}

/* One batch's representations [nl][B][T][d] into the proteins. */
static int scatter(const embed_options *o, embed_chunk *c, const piece *pc, int B, int T, int d,
                   const float *rep) {
  for (int r = 0; r < B; r++) {
    embed_protein *p = &c->p[pc[r].protein];
    for (int j = 0; j < o->nl; j++) {
      const float *x = rep + (((size_t)j * B + r) * T) * d;
      if (p->pieces == 1) {
        memcpy(p->cls + (size_t)j * d, x, (size_t)d * sizeof(float));
        mean_of(x + d, pc[r].len, d, p->mean + (size_t)j * d);
        if (p->tok)
          memcpy(p->tok + (size_t)j * p->kept * d, x + d, (size_t)pc[r].len * d * sizeof(float));
        continue;
      }
      double *a = p->acc + ((size_t)j * p->kept + (size_t)pc[r].start) * d;
      for (size_t k = 0; k < (size_t)pc[r].len * d; k++) a[k] += x[d + k];
      double *ca = p->acc + (size_t)o->nl * p->kept * d + (size_t)j * d;
      for (int k = 0; k < d; k++) ca[k] += x[k];
    }
    if (++p->pieces_done == p->pieces && p->pieces > 1 && finish_windows(o, p, d)) {
      fprintf(stderr, "esmtrain-example: embed: out of memory averaging the windows of '%s'\n",
              p->id);
      return -1;
    }
  }
  return 0;
}

int embed_compute(const embed_options *o, esmt_model *m, int d, embed_chunk *c) {
  int np = 0;
  for (int i = 0; i < c->n; i++) {
    if (!alloc_results(o, &c->p[i], d)) {
      fprintf(stderr, "esmtrain-example: embed: out of memory for protein '%s' (%lld "
              "residues)\n", c->p[i].id, (long long)c->p[i].length);
      return -1;
    }
    np += c->p[i].pieces;
  }
  piece *pc = malloc((size_t)(np ? np : 1) * sizeof *pc);
  const int64_t maxpos = (int64_t)o->window + 2;
  const int64_t cap = o->batch_tokens > maxpos ? o->batch_tokens : maxpos;
  int32_t *tok = malloc((size_t)cap * sizeof *tok);
  float *rep = malloc((size_t)cap * d * o->nl * sizeof *rep);
  int rc = 0;
  if (!pc || !tok || !rep) {
    fprintf(stderr, "esmtrain-example: embed: out of memory for a batch of %lld positions\n",
            (long long)cap);
    rc = -1;
  }
  int k = 0;
  for (int i = 0; i < c->n && !rc; i++) {
    embed_protein *p = &c->p[i];
    if (p->pieces == 1) {
      pc[k++] = (piece){i, (int)p->kept, 0};
      continue;
    }
    const int n = window_starts(p->length, o->window, o->stride, NULL);
    for (int w = 0; w < n; w++) /* the same starts window_starts gives */
      pc[k++] = (piece){i, o->window, w == n - 1 ? p->length - o->window : (int64_t)w * o->stride};
  }
  if (!rc) qsort(pc, (size_t)np, sizeof *pc, by_length);
  for (int at = 0; at < np && !rc;) {
    if (cli_signal_caught()) {
      rc = 1; /* stopped: the chunk is dropped, and redone on resume */
      break;
    }
    const int T = pc[at].len + 2;
    int B = (int)(o->batch_tokens / T);
    if (B < 1) B = 1;
    if (B > np - at) B = np - at;
    for (int r = 0; r < B; r++) {
      const piece *q = &pc[at + r];
      int32_t *row = tok + (size_t)r * T;
      row[0] = ESMT_TOKEN_CLS;
      memcpy(row + 1, c->p[q->protein].tokens + q->start, (size_t)q->len * sizeof(int32_t));
      row[q->len + 1] = ESMT_TOKEN_EOS;
      for (int t = q->len + 2; t < T; t++) row[t] = ESMT_TOKEN_PAD;
    }
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = B;
    b.seq_len = T;
    b.tokens = tok;
    esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
    q.outputs = ESMT_INFER_PER_TOKEN;
    q.per_token = rep;
    q.num_layers = o->nl;
    q.layers = o->layers;
    esmt_status st = esmt_model_infer(m, &b, &q);
    if (st) {
      cli_error("embed", st);
      rc = -1;
      break;
    }
    if ((rc = scatter(o, c, pc + at, B, T, d, rep))) break;
    at += B;
  }
  free(pc);
  free(tok);
  free(rep);
  return rc;
}
