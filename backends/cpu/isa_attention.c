/* SPDX-License-Identifier: MIT */
/* Attention head kernels, compiled once per instruction set (see
 * isa_kernels.h). One call handles one (sequence, head): a right-padded
 * row b with L = seq_len[b] valid tokens, or one packed segment of L
 * tokens (ABI 1.3), which is the same computation on a row that starts at
 * the segment's first token (so rotary positions restart there); keys >= L
 * and query rows >= L are never computed.
 *
 * Layout: keys run along the vector lanes everywhere. The head is moved
 * into scratch transposed, by VW x VW register transposes, as Q^T, K^T, V^T
 * [hd, Lk] (Lk = L rounded up to KSTEP keys, zero filled), and rotary is
 * applied there, vectorised over tokens; Q also takes scale * log2(e), so
 * the softmax is a plain exp2. Blocks of query rows then go through two
 * register-blocked kernels:
 *   k1: C[r][j] = sum_k A(r,k) B[k][j]   (broadcast A, vector rows of B):
 *       scores Q K^T, dP = dO V^T, and dV^T += dO^T P, dK^T += Q^T dS;
 *   k2: O(r,c) = sum_j A[r][j] B[c][j]   (lane-wise products, lanes summed
 *       once at the end): P V and dQ = dS K.
 * A block's scores (MR x Lk, or BQ x Lk in backward) stay in cache-sized
 * scratch; nothing T x T exists. Backward recomputes P from the saved
 * log-sum-exp (flash-attention style) and undoes rotary and the scales on
 * the transposed gradients before writing them out.
 *
 * F16/BF16 qkv, out, dout and dqkv: a head's rows are widened into the
 * fp32 `stage` before the transposes (and results rounded from it), so
 * everything past the gather is the fp32 code; lse stays fp32. */
#include <math.h>
#include <string.h>

#include "cpu_half.h"
#include "cpu_vec.h"
#include "isa_kernels.h"

#define INLINE static inline __attribute__((always_inline))

/* Query rows per register tile: 16 accumulators need 32 registers (AVX-512),
 * 8 fit in 16. */
#if VW == 16
#define MR 8
#else
#define MR 4
#endif
#define KSTEP (2 * VW) /* keys per k1 tile; key counts are padded to it */
#define BQ (2 * MR)    /* query rows per backward block */
#define LOG2E 1.44269504088896341f
#define LN2 0.69314718055994531f
/* Score of a masked key: exp2 of it (minus anything finite) is 0. Finite,
 * unlike -inf, so that AVX-512's exp2 needs no clamp. */
#define MASKED (-1e30f)

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* ---- the two tile kernels ---- */

enum { K1_STORE, K1_ACCUM, K1_MASK, K1_MASK_MAX };

/* C[r][j] (=, or += with K1_ACCUM) sum_{k<K} A[r*ars + k*aks] * B[k*ldb + j]
 * for r < mr, j < n (a multiple of KSTEP), plus init[r] when init is not
 * NULL. The mask modes add `tail` (0 or MASKED per key) to the last KSTEP
 * columns; K1_MASK_MAX also returns each row's maximum in rmax. */
INLINE void k1(const int mr, const int mode, const float *A, size_t ars, size_t aks, const int K,
               const float *B, size_t ldb, float *C, size_t ldc, int n, const float *init,
               const float *tail, float *rmax) {
  vf mx[MR];
  if (mode == K1_MASK_MAX)
    for (int r = 0; r < mr; r++) mx[r] = vset1(-INFINITY);
  for (int j = 0; j < n; j += KSTEP) {
    vf c0[MR], c1[MR];
    for (int r = 0; r < mr; r++) {
      if (mode == K1_ACCUM) {
        c0[r] = vload(C + r * ldc + j);
        c1[r] = vload(C + r * ldc + j + VW);
      } else {
        c0[r] = c1[r] = vset1(init ? init[r] : 0.0f);
      }
    }
    for (int k = 0; k < K; k++) {
      const vf b0 = vload(B + k * ldb + j), b1 = vload(B + k * ldb + j + VW);
      for (int r = 0; r < mr; r++) {
        const vf a = vset1(A[r * ars + k * aks]);
        c0[r] += a * b0;
        c1[r] += a * b1;
      }
    }
    if ((mode == K1_MASK || mode == K1_MASK_MAX) && j + KSTEP == n) {
      const vf t0 = vload(tail), t1 = vload(tail + VW);
      for (int r = 0; r < mr; r++) {
        c0[r] += t0;
        c1[r] += t1;
      }
    }
    for (int r = 0; r < mr; r++) {
      if (mode == K1_MASK_MAX) mx[r] = vmax(mx[r], vmax(c0[r], c1[r]));
      vstore(C + r * ldc + j, c0[r]);
      vstore(C + r * ldc + j + VW, c1[r]);
    }
  }
  if (mode == K1_MASK_MAX)
    for (int r = 0; r < mr; r++) rmax[r] = vhmax(mx[r]);
}

/* O[r*ors + c*ocs] = sum_{j<n} A[r*lda + j] * B[c*ldb + j] for r < MR,
 * c < hd (hd even, n a multiple of VW). Two columns at a time: 2*MR
 * accumulators, a multiple of VW, lane-summed together. */
INLINE void k2(const float *A, size_t lda, const float *B, size_t ldb, int n, const int hd,
               float *O, size_t ors, size_t ocs) {
  for (int c = 0; c < hd; c += 2) {
    vf acc[2 * MR];
    for (int r = 0; r < 2 * MR; r++) acc[r] = vset1(0.0f);
    for (int j = 0; j < n; j += VW) {
      const vf b0 = vload(B + c * ldb + j), b1 = vload(B + (c + 1) * ldb + j);
      for (int r = 0; r < MR; r++) {
        vf x = vload(A + r * lda + j);
        VKEEP(x);
        acc[r] += x * b0;
        acc[MR + r] += x * b1;
      }
    }
    float s[2 * MR];
    for (int g = 0; g < 2 * MR; g += VW) vsum_lanes(acc + g, s + g);
    for (int r = 0; r < MR; r++) {
      O[r * ors + c * ocs] = s[r];
      O[r * ors + (c + 1) * ocs] = s[MR + r];
    }
  }
}

/* ---- scratch ---- */

/* Row stride of the [*, keys] arrays: one extra cache line, so that their
 * rows do not all fall into the same L1 sets when Lk is a power of two. */
static size_t key_stride(int n) { return round_up((size_t)n, KSTEP) + 16; }

typedef struct head_mem {
  float *Qt, *Kt, *Vt, *dQt, *dKt, *dVt, *S, *dP, *dO, *nD, *nlse2, *tmp, *tail, *cosT, *sinT;
  float *stage; /* [Tq, hd]: a head's rows in fp32 for half dtypes */
} head_mem;

/* Carve the scratch for T rows (offsets only when base is NULL); every
 * region starts on a 64-byte boundary. Returns the size in floats. */
static size_t carve(float *base, int T, int hd, head_mem *m) {
  const size_t Tq = round_up((size_t)T, BQ), ld = key_stride(T), th = (size_t)hd * ld;
  const size_t sizes[] = {th,      th,      th,       th,       th,     th,     BQ * ld, BQ * ld,
                          Tq * hd, Tq,      Tq,       BQ * (size_t)hd,  KSTEP,  th / 2, th / 2,
                          Tq * hd};
  float **slots[] = {&m->Qt, &m->Kt, &m->Vt,  &m->dQt, &m->dKt, &m->dVt, &m->S,    &m->dP,
                     &m->dO, &m->nD, &m->nlse2, &m->tmp, &m->tail, &m->cosT, &m->sinT,
                     &m->stage};
  size_t off = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    if (base) *slots[i] = base + off;
    off += round_up(sizes[i], 16);
  }
  return off;
}

static size_t scratch_floats(int T, int hd) {
  head_mem m;
  return carve(NULL, T, hd, &m);
}

/* ---- moving a head between [tokens, hd] rows and [hd, keys] scratch ---- */

/* A head's slice of a token row is one or a few cache lines, one row
 * (several KB) apart: the hardware prefetchers do not follow that, so the
 * loops below prefetch rows a little ahead (rw: 1 for a later write). */
#define PREFETCH_SLICE(p, bytes, rw, loc)                                          \
  do {                                                                             \
    const char *p_ = (const char *)(p);                                            \
    for (size_t o_ = 0; o_ < (bytes); o_ += 64) __builtin_prefetch(p_ + o_, rw, loc); \
    __builtin_prefetch(p_ + (bytes) - 1, rw, loc);                                 \
  } while (0)

/* dst[c][t] = src[t*sld + c] for t < L, c < hd; zeros for t in [L, n). */
static void load_t(const float *src, size_t sld, int L, int hd, float *dst, size_t ld, int n) {
  for (int t0 = 0; t0 < L; t0 += VW) {
    for (int t = t0 + 2 * VW; t < t0 + 3 * VW && t < L; t++)
      PREFETCH_SLICE(src + t * sld, (size_t)hd * sizeof(float), 0, 3);
    for (int c0 = 0; c0 < hd; c0 += VW)
      vtranspose_in(src + t0 * sld + c0, sld, L - t0 < VW ? L - t0 : VW,
                    hd - c0 < VW ? hd - c0 : VW, dst + c0 * ld + t0, ld);
  }
  const int done = (int)round_up((size_t)L, VW);
  for (int c = 0; c < hd; c++) memset(dst + c * ld + done, 0, (size_t)(n - done) * sizeof(float));
}

/* dst[t*dld + c] = src[c][t] for t < L, c < hd. */
static void store_t(const float *src, size_t ld, int L, int hd, float *dst, size_t dld) {
  for (int t0 = 0; t0 < L; t0 += VW)
    for (int c0 = 0; c0 < hd; c0 += VW)
      vtranspose_out(src + c0 * ld + t0, ld, L - t0 < VW ? L - t0 : VW,
                     hd - c0 < VW ? hd - c0 : VW, dst + t0 * dld + c0, dld);
}

/* Split-half rotary on X [hd, ld] for tokens [0, n), times `scale`; the
 * inverse (rotation by -theta, for gradients) when `inverse`. */
static void rope_t(float *X, size_t ld, int hd, int n, const head_mem *m, size_t ldT, float scale,
                   int inverse) {
  const int half = hd / 2;
  const vf sc = vset1(scale);
  const vf sg = vset1(inverse ? -1.0f : 1.0f);
  for (int c = 0; c < half; c++) {
    float *x0 = X + c * ld, *x1 = X + (c + half) * ld;
    const float *cs = m->cosT + c * ldT, *sn = m->sinT + c * ldT;
    for (int t = 0; t < n; t += VW) {
      const vf a = vload(x0 + t), b = vload(x1 + t), co = vload(cs + t), si = vload(sn + t) * sg;
      vstore(x0 + t, (a * co - b * si) * sc);
      vstore(x1 + t, (b * co + a * si) * sc);
    }
  }
}

/* Rows [0, L) of a head's slice (hd values at element first + t * sld of
 * base) as fp32 rows: the data itself for F32, else widened into stage;
 * *ld gets their stride. */
static const float *head_in(const esmtb_attention_args *a, const void *base, size_t first,
                            size_t sld, int L, int hd, float *stage, size_t *ld) {
  if (a->dtype == ESMTB_F32) {
    *ld = sld;
    return (const float *)base + first;
  }
  for (int t = 0; t < L; t++)
    cpu_half_load(base, a->dtype, first + (size_t)t * sld, stage + (size_t)t * hd, hd);
  *ld = (size_t)hd;
  return stage;
}

/* The same slice of dst from X^T [hd, ld]: stored directly for F32, else
 * through stage and rounded. */
static void head_out(const esmtb_attention_args *a, const float *X, size_t ld, int L, int hd,
                     void *dst, size_t first, size_t sld, float *stage) {
  if (a->dtype == ESMTB_F32) {
    store_t(X, ld, L, hd, (float *)dst + first, sld);
    return;
  }
  store_t(X, ld, L, hd, stage, (size_t)hd);
  for (int t = 0; t < L; t++)
    cpu_half_store(stage + (size_t)t * hd, dst, a->dtype, first + (size_t)t * sld, hd);
}

/* Per thread, once per call: the rotary tables transposed to [hd/2, T]. */
static void begin(const esmtb_attention_args *a, float *scratch) {
  head_mem m;
  carve(scratch, a->T, a->hd, &m);
  const int half = a->hd / 2;
  const size_t ldT = key_stride(a->T);
  load_t(a->rope_cos, (size_t)half, a->T, half, m.cosT, ldT, (int)round_up((size_t)a->T, KSTEP));
  load_t(a->rope_sin, (size_t)half, a->T, half, m.sinT, ldT, (int)round_up((size_t)a->T, KSTEP));
}

/* Q^T (rotated, times scale * log2 e), K^T (rotated) and V^T of head h of
 * the sequence from token tok0, zero past L; and the key mask for the last
 * KSTEP columns. */
static void gather_head(const esmtb_attention_args *a, size_t tok0, int h, int L, int Lk,
                        size_t ld, const head_mem *m) {
  const int hd = a->hd, D = a->H * hd;
  const size_t first = tok0 * 3 * D + (size_t)h * hd;
  const size_t ldT = key_stride(a->T);
  float *const dst[3] = {m->Qt, m->Kt, m->Vt};
  for (int part = 0; part < 3; part++) {
    size_t sld;
    const float *src = head_in(a, a->qkv, first + (size_t)part * D, 3 * (size_t)D, L, hd,
                               m->stage, &sld);
    load_t(src, sld, L, hd, dst[part], ld, Lk);
  }
  const int n = (int)round_up((size_t)L, VW);
  rope_t(m->Qt, ld, hd, n, m, ldT, a->scale * LOG2E, 0);
  rope_t(m->Kt, ld, hd, n, m, ldT, 1.0f, 0);
  for (int i = 0; i < KSTEP; i++) m->tail[i] = Lk - KSTEP + i < L ? 0.0f : MASKED;
}

/* The tokens one task covers: L rows from flattened token tok0, their
 * log-sum-exps at lse; rows [L, pad) after them are padding this task
 * zeroes (right-padded rows; packed gaps are zeroed by the caller). */
typedef struct span {
  size_t tok0;
  int L, pad, h;
  float *lse;
} span;

static span task_span(const esmtb_attention_args *a, int task) {
  const int i = task / a->H;
  span s;
  s.h = task % a->H;
  if (a->segs.nseg > 0) {
    const size_t t0 = (size_t)a->segs.start[i], b = t0 / (size_t)a->T;
    s.tok0 = t0;
    s.L = s.pad = a->segs.len[i];
    s.lse = a->lse + (b * a->H + s.h) * a->T + (t0 - b * a->T);
  } else {
    s.tok0 = (size_t)i * a->T;
    s.L = a->seq_len[i];
    s.pad = a->T;
    s.lse = a->lse + ((size_t)i * a->H + s.h) * a->T;
  }
  return s;
}

/* ---- forward ---- */

INLINE void forward_impl(const esmtb_attention_args *a, const span *sp, float *scratch,
                         const int hd) {
  const int T = a->T, D = a->H * hd, L = sp->L, h = sp->h;
  const size_t tok0 = sp->tok0;
  const int Lk = (int)round_up((size_t)L, KSTEP);
  const size_t ld = key_stride(L);
  head_mem m;
  carve(scratch, T, hd, &m);
  gather_head(a, tok0, h, L, Lk, ld, &m);
  float *lse = sp->lse;
  for (int i0 = 0; i0 < L; i0 += MR) {
    float mx[MR], sum[VW], lg[VW];
    k1(MR, K1_MASK_MAX, m.Qt + i0, 1, ld, hd, m.Kt, ld, m.S, ld, Lk, NULL, m.tail, mx);
    for (int r = 0; r < VW; r++) sum[r] = 1.0f;
    for (int r = 0; r < MR; r++) { /* unnormalised probabilities, in place */
      float *s = m.S + r * ld;
      const vf mv = vset1(mx[r]);
      vf acc = vset1(0.0f);
      for (int j = 0; j < Lk; j += VW) {
        vf p = vexp2(vload(s + j) - mv);
        acc += p;
        vstore(s + j, p);
      }
      sum[r] = vhsum(acc); /* >= 1: the maximum contributes 2^0 */
    }
    vstore(lg, vlog2(vload(sum)));
    for (int r = 0; r < MR && i0 + r < L; r++) lse[i0 + r] = (mx[r] + lg[r]) * LN2;
    k2(m.S, ld, m.Vt, ld, Lk, hd, m.tmp, (size_t)hd, 1);
    const int rb = L - i0 < MR ? L - i0 : MR;
    for (int r = 0; r < rb; r++) { /* normalise the output, not each probability */
      const size_t at = (tok0 + i0 + r) * D + (size_t)h * hd;
      float *o = cpu_out(a->out, a->dtype, at, m.stage);
      const float inv = 1.0f / sum[r];
      for (int c = 0; c < hd; c++) o[c] = m.tmp[r * hd + c] * inv;
      cpu_out_done(a->out, a->dtype, at, m.stage, hd);
    }
  }
  for (int t = L; t < sp->pad; t++) { /* padded queries: zero output */
    cpu_zero(a->out, a->dtype, (tok0 + t) * D + (size_t)h * hd, (size_t)hd);
    lse[t] = 0.0f;
  }
}

/* ---- probabilities (inference only) ---- */

/* The forward's scores and softmax for one (sequence, head), written out
 * normalised into the [L, L] block of a->probs that the task's tokens
 * occupy (the caller has zeroed the rest). */
static void probs_head(const esmtb_attention_args *a, int task, float *scratch) {
  const span sp = task_span(a, task);
  const int T = a->T, hd = a->hd, L = sp.L;
  const int Lk = (int)round_up((size_t)L, KSTEP);
  const size_t ld = key_stride(L);
  const size_t b = sp.tok0 / (size_t)T, t0 = sp.tok0 - b * (size_t)T;
  float *dst = a->probs + ((b * (size_t)a->H + (size_t)sp.h) * T + t0) * T + t0;
  head_mem m;
  carve(scratch, T, hd, &m);
  gather_head(a, sp.tok0, sp.h, L, Lk, ld, &m);
  for (int i0 = 0; i0 < L; i0 += MR) {
    float mx[MR];
    k1(MR, K1_MASK_MAX, m.Qt + i0, 1, ld, hd, m.Kt, ld, m.S, ld, Lk, NULL, m.tail, mx);
    for (int r = 0; r < MR && i0 + r < L; r++) {
      float *s = m.S + r * ld;
      const vf mv = vset1(mx[r]);
      vf acc = vset1(0.0f);
      for (int j = 0; j < Lk; j += VW) {
        const vf p = vexp2(vload(s + j) - mv);
        acc += p;
        vstore(s + j, p);
      }
      const float inv = 1.0f / vhsum(acc);
      float *row = dst + (size_t)(i0 + r) * T;
      for (int j = 0; j < L; j++) row[j] = s[j] * inv;
    }
  }
}

/* ---- backward ---- */

/* C [hd, ld] += X^T Y for one block: X(r, c) = X[r*xrs + c*xcs], Y [BQ, ld]. */
INLINE void accum_xty(const float *X, size_t xrs, size_t xcs, const int hd, const float *Y,
                      size_t ld, int Lk, float *C) {
  int c = 0;
  for (; c + MR <= hd; c += MR)
    k1(MR, K1_ACCUM, X + c * xcs, xcs, xrs, BQ, Y, ld, C + c * ld, ld, Lk, NULL, NULL, NULL);
  for (; c < hd; c += 2) /* hd is even */
    k1(2, K1_ACCUM, X + c * xcs, xcs, xrs, BQ, Y, ld, C + c * ld, ld, Lk, NULL, NULL, NULL);
}

INLINE void backward_impl(const esmtb_attention_args *a, const span *sp, float *scratch,
                          const int hd, const esmtb_dtype dt) {
  const int T = a->T, D = a->H * hd, L = sp->L, h = sp->h;
  const size_t tok0 = sp->tok0;
  const int Lq = (int)round_up((size_t)L, BQ), Lk = (int)round_up((size_t)L, KSTEP);
  const size_t ld = key_stride(L);
  head_mem m;
  carve(scratch, T, hd, &m);
  gather_head(a, tok0, h, L, Lk, ld, &m);
  const float *lse = sp->lse;
  const size_t es = cpu_dtype_size(dt);
  /* dO rows; -D = -rowsum(dO * O) and -lse (base 2) become the initial
   * values of the dP and score tiles. */
  for (int t = 0; t < Lq; t++) {
    float *g = m.dO + (size_t)t * hd;
    if (t >= L) { /* rows past the end: P = 0 and dS = 0 */
      memset(g, 0, (size_t)hd * sizeof(float));
      m.nD[t] = 0.0f;
      m.nlse2[t] = MASKED;
      continue;
    }
    const size_t at = (tok0 + t) * D + (size_t)h * hd;
    if (t + 16 < L) {
      PREFETCH_SLICE((const char *)a->dout + (at + 16 * (size_t)D) * es, hd * es, 0, 3);
      PREFETCH_SLICE((const char *)a->out + (at + 16 * (size_t)D) * es, hd * es, 0, 3);
    }
    cpu_load(a->dout, dt, at, g, hd);
    const float *o = cpu_in(a->out, dt, at, hd, m.stage);
    float dsum = 0.0f;
#pragma omp simd reduction(+ : dsum)
    for (int c = 0; c < hd; c++) dsum += g[c] * o[c];
    m.nD[t] = -dsum;
    m.nlse2[t] = -lse[t] * LOG2E;
  }
  memset(m.dKt, 0, (size_t)hd * ld * sizeof(float));
  memset(m.dVt, 0, (size_t)hd * ld * sizeof(float));
  const size_t first = tok0 * 3 * D + (size_t)h * hd, sld = 3 * (size_t)D;
  const char *dst = (const char *)a->dqkv + first * es; /* for prefetching only */
  for (int i0 = 0; i0 < L; i0 += BQ) {
    const float *dOb = m.dO + (size_t)i0 * hd;
    for (int p = 0; p < BQ; p += MR) {
      k1(MR, K1_MASK, m.Qt + i0 + p, 1, ld, hd, m.Kt, ld, m.S + p * ld, ld, Lk,
         m.nlse2 + i0 + p, m.tail, NULL);                                /* S - lse */
      k1(MR, K1_STORE, dOb + (size_t)p * hd, (size_t)hd, 1, hd, m.Vt, ld, m.dP + p * ld, ld, Lk,
         m.nD + i0 + p, NULL, NULL);                                     /* dP - D */
    }
    for (int r = 0; r < BQ; r++) { /* S -> P, dP -> dS = P * (dP - D) */
      float *s = m.S + r * ld, *dp = m.dP + r * ld;
      if (i0 + r < L) /* this row's gradients are written at the end */
        for (int part = 0; part < 3; part++)
          PREFETCH_SLICE(dst + ((size_t)(i0 + r) * sld + (size_t)part * D) * es, hd * es, 1, 3);
      for (int j = 0; j < Lk; j += VW) {
        const vf p = vexp2(vload(s + j));
        vstore(s + j, p);
        vstore(dp + j, p * vload(dp + j));
      }
    }
    for (int p = 0; p < BQ && i0 + p < L; p += MR) /* dQ^T = (dS K)^T */
      k2(m.dP + p * ld, ld, m.Kt, ld, Lk, hd, m.dQt + i0 + p, 1, ld);
    accum_xty(dOb, (size_t)hd, 1, hd, m.S, ld, Lk, m.dVt);  /* dV^T += dO^T P */
    accum_xty(m.Qt + i0, 1, ld, hd, m.dP, ld, Lk, m.dKt);  /* dK^T += Q^T dS (Q has log2 e) */
  }
  /* Back through rotary and the scales, then out to the rows. */
  const int n = (int)round_up((size_t)L, VW);
  const size_t ldT = key_stride(T);
  rope_t(m.dQt, ld, hd, n, &m, ldT, a->scale, 1);
  rope_t(m.dKt, ld, hd, n, &m, ldT, LN2, 1);
  head_out(a, m.dQt, ld, L, hd, a->dqkv, first, sld, m.stage);
  head_out(a, m.dKt, ld, L, hd, a->dqkv, first + D, sld, m.stage);
  head_out(a, m.dVt, ld, L, hd, a->dqkv, first + 2 * (size_t)D, sld, m.stage);
  for (int t = L; t < sp->pad; t++) /* padding: no gradient */
    for (int part = 0; part < 3; part++)
      cpu_zero(a->dqkv, dt, first + (size_t)t * sld + (size_t)part * D, (size_t)hd);
}

/* The ESM-2 head sizes get their own copies with hd a constant, so that the
 * reduction loops unroll. */
static void forward_head(const esmtb_attention_args *a, int task, float *scratch) {
  const span sp = task_span(a, task);
  switch (a->hd) {
    case 16: forward_impl(a, &sp, scratch, 16); break;
    case 24: forward_impl(a, &sp, scratch, 24); break;
    case 32: forward_impl(a, &sp, scratch, 32); break;
    case 64: forward_impl(a, &sp, scratch, 64); break;
    case 128: forward_impl(a, &sp, scratch, 128); break;
    default: forward_impl(a, &sp, scratch, a->hd); break;
  }
}

/* Backward has an fp32 copy with the dtype a constant: it then compiles to
 * the code it was before half dtypes (a run-time element size in its hot
 * loop cost 8%); F16 and BF16 share the other copy. */
#define BACKWARD_BY_HD(dt)                                                 \
  switch (a->hd) {                                                         \
    case 16: backward_impl(a, &sp, scratch, 16, dt); break;               \
    case 24: backward_impl(a, &sp, scratch, 24, dt); break;               \
    case 32: backward_impl(a, &sp, scratch, 32, dt); break;               \
    case 64: backward_impl(a, &sp, scratch, 64, dt); break;               \
    case 128: backward_impl(a, &sp, scratch, 128, dt); break;             \
    default: backward_impl(a, &sp, scratch, a->hd, dt); break;            \
  }

static void backward_head(const esmtb_attention_args *a, int task, float *scratch) {
  const span sp = task_span(a, task);
  if (a->dtype == ESMTB_F32) BACKWARD_BY_HD(ESMTB_F32)
  else BACKWARD_BY_HD(a->dtype)
}

const cpu_isa_attention ISA_SYMBOL(cpu_isa_attention) = {scratch_floats, begin, forward_head,
                                                         backward_head, probs_head};
