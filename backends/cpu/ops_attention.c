/* CPU kernels: ESM-2 self-attention core, forward and backward, per
 * (row, head) with blocks of 4 query rows. Nothing of size T x T is kept:
 * a block's scores live in a 4 x T scratch, and backward recomputes the
 * probabilities from the saved log-sum-exp (flash-attention style).
 * Rotary (split-half) and the q scale are applied while gathering a head
 * into contiguous scratch, and undone on the gradients at the end. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_math.h"
#include "cpu_ops.h"

#define RB 4   /* query rows per block */
#define JB 16  /* key columns per register tile */

#define INLINE static inline __attribute__((always_inline))

/* S[r][j] = sum_c A[i0 + r][c] * Bt[c][j] for r < RB, j < L.
 * A is [rows, hd] row-major, Bt is [hd, ldb] (a transposed operand). */
INLINE void rows_times_t(const float *A, int hd, const float *Bt, int ldb, int L, float *S,
                         int lds) {
  int j0 = 0;
  for (; j0 + JB <= L; j0 += JB) {
    float acc[RB][JB] = {{0}};
    for (int c = 0; c < hd; c++) {
      const float *b = Bt + (size_t)c * ldb + j0;
      for (int r = 0; r < RB; r++) {
        const float q = A[r * hd + c];
#pragma omp simd
        for (int jj = 0; jj < JB; jj++) acc[r][jj] += q * b[jj];
      }
    }
    for (int r = 0; r < RB; r++) memcpy(S + (size_t)r * lds + j0, acc[r], sizeof acc[r]);
  }
  if (j0 < L) { /* tail */
    for (int r = 0; r < RB; r++)
      for (int j = j0; j < L; j++) {
        float sum = 0.0f;
        for (int c = 0; c < hd; c++) sum += A[r * hd + c] * Bt[(size_t)c * ldb + j];
        S[(size_t)r * lds + j] = sum;
      }
  }
}

/* O[r][c] = sum_j P[r][j] * X[j][c] for r < RB (X is [L, hd]). */
INLINE void probs_times(const float *P, int lds, const float *X, int hd, int L, float *O) {
  float acc[RB][128];
  for (int r = 0; r < RB; r++)
    for (int c = 0; c < hd; c++) acc[r][c] = 0.0f;
  for (int j = 0; j < L; j++) {
    const float *x = X + (size_t)j * hd;
    for (int r = 0; r < RB; r++) {
      const float p = P[(size_t)r * lds + j];
#pragma omp simd
      for (int c = 0; c < hd; c++) acc[r][c] += p * x[c];
    }
  }
  for (int r = 0; r < RB; r++) memcpy(O + (size_t)r * hd, acc[r], (size_t)hd * sizeof(float));
}

/* Y[j][c] += sum_r P[r][j] * X[r][c] for j < L (rank-RB update of Y [L, hd]). */
INLINE void rank_update(const float *P, int lds, const float *X, int hd, int L, float *Y) {
  for (int j = 0; j < L; j++) {
    float *y = Y + (size_t)j * hd;
    const float p0 = P[j], p1 = P[lds + j], p2 = P[2 * (size_t)lds + j], p3 = P[3 * (size_t)lds + j];
#pragma omp simd
    for (int c = 0; c < hd; c++)
      y[c] += p0 * X[c] + p1 * X[hd + c] + p2 * X[2 * hd + c] + p3 * X[3 * hd + c];
  }
}

/* Rotate x (one head, hd values) at position t into out, times `scale`. */
static void rope(const float *x, int hd, const float *cs, const float *sn, float scale, float *out) {
  const int half = hd / 2;
  for (int c = 0; c < half; c++) {
    float a = x[c] * scale, b = x[c + half] * scale;
    out[c] = a * cs[c] - b * sn[c];
    out[c + half] = b * cs[c] + a * sn[c];
  }
}

/* The transpose of rope() applied to a gradient (rotation by -theta). */
static void rope_back(const float *g, int hd, const float *cs, const float *sn, float scale,
                      float *out) {
  const int half = hd / 2;
  for (int c = 0; c < half; c++) {
    float a = g[c], b = g[c + half];
    out[c] = (a * cs[c] + b * sn[c]) * scale;
    out[c + half] = (b * cs[c] - a * sn[c]) * scale;
  }
}

typedef struct head_scratch {
  float *Q, *K, *Kt, *V, *Vt, *dO, *dQ, *dK, *dV, *S, *P, *dS, *D;
} head_scratch;

static float *scratch_alloc(head_scratch *h, int T, int hd) {
  size_t th = (size_t)(T + RB) * hd, blk = (size_t)RB * (T + JB);
  float *base = malloc((9 * th + 3 * blk + (size_t)T + RB) * sizeof(float));
  if (!base) return NULL;
  float *p = base;
  float **slots[] = {&h->Q, &h->K, &h->Kt, &h->V, &h->Vt, &h->dO, &h->dQ, &h->dK, &h->dV};
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++, p += th) *slots[i] = p;
  h->S = p; p += blk;
  h->P = p; p += blk;
  h->dS = p; p += blk;
  h->D = p;
  return base;
}

static int check(const esmtb_attention_args *a, int backward, const char *op) {
  if (!a || !a->qkv || !a->seq_len || !a->rope_cos || !a->rope_sin || !a->out || !a->lse)
    return cpu_fail(1, "cpu %s: NULL argument", op);
  if (backward && (!a->dout || !a->dqkv)) return cpu_fail(1, "cpu %s: NULL gradient", op);
  if (a->dtype != ESMTB_F32) return cpu_fail(8, "cpu backend: %s supports only fp32", op);
  if (a->B <= 0 || a->T <= 0 || a->H <= 0 || a->hd <= 0 || a->hd % 2 || a->hd > 128)
    return cpu_fail(1, "cpu %s: bad shape B=%d T=%d H=%d hd=%d (hd even, <= 128)", op, a->B, a->T,
                    a->H, a->hd);
  for (int b = 0; b < a->B; b++)
    if (a->seq_len[b] < 1 || a->seq_len[b] > a->T)
      return cpu_fail(1, "cpu %s: seq_len[%d] = %d outside [1, %d]", op, b, a->seq_len[b], a->T);
  return 0;
}

/* Gather head h of row b: Q (scaled, rotated) and K (rotated) as [L, hd]
 * plus Kt [hd, T]; V as [L, hd] (and Vt when needed). Rows L..L+RB-1 are
 * zero so that a partial last block reads defined values. */
static void gather_head(const esmtb_attention_args *a, int b, int h, int L, head_scratch *s,
                        int want_vt) {
  const int hd = a->hd, T = a->T, D = a->H * hd, half = hd / 2;
  const float *qkv = a->qkv;
  for (int t = 0; t < L; t++) {
    const float *row = qkv + ((size_t)b * T + t) * 3 * D;
    const float *cs = a->rope_cos + (size_t)t * half, *sn = a->rope_sin + (size_t)t * half;
    rope(row + h * hd, hd, cs, sn, a->scale, s->Q + (size_t)t * hd);
    rope(row + D + h * hd, hd, cs, sn, 1.0f, s->K + (size_t)t * hd);
    memcpy(s->V + (size_t)t * hd, row + 2 * D + h * hd, (size_t)hd * sizeof(float));
    for (int c = 0; c < hd; c++) {
      s->Kt[(size_t)c * T + t] = s->K[(size_t)t * hd + c];
      if (want_vt) s->Vt[(size_t)c * T + t] = s->V[(size_t)t * hd + c];
    }
  }
  memset(s->Q + (size_t)L * hd, 0, (size_t)RB * hd * sizeof(float));
}

/* Softmax of RB score rows in place (length L); returns log-sum-exps. */
static void softmax_rows(float *S, int lds, int L, float *lse) {
  for (int r = 0; r < RB; r++) {
    float *s = S + (size_t)r * lds;
    float mx = s[0];
    for (int j = 1; j < L; j++) mx = s[j] > mx ? s[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < L; j++) {
      s[j] = cpu_expf(s[j] - mx);
      sum += s[j];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < L; j++) s[j] *= inv;
    lse[r] = mx + logf(sum);
  }
}

static void forward_head(const esmtb_attention_args *a, int b, int h, head_scratch *s,
                         float *obuf) {
  const int hd = a->hd, T = a->T, D = a->H * hd, L = a->seq_len[b];
  const int lds = T + JB;
  gather_head(a, b, h, L, s, 0);
  float *out = a->out, *lse = a->lse + ((size_t)b * a->H + h) * T;
  for (int i0 = 0; i0 < L; i0 += RB) {
    float l4[RB];
    rows_times_t(s->Q + (size_t)i0 * hd, hd, s->Kt, T, L, s->S, lds);
    softmax_rows(s->S, lds, L, l4);
    probs_times(s->S, lds, s->V, hd, L, obuf);
    const int rb = L - i0 < RB ? L - i0 : RB;
    for (int r = 0; r < rb; r++) {
      memcpy(out + ((size_t)b * T + i0 + r) * D + h * hd, obuf + (size_t)r * hd,
             (size_t)hd * sizeof(float));
      lse[i0 + r] = l4[r];
    }
  }
  for (int t = L; t < T; t++) { /* padded queries: zero output */
    memset(out + ((size_t)b * T + t) * D + h * hd, 0, (size_t)hd * sizeof(float));
    lse[t] = 0.0f;
  }
}

esmtb_status cpu_attention_forward(esmtb_device *dev, const esmtb_attention_args *a,
                                   esmtb_stream *st) {
  (void)st;
  esmtb_status rc = check(a, 0, "attention_forward");
  if (rc) return rc;
  int failed = 0;
#pragma omp parallel num_threads(dev->num_threads)
  {
    head_scratch s;
    float *base = scratch_alloc(&s, a->T, a->hd);
    float obuf[RB * 128];
    if (!base) failed = 1;
#pragma omp for schedule(dynamic, 1)
    for (int task = 0; task < a->B * a->H; task++)
      if (base) forward_head(a, task / a->H, task % a->H, &s, obuf);
    free(base);
  }
  return failed ? cpu_fail(2, "cpu attention_forward: out of memory for scratch") : 0;
}

static void backward_head(const esmtb_attention_args *a, int b, int h, head_scratch *s) {
  const int hd = a->hd, T = a->T, D = a->H * hd, L = a->seq_len[b], half = hd / 2;
  const int lds = T + JB;
  gather_head(a, b, h, L, s, 1);
  const float *lse = a->lse + ((size_t)b * a->H + h) * T;
  const float *dout = a->dout, *out = a->out;
  for (int t = 0; t < L; t++) {
    const float *g = dout + ((size_t)b * T + t) * D + h * hd;
    const float *o = out + ((size_t)b * T + t) * D + h * hd;
    float dsum = 0.0f;
    for (int c = 0; c < hd; c++) dsum += g[c] * o[c];
    memcpy(s->dO + (size_t)t * hd, g, (size_t)hd * sizeof(float));
    s->D[t] = dsum; /* rowsum(dO * O) = rowsum(P * dP) */
  }
  memset(s->dO + (size_t)L * hd, 0, (size_t)RB * hd * sizeof(float));
  for (int t = L; t < L + RB; t++) s->D[t] = 0.0f;
  memset(s->dK, 0, (size_t)L * hd * sizeof(float));
  memset(s->dV, 0, (size_t)L * hd * sizeof(float));
  for (int i0 = 0; i0 < L; i0 += RB) {
    const int rb = L - i0 < RB ? L - i0 : RB;
    rows_times_t(s->Q + (size_t)i0 * hd, hd, s->Kt, T, L, s->P, lds);     /* scores */
    rows_times_t(s->dO + (size_t)i0 * hd, hd, s->Vt, T, L, s->dS, lds);   /* dP */
    for (int r = 0; r < RB; r++) {
      float *p = s->P + (size_t)r * lds, *ds = s->dS + (size_t)r * lds;
      if (r >= rb) { /* rows past the end contribute nothing */
        memset(p, 0, (size_t)L * sizeof(float));
        memset(ds, 0, (size_t)L * sizeof(float));
        continue;
      }
      const float l = lse[i0 + r], dd = s->D[i0 + r];
#pragma omp simd
      for (int j = 0; j < L; j++) {
        p[j] = cpu_expf(p[j] - l);
        ds[j] = p[j] * (ds[j] - dd);
      }
    }
    probs_times(s->dS, lds, s->K, hd, L, s->dQ + (size_t)i0 * hd);       /* dQ = dS K */
    rank_update(s->P, lds, s->dO + (size_t)i0 * hd, hd, L, s->dV);       /* dV += P^T dO */
    rank_update(s->dS, lds, s->Q + (size_t)i0 * hd, hd, L, s->dK);       /* dK += dS^T Q */
  }
  float *dqkv = a->dqkv;
  for (int t = 0; t < T; t++) {
    float *row = dqkv + ((size_t)b * T + t) * 3 * D;
    if (t >= L) { /* padding: no gradient */
      memset(row + h * hd, 0, (size_t)hd * sizeof(float));
      memset(row + D + h * hd, 0, (size_t)hd * sizeof(float));
      memset(row + 2 * D + h * hd, 0, (size_t)hd * sizeof(float));
      continue;
    }
    const float *cs = a->rope_cos + (size_t)t * half, *sn = a->rope_sin + (size_t)t * half;
    rope_back(s->dQ + (size_t)t * hd, hd, cs, sn, a->scale, row + h * hd);
    rope_back(s->dK + (size_t)t * hd, hd, cs, sn, 1.0f, row + D + h * hd);
    memcpy(row + 2 * D + h * hd, s->dV + (size_t)t * hd, (size_t)hd * sizeof(float));
  }
}

esmtb_status cpu_attention_backward(esmtb_device *dev, const esmtb_attention_args *a,
                                    esmtb_stream *st) {
  (void)st;
  esmtb_status rc = check(a, 1, "attention_backward");
  if (rc) return rc;
  int failed = 0;
#pragma omp parallel num_threads(dev->num_threads)
  {
    head_scratch s;
    float *base = scratch_alloc(&s, a->T, a->hd);
    if (!base) failed = 1;
#pragma omp for schedule(dynamic, 1)
    for (int task = 0; task < a->B * a->H; task++)
      if (base) backward_head(a, task / a->H, task % a->H, &s);
    free(base);
  }
  return failed ? cpu_fail(2, "cpu attention_backward: out of memory for scratch") : 0;
}
