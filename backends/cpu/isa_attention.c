/* Attention head kernels, compiled once per instruction set (see
 * isa_kernels.h); blocks of RB query rows against all keys of the row. */
#include <math.h>
#include <string.h>

#include "cpu_attention.h"
#include "cpu_math.h"
#include "isa_kernels.h"

#define INLINE static inline __attribute__((always_inline))

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
    float p[RB];
    for (int r = 0; r < RB; r++) p[r] = P[(size_t)r * lds + j];
#pragma omp simd
    for (int c = 0; c < hd; c++) {
      float acc = y[c];
      for (int r = 0; r < RB; r++) acc += p[r] * X[r * hd + c];
      y[c] = acc;
    }
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

/* exp(S - rowmax) for RB score rows in place (length L): unnormalised
 * probabilities. Returns each row's log-sum-exp and 1 / sum. */
static void softmax_rows(float *S, int lds, int L, float *lse, float *inv_sum) {
  for (int r = 0; r < RB; r++) {
    float *s = S + (size_t)r * lds;
    float mx = s[0];
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < L; j++) mx = s[j] > mx ? s[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < L; j++) {
      s[j] = cpu_expf(s[j] - mx);
      sum += s[j];
    }
    lse[r] = mx + logf(sum);
    inv_sum[r] = 1.0f / sum;
  }
}

INLINE void forward_head_impl(const esmtb_attention_args *a, int b, int h, head_scratch *s,
                              float *obuf, const int hd) {
  const int T = a->T, D = a->H * hd, L = a->seq_len[b];
  const int lds = T + JB;
  gather_head(a, b, h, L, s, 0);
  float *out = a->out, *lse = a->lse + ((size_t)b * a->H + h) * T;
  for (int i0 = 0; i0 < L; i0 += RB) {
    float l4[RB], inv[RB];
    rows_times_t(s->Q + (size_t)i0 * hd, hd, s->Kt, T, L, s->S, lds);
    softmax_rows(s->S, lds, L, l4, inv);
    probs_times(s->S, lds, s->V, hd, L, obuf);
    const int rb = L - i0 < RB ? L - i0 : RB;
    for (int r = 0; r < rb; r++) {
      float *o = out + ((size_t)b * T + i0 + r) * D + h * hd;
      const float *src = obuf + (size_t)r * hd;
#pragma omp simd
      for (int c = 0; c < hd; c++) o[c] = src[c] * inv[r]; /* normalise here, not per key */
      lse[i0 + r] = l4[r];
    }
  }
  for (int t = L; t < T; t++) { /* padded queries: zero output */
    memset(out + ((size_t)b * T + t) * D + h * hd, 0, (size_t)hd * sizeof(float));
    lse[t] = 0.0f;
  }
}

INLINE void backward_head_impl(const esmtb_attention_args *a, int b, int h, head_scratch *s,
                               const int hd) {
  const int T = a->T, D = a->H * hd, L = a->seq_len[b], half = hd / 2;
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


/* The ESM-2 head sizes get their own copies with hd a constant, so that the
 * inner loops unroll and the accumulators stay in registers. */
static void forward_head(const esmtb_attention_args *a, int b, int h, head_scratch *s,
                         float *obuf) {
  switch (a->hd) {
    case 16: forward_head_impl(a, b, h, s, obuf, 16); break;
    case 24: forward_head_impl(a, b, h, s, obuf, 24); break;
    case 32: forward_head_impl(a, b, h, s, obuf, 32); break;
    case 64: forward_head_impl(a, b, h, s, obuf, 64); break;
    case 128: forward_head_impl(a, b, h, s, obuf, 128); break;
    default: forward_head_impl(a, b, h, s, obuf, a->hd); break;
  }
}

static void backward_head(const esmtb_attention_args *a, int b, int h, head_scratch *s) {
  switch (a->hd) {
    case 16: backward_head_impl(a, b, h, s, 16); break;
    case 24: backward_head_impl(a, b, h, s, 24); break;
    case 32: backward_head_impl(a, b, h, s, 32); break;
    case 64: backward_head_impl(a, b, h, s, 64); break;
    case 128: backward_head_impl(a, b, h, s, 128); break;
    default: backward_head_impl(a, b, h, s, a->hd); break;
  }
}

const cpu_isa_attention ISA_SYMBOL(cpu_isa_attention) = {forward_head, backward_head};
