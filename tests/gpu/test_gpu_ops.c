/* SPDX-License-Identifier: MIT */
/* The GPU backends' compute ops (cuda_common) against the CPU backend.
 *
 * Each GPU backend (ampere_bf16, turing_fp16) and cpu.so are loaded through
 * the plugin ABI. Every op runs on random inputs at ESM-2-like shapes
 * (N = 2*512 rows, d = 320 and 1280, V = 33, FFN 4d, odd sizes too) for
 * each activation dtype the backend claims; the CPU backend (fp32 only)
 * gets the same inputs rounded to that dtype, so only the GPU's own
 * arithmetic and output rounding differ. Checks:
 *  - ||gpu - cpu|| / ||cpu|| <= 1e-2 (f16), 2e-2 (bf16), 1e-5 (f32; 1e-3
 *    for the TF32 gemm); one "RESULT" line per op and dtype with the error;
 *  - dropout drops the CPU's elements exactly (the same Philox mask);
 *  - the reductions (embed/layernorm/bias/xent gradients and loss) give the
 *    same bits when run twice;
 *  - bad arguments return non-zero with a message naming the op.
 * Without a usable GPU it prints "SKIP: <reason>" and exits 77. The harness
 * is gpu_ops_harness.c, the element-wise ops' tests gpu_ops_elementwise.c,
 * the optimizer tests gpu_ops_optimizer.c. */
#include "gpu_ops_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* gemm                                                                */
/* ------------------------------------------------------------------ */

typedef struct gemm_case {
  int m, n, k, ta, tb, pad_a, pad_b, pad_c, bias, gelu, pre;
  float alpha, beta;
  const char *what;
  int bias_off; /* bias this many elements into its buffer (misaligned) */
  int ab_off;   /* the same for a and b (weights at odd parameter offsets) */
  int raw_f32;  /* f32: a, b not TF32-exact, so TF32 rounding shows (wider tol) */
  int c_f32;    /* ABI 1.1: half a, b with an fp32 c (weight gradients into fp32) */
} gemm_case;

static void gemm_run(const gpu *g, esmtb_dtype dt, const gemm_case *c) {
  const int lda = (c->ta ? c->m : c->k) + c->pad_a, ldb = (c->tb ? c->k : c->n) + c->pad_b;
  const int ldc = c->n + c->pad_c;
  const size_t na = (size_t)(c->ta ? c->k : c->m) * lda, nb = (size_t)(c->tb ? c->n : c->k) * ldb;
  const size_t nc = (size_t)c->m * ldc;
  float *a = randf(na, 1.0, 0), *b = randf(nb, 1.0, 0), *c0 = randf(nc, 1.0, 0);
  float *bias = randf((size_t)c->n, 1.0, 0), *pre0 = randf(nc, 1.0, 0);
  const esmtb_dtype ct = c->c_f32 ? ESMTB_F32 : dt; /* dtype of c on the GPU */
  round_to(a, na, dt); round_to(b, nb, dt); round_to(c0, nc, ct); round_to(bias, (size_t)c->n, dt);
  round_to(pre0, nc, dt);
  /* f32 runs on TF32 tensor cores: with TF32-exact a and b only the fp32
   * accumulation differs from the CPU, so the check is about the op, not
   * TF32 (raw_f32 cases measure that, at 4e-3). */
  if (dt == ESMTB_F32 && !c->raw_f32) {
    round_tf32(a, na);
    round_tf32(b, nb);
  }

  float *cc = copyf(c0, nc), *cpre = copyf(pre0, nc);
  esmtb_gemm_args x = {0};
  x.struct_size = sizeof x; x.dtype = ESMTB_F32;
  x.trans_a = c->ta; x.trans_b = c->tb; x.m = c->m; x.n = c->n; x.k = c->k;
  x.alpha = c->alpha; x.beta = c->beta;
  x.a = a; x.lda = lda; x.b = b; x.ldb = ldb; x.c = cc; x.ldc = ldc;
  x.bias = c->bias ? bias : NULL;
  x.epilogue = c->gelu ? ESMTB_EPI_GELU : ESMTB_EPI_NONE;
  x.pre = c->pre ? cpre : NULL;
  cpu_ok(cpu->gemm(cdev, &x, NULL), "gemm");

  const size_t off = (size_t)c->ab_off * dt_size(dt);
  void *da = galloc(g, na * dt_size(dt) + off), *db = galloc(g, nb * dt_size(dt) + off);
  void *dc = gup(g, c0, nc, ct);
  gput(g, (char *)da + off, a, na, dt);
  gput(g, (char *)db + off, b, nb, dt);
  void *dbias = galloc(g, ((size_t)c->n + c->bias_off) * dt_size(dt)), *dpre = gup(g, pre0, nc, dt);
  void *dbias_at = (char *)dbias + (size_t)c->bias_off * dt_size(dt);
  gput(g, dbias_at, bias, (size_t)c->n, dt);
  x.dtype = dt; x.a = (char *)da + off; x.b = (char *)db + off; x.c = dc;
  x.bias = c->bias ? dbias_at : NULL;
  x.pre = c->pre ? dpre : NULL;
  x.c_f32 = c->c_f32;
  gpu_ok(g, g->ops->gemm(g->dev, &x, g->st), "gemm");
  float *gc = gdown(g, dc, nc, ct), *gp = gdown(g, dpre, nc, dt);

  /* Compare the [m, n] block; the padding columns must be untouched. */
  float *blk_g = malloc((size_t)c->m * c->n * sizeof *blk_g), *blk_c = malloc((size_t)c->m * c->n * sizeof *blk_c);
  assert_non_null(blk_g);
  assert_non_null(blk_c);
  int pad_bad = 0;
  for (int pass = 0; pass < (c->pre ? 2 : 1); pass++) {
    const float *G = pass ? gp : gc, *C = pass ? cpre : cc, *orig = pass ? pre0 : c0;
    for (int i = 0; i < c->m; i++)
      for (int j = 0; j < ldc; j++) {
        size_t at = (size_t)i * ldc + j;
        if (j < c->n) {
          blk_g[(size_t)i * c->n + j] = G[at];
          blk_c[(size_t)i * c->n + j] = C[at];
        } else if (memcmp(&G[at], &orig[at], sizeof(float)) != 0 && !pad_bad++) {
          printf("RESULT %-12s gemm %s: padding column %d of row %d was written FAIL\n", g->name,
                 c->what, j, i);
          g_failed++;
        }
      }
    char what[96];
    snprintf(what, sizeof what, "gemm %s%s", c->what, pass ? " (pre)" : "");
    report(g, what, dt, relerr(blk_g, blk_c, (size_t)c->m * c->n),
           c->c_f32 && dt != ESMTB_F32 ? 1e-4
           : dt != ESMTB_F32             ? dt_tol(dt)
           : c->raw_f32                  ? 4e-3
                                         : 1e-3);
  }
  /* With the pre-activation kept: c must be the exact-erf GELU of the
   * backend's own pre, rounded to dt (on the GPUs, one elementwise pass
   * over the GEMM's output). The bound is per element: one ulp of dt
   * relative to the result; plus half an ulp of pre times gelu'(pre), for
   * a backend that applies GELU before rounding pre (cpu.so does); plus
   * 1e-6 absolute for erff's error where 1 + erf cancels (pre very
   * negative). At f32 the tanh approximation (up to ~1e-4 off) fails it. */
  if (c->gelu && c->pre) {
    const double ulp = dt == ESMTB_F32 ? 0x1p-20 : dt == ESMTB_F16 ? 0x1p-10 : 0x1p-7;
    double worst = 0;
    for (int i = 0; i < c->m; i++)
      for (int j = 0; j < c->n; j++) {
        const size_t at = (size_t)i * ldc + j;
        const double p = gp[at];
        const double cdf = 0.5 * (1.0 + erf(p / sqrt(2.0)));
        const double slope = fabs(cdf + p * exp(-0.5 * p * p) * 0.3989422804014327); /* phi */
        float ref = (float)(p * cdf);
        round_to(&ref, 1, dt);
        const double e = fabs((double)gc[at] - ref) /
                         (fabs((double)ref) * ulp + 0.5 * ulp * fabs(p) * slope + 1e-6);
        if (!(e <= worst)) worst = e; /* NaN sticks */
      }
    char what[96];
    snprintf(what, sizeof what, "gemm %s c=gelu_erf(pre)", c->what);
    report(g, what, dt, worst, 1.0);
  }
  free(blk_g); free(blk_c);
  gfree(g, da); gfree(g, db); gfree(g, dc); gfree(g, dbias); gfree(g, dpre);
  free(a); free(b); free(c0); free(bias); free(pre0); free(cc); free(cpre); free(gc); free(gp);
}

static void test_gemm(void **state) {
  (void)state;
  CHECKS_BEGIN();
  static const gemm_case cases[] = {
      /* m     n     k  ta tb pa pb pc bias gelu pre alpha beta */
      {1024, 1280, 320, 0, 1, 0, 0, 0, 1, 1, 1, 1.0f, 0.0f, "ffn-up d320 bias+gelu", 0, 0, 0, 0},
      {1024, 320, 1280, 0, 1, 0, 0, 0, 1, 0, 0, 1.0f, 0.0f, "ffn-down d320 bias", 0, 0, 0, 0},
      {1024, 3840, 1280, 0, 1, 0, 0, 0, 1, 0, 0, 1.0f, 0.0f, "qkv d1280 bias", 0, 0, 0, 0},
      {1024, 5120, 1280, 0, 1, 0, 0, 0, 1, 1, 0, 1.0f, 0.0f, "ffn-up d1280 gelu no pre", 0, 0, 0, 0},
      {1280, 320, 1024, 1, 0, 0, 0, 0, 0, 0, 0, 1.0f, 1.0f, "weight-grad (ta) beta=1", 0, 0, 0, 0},
      {1024, 320, 1280, 0, 0, 0, 0, 0, 0, 0, 0, 0.5f, 0.25f, "data-grad alpha/beta", 0, 0, 0, 0},
      {1023, 33, 320, 0, 1, 0, 0, 0, 1, 0, 0, 1.0f, 0.0f, "lm-decoder V=33 odd m", 0, 0, 0, 0},
      {77, 129, 65, 1, 1, 3, 5, 7, 1, 1, 1, 1.0f, 0.0f, "odd ta tb padded ld gelu", 0, 0, 0, 0},
      {200, 96, 48, 0, 0, 1, 2, 3, 0, 1, 1, 1.5f, 0.5f, "gelu+pre with beta", 0, 0, 0, 0},
      {1024, 1280, 320, 0, 1, 0, 0, 0, 1, 1, 1, 1.0f, 0.0f, "ffn-up unaligned bias+gelu", 1, 0, 0, 0},
      {1023, 33, 320, 0, 1, 0, 0, 0, 1, 0, 0, 1.0f, 0.0f, "lm-decoder unaligned bias", 3, 0, 0, 0},
      {1024, 1280, 320, 0, 1, 0, 0, 0, 1, 0, 0, 1.0f, 0.0f, "ffn-up unaligned a, b", 0, 1, 0, 0},
      {1280, 320, 1024, 1, 0, 0, 0, 0, 0, 0, 0, 1.0f, 1.0f, "weight-grad unaligned a, b", 0, 3, 0, 0},
      {1024, 1280, 320, 0, 1, 0, 0, 0, 1, 1, 1, 1.0f, 0.0f, "ffn-up raw f32 (tf32 error)", 0, 0, 1, 0},
      {1024, 320, 1280, 0, 0, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f, "data-grad raw f32 (tf32 error)", 0, 0, 1, 0},
      {1280, 320, 1024, 1, 0, 0, 0, 0, 0, 0, 0, 1.0f, 1.0f, "weight-grad c_f32 beta=1", 0, 0, 0, 1},
      {33, 320, 1023, 1, 0, 0, 0, 0, 0, 0, 0, 1.0f, 1.0f, "decoder-grad c_f32 odd k", 0, 3, 0, 1},
  };
  FOR_EACH_GPU_DTYPE(g, dt) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) gemm_run(g, dt, &cases[i]);
    /* The same shape again goes through the plan cache. */
    gemm_run(g, dt, &cases[0]);
  }
  CHECKS_END();
}

/* ------------------------------------------------------------------ */
/* embedding                                                           */
/* ------------------------------------------------------------------ */

enum { V = 33, MASK = 32, PAD = 1 };

static int32_t *make_tokens(int B, int T) {
  int32_t *t = malloc((size_t)B * T * sizeof *t);
  assert_non_null(t);
  for (int b = 0; b < B; b++) {
    int len = b % 2 ? T * 3 / 5 : T; /* right-padded rows */
    for (int i = 0; i < T; i++) {
      int32_t id;
      if (i >= len) id = PAD;
      else if (i == 0) id = 0;            /* cls */
      else if (i == len - 1) id = 2;      /* eos */
      else if (urand() < -0.76) id = MASK; /* about 12% */
      else id = 4 + (int32_t)((urand() + 1.0) * 13.0); /* 4..29 */
      t[(size_t)b * T + i] = id;
    }
  }
  return t;
}

/* Packed rows (ABI 1.3 segments): sequences of 3..T/3 tokens, each with
 * its own cls/eos and ~12% masks, filling each row with now and then a
 * padding gap; the rest of a row is padding. start/len are malloc'ed. */
static int32_t *make_packed_tokens(int B, int T, int *nseg, int32_t **start, int32_t **len) {
  int32_t *t = malloc((size_t)B * T * sizeof *t);
  *start = malloc((size_t)B * T * sizeof **start);
  *len = malloc((size_t)B * T * sizeof **len);
  assert_true(t && *start && *len);
  for (size_t i = 0; i < (size_t)B * T; i++) t[i] = PAD;
  int n = 0;
  for (int b = 0; b < B; b++)
    for (int p = 0; p + 3 <= T;) {
      int L = 3 + (int)((urand() + 1.0) * 0.5 * (T / 3 - 2));
      if (L > T - p) L = T - p;
      (*start)[n] = b * T + p;
      (*len)[n++] = L;
      for (int i = 0; i < L; i++) {
        int32_t id = i == 0 ? 0 : i == L - 1 ? 2 : urand() < -0.76 ? MASK
                   : 4 + (int32_t)((urand() + 1.0) * 13.0);
        t[(size_t)b * T + p + i] = id;
      }
      p += L + (urand() > 0.5 ? 1 : 0);
    }
  *nseg = n;
  return t;
}

/* Token mixes for the backward's counting sort (cuda_embed.cu). */
enum {
  TOK_ESM = 0, /* make_tokens / make_packed_tokens: ids 0..32, some never occur */
  TOK_REPEAT,  /* nearly every token the same id: one id, many segments */
  TOK_SPARSE,  /* two ids only: every other id's dE row untouched */
  TOK_BIGV     /* a 300-id vocabulary: ids >= 128 take the backward's scan path */
};
enum { BIGV = 300 };

/* Rewrites the ids of non-pad, non-mask tokens for `mode`. */
static void retoken(int32_t *t, size_t n, int mode) {
  for (size_t i = 0; i < n; i++) {
    if (t[i] == PAD || t[i] == MASK || mode == TOK_ESM) continue;
    if (mode == TOK_REPEAT) t[i] = i % 997 ? 5 : 7;
    else if (mode == TOK_SPARSE) t[i] = urand() < 0 ? 9 : 20;
    else {
      int32_t id = (int32_t)((urand() + 1.0) * 0.5 * BIGV);
      t[i] = id >= BIGV ? BIGV - 1 : id == PAD || id == MASK ? 140 : id;
    }
  }
}

static void embed_case_gen(const gpu *g, esmtb_dtype dt, int B, int T, int d, int packed,
                           int mode) {
  const int vocab = mode == TOK_BIGV ? BIGV : V;
  const size_t N = (size_t)B * T, nE = (size_t)vocab * d, nO = N * d;
  int nseg = 0, max_len = 0;
  int32_t *sst = NULL, *sln = NULL;
  int32_t *tok = packed ? make_packed_tokens(B, T, &nseg, &sst, &sln) : make_tokens(B, T);
  retoken(tok, N, mode);
  for (int i = 0; i < nseg; i++) max_len = sln[i] > max_len ? sln[i] : max_len;
  const size_t nscale = packed ? (size_t)nseg : (size_t)B;
  float *E = randf(nE, 1.0, 0), *dout = randf(nO, 1.0, 0), *dE0 = randf(nE, 0.5, 0);
  round_to(E, nE, dt);
  round_to(dout, nO, dt);
  float *cout = malloc(nO * sizeof *cout), *cscale = malloc(nscale * sizeof *cscale);
  float *cdE = copyf(dE0, nE);
  assert_non_null(cout);
  assert_non_null(cscale);
  esmtb_embed_args e = {0};
  e.struct_size = sizeof e; e.dtype = ESMTB_F32; e.B = B; e.T = T; e.d = d;
  e.tokens = tok; e.E = E; e.out = cout; e.row_scale = cscale;
  e.mask_id = MASK; e.pad_id = PAD; e.mask_ratio_train = 0.12f;
  e.dout = dout; e.dE = cdE;
  if (packed) e.segs = (esmtb_segments){nseg, max_len, sst, sln};
  cpu_ok(cpu->embed_forward(cdev, &e, NULL), "embed_forward");
  cpu_ok(cpu->embed_backward(cdev, &e, NULL), "embed_backward");

  int32_t *dtok = galloc(g, N * sizeof *dtok), *dst = NULL, *dln = NULL;
  gput_raw(g, dtok, tok, N * sizeof *dtok);
  if (packed) {
    dst = galloc(g, (size_t)nseg * sizeof *dst);
    dln = galloc(g, (size_t)nseg * sizeof *dln);
    gput_raw(g, dst, sst, (size_t)nseg * sizeof *dst);
    gput_raw(g, dln, sln, (size_t)nseg * sizeof *dln);
    e.segs = (esmtb_segments){nseg, max_len, dst, dln};
  }
  void *dE = gup(g, E, nE, dt), *dO = galloc(g, nO * dt_size(dt)), *dG = gup(g, dout, nO, dt);
  float *dscale = galloc(g, nscale * sizeof(float)), *ddE = gup(g, dE0, nE, ESMTB_F32);
  e.dtype = dt; e.tokens = dtok; e.E = dE; e.out = dO; e.row_scale = dscale;
  e.dout = dG; e.dE = ddE;
  gpu_ok(g, g->ops->embed_forward(g->dev, &e, g->st), "embed_forward");
  float *go = gdown(g, dO, nO, dt), *gs = gdown(g, dscale, nscale, ESMTB_F32);
  gpu_ok(g, g->ops->embed_backward(g->dev, &e, g->st), "embed_backward");
  float *gdE = gdown(g, ddE, nE, ESMTB_F32);
  /* Again from the same dE: the same bits. */
  gput(g, ddE, dE0, nE, ESMTB_F32);
  gpu_ok(g, g->ops->embed_backward(g->dev, &e, g->st), "embed_backward");
  float *gdE2 = gdown(g, ddE, nE, ESMTB_F32);

  char what[96];
  static const char *const mode_name[] = {"", " repeat", " sparse", " V300"};
  char pk[32];
  snprintf(pk, sizeof pk, "%s%s", packed ? " packed" : "", mode_name[mode]);
  snprintf(what, sizeof what, "embed_forward%s B%d T%d d%d", pk, B, T, d);
  report(g, what, dt, relerr(go, cout, nO), dt_tol(dt));
  snprintf(what, sizeof what, "embed row_scale%s B%d T%d", pk, B, T);
  report(g, what, dt, relerr(gs, cscale, nscale), 1e-6);
  snprintf(what, sizeof what, "embed_backward dE%s B%d T%d d%d", pk, B, T, d);
  report(g, what, dt, relerr(gdE, cdE, nE), dt_tol(dt));
  report_bits(g, what, dt, gdE, gdE2, nE * sizeof(float));

  gfree(g, dtok); gfree(g, dE); gfree(g, dO); gfree(g, dG); gfree(g, dscale); gfree(g, ddE);
  if (packed) { gfree(g, dst); gfree(g, dln); }
  free(tok); free(E); free(dout); free(dE0); free(cout); free(cdE); free(cscale);
  free(go); free(gs); free(gdE); free(gdE2); free(sst); free(sln);
}

static void embed_case_any(const gpu *g, esmtb_dtype dt, int B, int T, int d, int packed) {
  embed_case_gen(g, dt, B, T, d, packed, TOK_ESM);
}

static void embed_case(const gpu *g, esmtb_dtype dt, int B, int T, int d) {
  embed_case_any(g, dt, B, T, d, 0);
}

static void test_embed(void **state) {
  (void)state;
  CHECKS_BEGIN();
  FOR_EACH_GPU_DTYPE(g, dt) {
    embed_case(g, dt, 2, 512, 320);
    embed_case(g, dt, 2, 512, 1280);
    embed_case(g, dt, 3, 77, 33);
    embed_case(g, dt, 16, 512, 320); /* more tokens than one staged tile */
    embed_case_any(g, dt, 2, 512, 320, 1); /* packed rows: per-segment dropout scale */
    embed_case_any(g, dt, 8, 1024, 1280, 1);
    embed_case_gen(g, dt, 4, 1024, 320, 0, TOK_REPEAT); /* ~3300 of one id: 4 segments */
    embed_case_gen(g, dt, 3, 77, 33, 0, TOK_SPARSE);
    embed_case_gen(g, dt, 2, 512, 160, 1, TOK_BIGV);
  }
  CHECKS_END();
}

/* ------------------------------------------------------------------ */
/* layernorm                                                           */
/* ------------------------------------------------------------------ */

/* `off`: x, out, dout and dx start that many elements into their buffers
 * (not 16-byte aligned: the scalar path even for a vector width). */
static void layernorm_case_off(const gpu *g, esmtb_dtype dt, int N, int d, int accumulate,
                               int off) {
  const size_t n = (size_t)N * d;
  float *x = randf(n, 2.0, 0.3), *w = randf((size_t)d, 0.5, 1.0), *b = randf((size_t)d, 0.5, 0);
  float *dout = randf(n, 1.0, 0), *dx0 = randf(n, 1.0, 0);
  float *dw0 = randf((size_t)d, 1.0, 0), *db0 = randf((size_t)d, 1.0, 0);
  round_to(x, n, dt); round_to(dout, n, dt); round_to(dx0, n, dt);
  float *co = malloc(n * sizeof *co), *cm = malloc((size_t)N * 4), *cr = malloc((size_t)N * 4);
  float *cdx = copyf(dx0, n), *cdw = copyf(dw0, (size_t)d), *cdb = copyf(db0, (size_t)d);
  assert_non_null(co); assert_non_null(cm); assert_non_null(cr);
  esmtb_layernorm_args a = {0};
  a.struct_size = sizeof a; a.dtype = ESMTB_F32; a.N = N; a.d = d; a.eps = 1e-5f;
  a.x = x; a.w = w; a.b = b; a.out = co; a.mean = cm; a.rstd = cr;
  a.dout = dout; a.dx = cdx; a.accumulate_dx = accumulate; a.dw = cdw; a.db = cdb;
  cpu_ok(cpu->layernorm_forward(cdev, &a, NULL), "layernorm_forward");
  cpu_ok(cpu->layernorm_backward(cdev, &a, NULL), "layernorm_backward");

  const size_t o = (size_t)off * dt_size(dt), nb = n * dt_size(dt) + o;
  char *bx = galloc(g, nb), *bo = galloc(g, nb), *bd = galloc(g, nb), *bdx = galloc(g, nb);
  void *gx = bx + o, *go = bo + o, *gd = bd + o, *gdx = bdx + o;
  gput(g, gx, x, n, dt); gput(g, gd, dout, n, dt); gput(g, gdx, dx0, n, dt);
  float *gw = gup(g, w, (size_t)d, ESMTB_F32), *gb = gup(g, b, (size_t)d, ESMTB_F32);
  float *gm = galloc(g, (size_t)N * 4), *gr = galloc(g, (size_t)N * 4);
  float *gdw = gup(g, dw0, (size_t)d, ESMTB_F32), *gdb = gup(g, db0, (size_t)d, ESMTB_F32);
  a.dtype = dt; a.x = gx; a.w = gw; a.b = gb; a.out = go; a.mean = gm; a.rstd = gr;
  a.dout = gd; a.dx = gdx; a.dw = gdw; a.db = gdb;
  gpu_ok(g, g->ops->layernorm_forward(g->dev, &a, g->st), "layernorm_forward");
  gpu_ok(g, g->ops->layernorm_backward(g->dev, &a, g->st), "layernorm_backward");
  float *ho = gdown(g, go, n, dt), *hm = gdown(g, gm, (size_t)N, ESMTB_F32);
  float *hr = gdown(g, gr, (size_t)N, ESMTB_F32), *hdx = gdown(g, gdx, n, dt);
  float *hdw = gdown(g, gdw, (size_t)d, ESMTB_F32), *hdb = gdown(g, gdb, (size_t)d, ESMTB_F32);
  /* Backward again from the same dx/dw/db: the same bits. */
  gput(g, gdx, dx0, n, dt);
  gput(g, gdw, dw0, (size_t)d, ESMTB_F32);
  gput(g, gdb, db0, (size_t)d, ESMTB_F32);
  gpu_ok(g, g->ops->layernorm_backward(g->dev, &a, g->st), "layernorm_backward");
  float *hdw2 = gdown(g, gdw, (size_t)d, ESMTB_F32), *hdb2 = gdown(g, gdb, (size_t)d, ESMTB_F32);
  float *hdx2 = gdown(g, gdx, n, dt);

  char what[96];
  const char *sfx = off ? " (unaligned)" : "";
  snprintf(what, sizeof what, "layernorm_forward N%d d%d%s", N, d, sfx);
  report(g, what, dt, relerr(ho, co, n), dt_tol(dt));
  snprintf(what, sizeof what, "layernorm mean/rstd N%d d%d", N, d);
  report(g, what, dt, fmax(relerr(hm, cm, (size_t)N), relerr(hr, cr, (size_t)N)), 1e-5);
  snprintf(what, sizeof what, "layernorm_backward dx%s N%d d%d%s", accumulate ? "+=" : "", N, d,
           sfx);
  report(g, what, dt, relerr(hdx, cdx, n), dt_tol(dt));
  report_bits(g, what, dt, hdx, hdx2, n * sizeof(float));
  snprintf(what, sizeof what, "layernorm_backward dw N%d d%d", N, d);
  report(g, what, dt, relerr(hdw, cdw, (size_t)d), dt_tol(dt));
  report_bits(g, what, dt, hdw, hdw2, (size_t)d * sizeof(float));
  snprintf(what, sizeof what, "layernorm_backward db N%d d%d", N, d);
  report(g, what, dt, relerr(hdb, cdb, (size_t)d), dt_tol(dt));
  report_bits(g, what, dt, hdb, hdb2, (size_t)d * sizeof(float));

  gfree(g, bx); gfree(g, bo); gfree(g, bd); gfree(g, bdx); gfree(g, gw); gfree(g, gb);
  gfree(g, gm); gfree(g, gr); gfree(g, gdw); gfree(g, gdb);
  free(x); free(w); free(b); free(dout); free(dx0); free(dw0); free(db0);
  free(co); free(cm); free(cr); free(cdx); free(cdw); free(cdb);
  free(ho); free(hm); free(hr); free(hdx); free(hdw); free(hdb); free(hdw2); free(hdb2); free(hdx2);
}

static void layernorm_case(const gpu *g, esmtb_dtype dt, int N, int d, int accumulate) {
  layernorm_case_off(g, dt, N, d, accumulate, 0);
}

static void test_layernorm(void **state) {
  (void)state;
  CHECKS_BEGIN();
  FOR_EACH_GPU_DTYPE(g, dt) {
    layernorm_case(g, dt, 1024, 320, 0);
    layernorm_case(g, dt, 1024, 1280, 1);
    layernorm_case(g, dt, 1023, 333, 1);
    layernorm_case(g, dt, 5, 20, 0); /* d below a warp */
    layernorm_case(g, dt, 64, 480, 1);  /* ESM-2 35M width: 60 vectors of 8 halves a row */
    layernorm_case(g, dt, 7, 8, 0);     /* one vector a row, most lanes idle */
    layernorm_case(g, dt, 9, 12, 1);    /* a multiple of 4 floats, not of 8 halves */
    layernorm_case_off(g, dt, 33, 320, 1, 1); /* vector width, misaligned rows: scalar */
  }
  CHECKS_END();
}

/* ------------------------------------------------------------------ */
/* bias_grad                                                           */
/* ------------------------------------------------------------------ */

static void bias_grad_case(const gpu *g, esmtb_dtype dt, int rows, int cols) {
  const size_t n = (size_t)rows * cols;
  float *dy = randf(n, 1.0, 0), *db0 = randf((size_t)cols, 1.0, 0), *cdb = copyf(db0, (size_t)cols);
  round_to(dy, n, dt);
  esmtb_bias_grad_args x = {sizeof x, ESMTB_F32, rows, cols, dy, cdb};
  cpu_ok(cpu->bias_grad(cdev, &x, NULL), "bias_grad");
  void *gdy = gup(g, dy, n, dt);
  float *gdb = gup(g, db0, (size_t)cols, ESMTB_F32);
  x.dtype = dt; x.dy = gdy; x.db = gdb;
  gpu_ok(g, g->ops->bias_grad(g->dev, &x, g->st), "bias_grad");
  float *h1 = gdown(g, gdb, (size_t)cols, ESMTB_F32);
  gput(g, gdb, db0, (size_t)cols, ESMTB_F32);
  gpu_ok(g, g->ops->bias_grad(g->dev, &x, g->st), "bias_grad");
  float *h2 = gdown(g, gdb, (size_t)cols, ESMTB_F32);
  char what[96];
  snprintf(what, sizeof what, "bias_grad rows%d cols%d", rows, cols);
  report(g, what, dt, relerr(h1, cdb, (size_t)cols), dt_tol(dt));
  report_bits(g, what, dt, h1, h2, (size_t)cols * sizeof(float));
  gfree(g, gdy); gfree(g, gdb);
  free(dy); free(db0); free(cdb); free(h1); free(h2);
}

static void test_bias_grad(void **state) {
  (void)state;
  CHECKS_BEGIN();
  FOR_EACH_GPU_DTYPE(g, dt) {
    bias_grad_case(g, dt, 1024, 1280);
    bias_grad_case(g, dt, 1024, 3840);
    bias_grad_case(g, dt, 1023, 33);
    bias_grad_case(g, dt, 5000, 321);
  }
  CHECKS_END();
}

/* ------------------------------------------------------------------ */
/* cross-entropy                                                       */
/* ------------------------------------------------------------------ */

static void xent_case(const gpu *g, esmtb_dtype dt, int N, int vocab) {
  const size_t n = (size_t)N * vocab;
  float *z = randf(n, 4.0, 0);
  round_to(z, n, dt);
  int32_t *lab = malloc((size_t)N * sizeof *lab);
  assert_non_null(lab);
  int count = 0;
  for (int i = 0; i < N; i++) {
    lab[i] = urand() < -0.7 ? (int32_t)((urand() + 1.0) * 0.5 * (vocab - 1) + 0.5) : -1;
    count += lab[i] >= 0;
  }
  const float gs = count ? 1.0f / (float)count : 0.0f;
  float closs = 1.5f, *cdl = malloc(n * sizeof *cdl);
  assert_non_null(cdl);
  esmtb_xent_args x = {0};
  x.struct_size = sizeof x; x.dtype = ESMTB_F32; x.N = N; x.V = vocab;
  x.logits = z; x.labels = lab; x.loss_sum = &closs; x.dlogits = cdl; x.grad_scale = gs;
  cpu_ok(cpu->xent(cdev, &x, NULL), "xent");

  void *gz = gup(g, z, n, dt), *gdl = galloc(g, n * dt_size(dt));
  int32_t *glab = galloc(g, (size_t)N * sizeof *glab);
  gput_raw(g, glab, lab, (size_t)N * sizeof *glab);
  const float start = 1.5f;
  float *gl = gup(g, &start, 1, ESMTB_F32);
  x.dtype = dt; x.logits = gz; x.labels = glab; x.loss_sum = gl; x.dlogits = gdl;
  gpu_ok(g, g->ops->xent(g->dev, &x, g->st), "xent");
  float *hdl = gdown(g, gdl, n, dt), *hl = gdown(g, gl, 1, ESMTB_F32);
  /* Forward only, then in place (dlogits aliases logits). */
  gput(g, gl, &start, 1, ESMTB_F32);
  x.dlogits = NULL;
  gpu_ok(g, g->ops->xent(g->dev, &x, g->st), "xent");
  float *hl2 = gdown(g, gl, 1, ESMTB_F32);
  gput(g, gl, &start, 1, ESMTB_F32);
  x.dlogits = gz;
  gpu_ok(g, g->ops->xent(g->dev, &x, g->st), "xent");
  float *hdl3 = gdown(g, gz, n, dt), *hl3 = gdown(g, gl, 1, ESMTB_F32);

  char what[96];
  snprintf(what, sizeof what, "xent loss_sum N%d V%d", N, vocab);
  float cl = closs - 1.5f, g1 = hl[0] - 1.5f;
  report(g, what, dt, fabs((double)g1 - cl) / fabs((double)cl), dt == ESMTB_F32 ? 1e-5 : 1e-3);
  report_bits(g, what, dt, hl, hl2, sizeof(float));
  report_bits(g, "xent loss_sum (in place)", dt, hl, hl3, sizeof(float));
  snprintf(what, sizeof what, "xent dlogits N%d V%d", N, vocab);
  report(g, what, dt, relerr(hdl, cdl, n), dt_tol(dt));
  report(g, "xent dlogits (aliasing logits)", dt, relerr(hdl3, cdl, n), dt_tol(dt));

  gfree(g, gz); gfree(g, gdl); gfree(g, glab); gfree(g, gl);
  free(z); free(lab); free(cdl); free(hdl); free(hl); free(hl2); free(hdl3); free(hl3);
}

static void test_xent(void **state) {
  (void)state;
  CHECKS_BEGIN();
  FOR_EACH_GPU_DTYPE(g, dt) {
    xent_case(g, dt, 1024, V);
    xent_case(g, dt, 16 * 512 + 3, V);
    xent_case(g, dt, 100, 1000); /* a wider vocabulary than a warp */
  }
  CHECKS_END();
}

/* ------------------------------------------------------------------ */
/* argument errors                                                     */
/* ------------------------------------------------------------------ */

static void expect_fail(const gpu *g, esmtb_status st, const char *needle, const char *what) {
  const char *msg = test_backend_error();
  int ok = st != 0 && strstr(msg, needle) != NULL;
  printf("RESULT %-12s %-34s      error %s: \"%s\"\n", g->name, what, ok ? "ok" : "FAIL", msg);
  fflush(stdout);
  if (!ok) {
    printf("       wanted a non-zero status (got %d) and a message naming \"%s\"\n", st, needle);
    g_failed++;
  }
}

static void test_errors(void **state) {
  (void)state;
  CHECKS_BEGIN();
  for (int gi = 0; gi < g_ngpu; gi++) {
    const gpu *g = &g_gpus[gi];
    const esmtb_ops *o = g->ops;
    float *buf = galloc(g, 4096);
    int32_t *tok = galloc(g, 64);
    esmtb_gemm_args ga = {0};
    ga.struct_size = sizeof ga; ga.dtype = ESMTB_F32; ga.m = ga.n = ga.k = 4; ga.alpha = 1;
    ga.a = buf; ga.b = buf; ga.c = buf; ga.lda = ga.ldb = ga.ldc = 4;
    ga.a = NULL;
    expect_fail(g, o->gemm(g->dev, &ga, g->st), "gemm", "gemm NULL a");
    ga.a = buf; ga.m = 0;
    expect_fail(g, o->gemm(g->dev, &ga, g->st), "positive", "gemm m=0");
    ga.m = 4; ga.lda = 3;
    expect_fail(g, o->gemm(g->dev, &ga, g->st), "leading", "gemm lda too small");
    ga.lda = 4; ga.bias = buf; ga.beta = 1;
    expect_fail(g, o->gemm(g->dev, &ga, g->st), "bias", "gemm bias with beta");
    ga.bias = NULL; ga.beta = 0; ga.dtype = ESMTB_I32;
    expect_fail(g, o->gemm(g->dev, &ga, g->st), "support", "gemm int32");
    ga.dtype = ESMTB_F32; ga.epilogue = (esmtb_epilogue)7;
    expect_fail(g, o->gemm(g->dev, &ga, g->st), "epilogue", "gemm unknown epilogue");

    esmtb_embed_args e = {0};
    e.struct_size = sizeof e; e.dtype = ESMTB_F32; e.B = 1; e.T = 4; e.d = 2; e.tokens = NULL;
    e.E = buf; e.out = buf; e.row_scale = buf; e.mask_id = MASK; e.pad_id = PAD;
    e.dout = buf; e.dE = buf;
    expect_fail(g, o->embed_forward(g->dev, &e, g->st), "embed_forward", "embed_forward NULL tokens");
    e.tokens = tok; e.dE = NULL;
    expect_fail(g, o->embed_backward(g->dev, &e, g->st), "embed_backward", "embed_backward NULL dE");
    e.dE = buf; e.dtype = ESMTB_U8;
    expect_fail(g, o->embed_forward(g->dev, &e, g->st), "support", "embed_forward u8");

    esmtb_layernorm_args l = {0};
    l.struct_size = sizeof l; l.dtype = ESMTB_F32; l.N = 4; l.d = 0; l.eps = 1e-5f;
    l.x = buf; l.out = buf; l.dout = buf; l.dx = buf;
    l.w = buf; l.b = buf; l.mean = buf; l.rstd = buf; l.dw = buf; l.db = buf;
    expect_fail(g, o->layernorm_forward(g->dev, &l, g->st), "layernorm_forward", "layernorm_forward d=0");
    l.d = 4; l.dw = NULL;
    expect_fail(g, o->layernorm_backward(g->dev, &l, g->st), "layernorm_backward", "layernorm_backward NULL dw");

    esmtb_add_args ad = {sizeof ad, ESMTB_U8, 16, buf, buf, buf};
    expect_fail(g, o->add(g->dev, &ad, g->st), "add", "add u8");
    esmtb_gelu_backward_args gb = {sizeof gb, ESMTB_F32, 16, NULL, buf, buf};
    expect_fail(g, o->gelu_backward(g->dev, &gb, g->st), "gelu_backward", "gelu_backward NULL pre");
    esmtb_bias_grad_args bg = {sizeof bg, ESMTB_F32, 4, 0, buf, buf};
    expect_fail(g, o->bias_grad(g->dev, &bg, g->st), "bias_grad", "bias_grad cols=0");

    esmtb_xent_args x = {0};
    x.struct_size = sizeof x; x.dtype = ESMTB_F32; x.N = 4; x.V = 0;
    x.logits = buf; x.labels = tok; x.loss_sum = buf; x.grad_scale = 1;
    expect_fail(g, o->xent(g->dev, &x, g->st), "xent", "xent V=0");

    esmtb_segment seg = {0, 16, 0.01f};
    esmtb_adamw_args aw = {0};
    aw.struct_size = sizeof aw; aw.n_segments = 1; aw.segments = &seg;
    aw.params = buf; aw.m = buf; aw.v = buf; aw.grads = buf; aw.lr = 1e-3f; aw.beta1 = 0.9f;
    aw.beta2 = 0.98f; aw.eps = 1e-8f; aw.step = 0; aw.grad_scale = 1;
    expect_fail(g, o->adamw(g->dev, &aw, g->st), "step", "adamw step=0");
    aw.step = 1; aw.params_lowp = buf; aw.lowp_dtype = ESMTB_I32;
    expect_fail(g, o->adamw(g->dev, &aw, g->st), "lowp_dtype 3", "adamw lowp int32");
    if (o->lion) {
      esmtb_lion_args al = {0};
      al.struct_size = sizeof al; al.n_segments = 1; al.segments = &seg;
      al.params = buf; al.grads = buf; al.m = NULL;
      expect_fail(g, o->lion(g->dev, &al, g->st), "NULL", "lion m=NULL");
      al.m = buf; al.params_lowp = buf; al.lowp_dtype = ESMTB_I32;
      expect_fail(g, o->lion(g->dev, &al, g->st), "lowp_dtype 3", "lion lowp int32");
    }

    /* Nothing above may have left a CUDA error behind. */
    gsync(g);
    gfree(g, buf);
    gfree(g, tok);
  }
  CHECKS_END();
}

/* ------------------------------------------------------------------ */
/* main: probe, skip without a GPU                                     */
/* ------------------------------------------------------------------ */

static const struct {
  const char *name;
  int min_major, min_minor;
} k_backends[] = {{"ampere_bf16", 8, 0}, {"turing_fp16", 7, 5}};

int main(void) {
  const char *dir = getenv("ESMT_TEST_BACKEND_DIR");
  if (!dir || !*dir) {
    printf("SKIP: ESMT_TEST_BACKEND_DIR is not set (run through ctest)\n");
    return 77;
  }
  char reasons[1024] = "";
  /* ESMT_GPU_OPS_SELFTEST=1 runs the harness with cpu.so standing in for a
   * GPU backend (f32 only): a check of this file's own plumbing on a
   * machine without a GPU. Not a test of the GPU code. */
  const char *self = getenv("ESMT_GPU_OPS_SELFTEST");
  if (self && *self && strcmp(self, "0") != 0) {
    gpu *g = &g_gpus[g_ngpu++];
    g->name = "cpu-as-gpu";
    g->ops = test_load_backend("cpu");
    esmtb_open_options oo = {sizeof oo, 0, 0, 0};
    if (g->ops->open(&oo, &g->dev)) return 1;
    g->st = NULL;
    printf("note: self-test of the harness with cpu.so in place of a GPU backend\n");
  }
  for (size_t i = 0; i < sizeof k_backends / sizeof k_backends[0] && !g_ngpu; i++) {
    const esmtb_ops *o = test_load_backend(k_backends[i].name);
    esmtb_job job = {sizeof job, 0, 512, 2};
    esmtb_probe p;
    memset(&p, 0, sizeof p);
    if (o->probe(&job, &p)) {
      snprintf(reasons + strlen(reasons), sizeof reasons - strlen(reasons), "%s%s: probe failed: %s",
               *reasons ? "; " : "", k_backends[i].name, test_backend_error());
      continue;
    }
    /* Testable when a device is recent enough and the ops are there, even
     * while probe() still reports another missing op (attention). */
    int usable = 0;
    for (int d = 0; d < p.device_count; d++)
      if (p.devices[d].cc_major > k_backends[i].min_major ||
          (p.devices[d].cc_major == k_backends[i].min_major &&
           p.devices[d].cc_minor >= k_backends[i].min_minor))
        usable = 1;
    if (!usable || !o->gemm) {
      snprintf(reasons + strlen(reasons), sizeof reasons - strlen(reasons), "%s%s: %s",
               *reasons ? "; " : "", k_backends[i].name,
               p.reason[0] ? p.reason : "no usable device");
      continue;
    }
    if (!p.available) printf("note: %s probe says unavailable (%s); testing its ops anyway\n",
                             k_backends[i].name, p.reason);
    gpu *g = &g_gpus[g_ngpu];
    g->name = k_backends[i].name;
    g->ops = o;
    esmtb_open_options oo = {sizeof oo, 0, 0, 0};
    if (o->open(&oo, &g->dev) || o->stream_create(g->dev, &g->st)) {
      printf("FAIL: %s open: %s\n", g->name, test_backend_error());
      return 1;
    }
    printf("testing %s on %s (cc %d.%d)\n", g->name, p.devices[0].name, p.devices[0].cc_major,
           p.devices[0].cc_minor);
    g_ngpu++;
  }
  if (!g_ngpu) {
    printf("SKIP: %s\n", reasons);
    return 77;
  }
  cpu = test_load_backend("cpu");
  esmtb_open_options co = {sizeof co, 0, 0, 0};
  if (cpu->open(&co, &cdev)) {
    printf("FAIL: cpu open: %s\n", test_backend_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm),      cmocka_unit_test(test_embed),
      cmocka_unit_test(test_layernorm), cmocka_unit_test(test_add),
      cmocka_unit_test(test_gelu_backward), cmocka_unit_test(test_convert_scale),
      cmocka_unit_test(test_dropout),
      cmocka_unit_test(test_bias_grad),
      cmocka_unit_test(test_xent),      cmocka_unit_test(test_adamw),
      cmocka_unit_test(test_lion),
      cmocka_unit_test(test_errors),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  for (int i = 0; i < g_ngpu; i++) {
    g_gpus[i].ops->stream_destroy(g_gpus[i].dev, g_gpus[i].st);
    g_gpus[i].ops->close(g_gpus[i].dev);
  }
  cpu->close(cdev);
  return rc;
}
