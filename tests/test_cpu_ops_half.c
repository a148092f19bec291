/* SPDX-License-Identifier: MIT */
/* The cpu backend's ops with F16/BF16 activations (inputs exactly
 * representable) against the float64 references of cpu_ops_common.c:
 * 1e-2 (f16) / 2e-2 (bf16) where the output is half, 1e-5 where fp32.
 * ctest also runs it with ESMT_CPU_ISA=avx2 and =generic. */
#include "test_util.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops_common.h"

/* ------------------------------------------------------------------ */
/* F16 / BF16 activations                                              */
/* ------------------------------------------------------------------ */
/* Inputs are rounded to the dtype first (so the op sees them exactly) and
 * the float64 references are computed from the rounded values. Outputs
 * written in half: normalised error <= 1e-2 (f16), 2e-2 (bf16); fp32
 * outputs (c_f32 GEMM, dw/db/dE, lse, loss_sum, mean/rstd) <= 1e-5. Each
 * comparison prints a RESULT line with the measured error. */

static const char *dt_name(int dt) { return dt == ESMTB_F16 ? "f16" : "bf16"; }
static double half_tol(int dt) { return dt == ESMTB_F16 ? 1e-2 : 2e-2; }

static uint16_t f2h(float f, int dt) { return dt == ESMTB_F16 ? ref_f16(f) : ref_bf16(f); }
static float h2f(uint16_t h, int dt) {
  if (dt == ESMTB_BF16) {
    const uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
  }
  const int e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (float)(h & 0x8000 ? -v : v);
}
/* x rounded to dt in place (then exactly representable); returns x */
static float *round_dt(float *x, size_t n, int dt) {
  for (size_t i = 0; i < n; i++) x[i] = h2f(f2h(x[i], dt), dt);
  return x;
}
static uint16_t *pack(const float *x, size_t n, int dt) {
  uint16_t *h = malloc((n ? n : 1) * sizeof *h);
  assert_non_null(h);
  for (size_t i = 0; i < n; i++) h[i] = f2h(x[i], dt);
  return h;
}
static float *unpack(const uint16_t *h, size_t n, int dt) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  assert_non_null(x);
  for (size_t i = 0; i < n; i++) x[i] = h2f(h[i], dt);
  return x;
}
static float *rand_dt(size_t n, double scale, int dt) { return round_dt(randf(n, scale), n, dt); }

/* expect_close, printing the measured error */
static void report_close(const float *got, const double *ref, size_t n, double tol,
                         const char *what, int dt) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  print_message("RESULT %-34s %-4s err %.2e (tol %.0e)\n", what, dt_name(dt),
                sqrt(num / (den ? den : 1)), tol);
  expect_close(got, ref, n, tol, what);
}
static void report_half(const uint16_t *got, const double *ref, size_t n, const char *what,
                        int dt) {
  float *g = unpack(got, n, dt);
  report_close(g, ref, n, half_tol(dt), what, dt);
  free(g);
}

/* The whole gradient of a float64 loss by central differences. */
static void fd_grad(ref_loss f, void *ctx, const double *x, size_t n, double *g) {
  const double h = 1e-5;
  double *xp = malloc(n * sizeof *xp);
  assert_non_null(xp);
  memcpy(xp, x, n * sizeof *xp);
  for (size_t i = 0; i < n; i++) {
    xp[i] = x[i] + h;
    const double lp = f(ctx, xp);
    xp[i] = x[i] - h;
    const double lm = f(ctx, xp);
    xp[i] = x[i];
    g[i] = (lp - lm) / (2 * h);
  }
  free(xp);
}

static void test_half_caps(void **state) {
  (void)state;
  assert_true(ops->caps & ESMTB_CAP_F16);
  assert_true(ops->caps & ESMTB_CAP_BF16);
}

/* GEMM with half a, b (and c, bias, pre); with c_f32 an fp32 C that
 * accumulates (beta) as weight gradients do. */
static void gemm_half_case(int dt, int ta, int tb, int m, int n, int k, float alpha, float beta,
                           int bias, int gelu, int c_f32) {
  const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
  const size_t asz = (size_t)(ta ? k : m) * lda, bsz = (size_t)(tb ? n : k) * ldb;
  const size_t csz = (size_t)m * ldc;
  float *A = rand_dt(asz, 1.0, dt), *Bm = rand_dt(bsz, 1.0, dt), *bv = rand_dt(n, 1.0, dt);
  float *C = c_f32 ? randf(csz, 1.0) : rand_dt(csz, 1.0, dt);
  double *ref = to_d(C, csz), *refpre = zerod(csz);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int q = 0; q < k; q++)
        s += (double)(ta ? A[(size_t)q * lda + i] : A[(size_t)i * lda + q]) *
             (tb ? Bm[(size_t)j * ldb + q] : Bm[(size_t)q * ldb + j]);
      const double y = alpha * s + beta * ref[(size_t)i * ldc + j] + (bias ? bv[j] : 0.0);
      refpre[(size_t)i * ldc + j] = y;
      ref[(size_t)i * ldc + j] = gelu ? gelu_d(y) : y;
    }
  uint16_t *Ah = pack(A, asz, dt), *Bh = pack(Bm, bsz, dt), *bh = pack(bv, n, dt);
  uint16_t *Ch = pack(C, csz, dt), *preh = pack(C, csz, dt);
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g; g.dtype = (esmtb_dtype)dt;
  g.trans_a = ta; g.trans_b = tb; g.m = m; g.n = n; g.k = k; g.alpha = alpha; g.beta = beta;
  g.a = Ah; g.lda = lda; g.b = Bh; g.ldb = ldb; g.ldc = ldc; g.c = c_f32 ? (void *)C : Ch;
  g.bias = bias ? bh : NULL; g.epilogue = gelu ? ESMTB_EPI_GELU : ESMTB_EPI_NONE;
  g.pre = gelu ? preh : NULL; g.c_f32 = c_f32;
  assert_int_equal(ops->gemm(dev, &g, NULL), 0);
  float *got = c_f32 ? C : unpack(Ch, csz, dt), *gotpre = unpack(preh, csz, dt);
  double *rw = zerod((size_t)m * n), *pw = zerod((size_t)m * n);
  float *cw = zerof((size_t)m * n), *qw = zerof((size_t)m * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < ldc; j++) {
      const size_t o = (size_t)i * ldc + j, w = (size_t)i * n + j;
      if (j >= n) { /* the ld padding is untouched */
        if (c_f32) assert_true(C[o] == (float)ref[o]);
        else assert_int_equal(Ch[o], f2h((float)ref[o], dt));
        continue;
      }
      rw[w] = ref[o]; pw[w] = refpre[o]; cw[w] = got[o]; qw[w] = gotpre[o];
    }
  char what[96];
  snprintf(what, sizeof what, "gemm%s t%d%d %dx%dx%d b=%g%s%s", c_f32 ? " c_f32" : "", ta, tb, m,
           n, k, beta, bias ? " bias" : "", gelu ? " gelu" : "");
  report_close(cw, rw, (size_t)m * n, c_f32 ? 1e-5 : half_tol(dt), what, dt);
  if (gelu) {
    strncat(what, " pre", sizeof what - strlen(what) - 1);
    report_close(qw, pw, (size_t)m * n, half_tol(dt), what, dt);
  }
  if (!c_f32) free(got);
  free(A); free(Bm); free(bv); free(C); free(ref); free(refpre); free(Ah); free(Bh); free(bh);
  free(Ch); free(preh); free(gotpre); free(rw); free(pw); free(cw); free(qw);
}

static void test_gemm_half(void **state) {
  (void)state;
  for (int dt = ESMTB_F16; dt <= ESMTB_BF16; dt++) {
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        gemm_half_case(dt, ta, tb, 37, 29, 23, 0.75f, 0.0f, 1, 0, 0); /* bias */
        gemm_half_case(dt, ta, tb, 21, 40, 17, 1.0f, 1.0f, 0, 0, 0);  /* half C accumulates */
        gemm_half_case(dt, ta, tb, 21, 40, 17, 1.0f, 1.0f, 0, 0, 1);  /* c_f32, beta = 1 */
      }
    gemm_half_case(dt, 0, 1, 130, 97, 64, 1.0f, 0.0f, 1, 1, 0); /* bias + GELU, pre kept */
    gemm_half_case(dt, 0, 0, 33, 17, 9, -0.5f, 0.25f, 0, 1, 0);  /* beta with GELU */
    gemm_half_case(dt, 1, 0, 64, 48, 150, 1.0f, 0.0f, 0, 0, 1);  /* dW = dY^T X, c_f32 */
  }
  /* c_f32 with fp32 inputs is the plain fp32 GEMM */
  float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1}, C[4] = {1, 1, 1, 1};
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g; g.dtype = ESMTB_F32; g.m = 2; g.n = 2; g.k = 3; g.alpha = 1;
  g.beta = 1; g.a = A; g.lda = 3; g.b = B; g.ldb = 2; g.c = C; g.ldc = 2; g.c_f32 = 1;
  assert_int_equal(ops->gemm(dev, &g, NULL), 0);
  assert_true(C[0] == 5 && C[1] == 6 && C[2] == 11 && C[3] == 12);
  /* an ABI 1.0 caller's struct ends before c_f32: whatever lies there is
   * not read (here it would refuse the bias), C is the f16 dtype */
  uint16_t Ah[2] = {0x3c00, 0x4000}, Bh[1] = {0x4200}, Ch[2] = {0}, bh[1] = {0x3c00};
  esmtb_gemm_args o = {0};
  o.struct_size = (uint32_t)offsetof(esmtb_gemm_args, c_f32); o.dtype = ESMTB_F16;
  o.m = 2; o.n = 1; o.k = 1; o.alpha = 1; o.a = Ah; o.lda = 1; o.b = Bh; o.ldb = 1;
  o.c = Ch; o.ldc = 1; o.bias = bh; o.c_f32 = 1;
  assert_int_equal(ops->gemm(dev, &o, NULL), 0);
  assert_int_equal(Ch[0], 0x4400); /* 1 * 3 + 1 = 4 */
  assert_int_equal(Ch[1], 0x4700); /* 2 * 3 + 1 = 7 */
}

/* add, gelu_backward and bias_grad in half */
static void test_elementwise_half(void **state) {
  (void)state;
  const size_t n = 1037;
  for (int dt = ESMTB_F16; dt <= ESMTB_BF16; dt++) {
    float *a = rand_dt(n, 2.0, dt), *b = rand_dt(n, 2.0, dt), *pre = rand_dt(n, 5.0, dt);
    double *ref = zerod(n);
    uint16_t *ah = pack(a, n, dt), *bh = pack(b, n, dt), *yh = pack(a, n, dt);
    for (size_t i = 0; i < n; i++) ref[i] = (double)a[i] + b[i];
    esmtb_add_args ad = {sizeof ad, (esmtb_dtype)dt, n, ah, bh, yh};
    assert_int_equal(ops->add(dev, &ad, NULL), 0);
    report_half(yh, ref, n, "add", dt);
    ad.y = ah; /* y may alias a */
    assert_int_equal(ops->add(dev, &ad, NULL), 0);
    assert_memory_equal(ah, yh, n * sizeof *yh);
    uint16_t *ph = pack(pre, n, dt), *dh = pack(b, n, dt), *gh = pack(b, n, dt);
    for (size_t i = 0; i < n; i++) {
      const double x = pre[i], pdf = exp(-0.5 * x * x) / sqrt(2 * 3.14159265358979323846);
      ref[i] = (double)b[i] * (0.5 * (1 + erf(x / sqrt(2.0))) + x * pdf);
    }
    esmtb_gelu_backward_args gb = {sizeof gb, (esmtb_dtype)dt, n, ph, dh, gh};
    assert_int_equal(ops->gelu_backward(dev, &gb, NULL), 0);
    report_half(gh, ref, n, "gelu_backward", dt);
    gb.dpre = dh; /* dpre may alias dout */
    assert_int_equal(ops->gelu_backward(dev, &gb, NULL), 0);
    assert_memory_equal(dh, gh, n * sizeof *gh);
    /* bias_grad: half dy, fp32 db accumulates */
    const int rows = 301, cols = 77;
    float *dy = rand_dt((size_t)rows * cols, 1.0, dt), *db = randf(cols, 1.0);
    double *dref = to_d(db, cols);
    for (int i = 0; i < rows; i++)
      for (int j = 0; j < cols; j++) dref[j] += dy[(size_t)i * cols + j];
    uint16_t *dyh = pack(dy, (size_t)rows * cols, dt);
    esmtb_bias_grad_args bg = {sizeof bg, (esmtb_dtype)dt, rows, cols, dyh, db};
    assert_int_equal(ops->bias_grad(dev, &bg, NULL), 0);
    report_close(db, dref, cols, 1e-5, "bias_grad db (fp32)", dt);
    free(a); free(b); free(pre); free(ref); free(ah); free(bh); free(yh); free(ph); free(dh);
    free(gh); free(dy); free(db); free(dref); free(dyh);
  }
}

/* fp16 overflow gives inf (what the loss scaler looks for) */
static void test_f16_overflow(void **state) {
  (void)state;
  const uint16_t big = 0x7a00; /* 49152 */
  uint16_t a[3] = {big, big, 0x3c00}, y[3];
  esmtb_add_args ad = {sizeof ad, ESMTB_F16, 3, a, a, y};
  assert_int_equal(ops->add(dev, &ad, NULL), 0);
  assert_int_equal(y[0], 0x7c00);
  assert_int_equal(y[2], 0x4000);
  uint16_t A[2] = {0x5c00, 0xdc00}, B[1] = {0x5c00}, C[2] = {0}; /* 256, -256 */
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g; g.dtype = ESMTB_F16; g.m = 2; g.n = 1; g.k = 1; g.alpha = 1;
  g.a = A; g.lda = 1; g.b = B; g.ldb = 1; g.c = C; g.ldc = 1;
  assert_int_equal(ops->gemm(dev, &g, NULL), 0);
  assert_int_equal(C[0], 0x7c00); /* 65536: +inf */
  assert_int_equal(C[1], 0xfc00);
  float loss = 0;
  uint16_t zh[2] = {0, 0}, dz[2];
  int32_t lab[1] = {0};
  esmtb_xent_args xe = {sizeof xe, ESMTB_F16, 1, 2, zh, lab, &loss, dz, 1e6f};
  assert_int_equal(ops->xent(dev, &xe, NULL), 0); /* (0.5 - 1) * 1e6 */
  assert_int_equal(dz[0], 0xfc00);
  assert_int_equal(dz[1], 0x7c00);
}

static void test_embedding_half(void **state) {
  (void)state;
  const int B = 2, T = 9, d = 40;
  const int32_t tok[] = {0, 5, 32, 7, 32, 9, 2, 1, 1, 0, 4, 5, 6, 7, 8, 9, 10, 2};
  for (int dt = ESMTB_F16; dt <= ESMTB_BF16; dt++) {
    const size_t no = (size_t)B * T * d, ne = (size_t)VOCAB * d;
    float *E = rand_dt(ne, 0.5, dt), *r = rand_dt(no, 1.0, dt), *scale = zerof(B);
    float *dE = randf(ne, 1.0);
    double *Ed = to_d(E, ne), *rd = to_d(r, no), *ref = zerod(no), *sref = zerod(B);
    double *dEref = to_d(dE, ne);
    emb_ctx c = {B, T, d, tok, rd};
    emb_ref(&c, Ed, ref, sref);
    uint16_t *Eh = pack(E, ne, dt), *rh = pack(r, no, dt), *oh = pack(r, no, dt);
    esmtb_embed_args a = {0};
    a.struct_size = sizeof a; a.dtype = (esmtb_dtype)dt; a.B = B; a.T = T; a.d = d;
    a.tokens = tok; a.E = Eh; a.out = oh; a.row_scale = scale; a.mask_id = MASK; a.pad_id = PAD;
    a.mask_ratio_train = 0.12f; a.dout = rh; a.dE = dE;
    assert_int_equal(ops->embed_forward(dev, &a, NULL), 0);
    report_half(oh, ref, no, "embed_forward", dt);
    report_close(scale, sref, B, 1e-6, "embed row_scale (fp32)", dt);
    for (int i = 0; i < B * T; i++)
      for (int k = 0; k < d && (tok[i] == PAD || tok[i] == MASK); k++)
        assert_int_equal(oh[(size_t)i * d + k], 0);
    for (int i = 0; i < B * T; i++)
      if (tok[i] != PAD && tok[i] != MASK)
        for (int k = 0; k < d; k++)
          dEref[(size_t)tok[i] * d + k] += (double)r[(size_t)i * d + k] * scale[i / T];
    assert_int_equal(ops->embed_backward(dev, &a, NULL), 0);
    report_close(dE, dEref, ne, 1e-5, "embed_backward dE (fp32)", dt);
    free(E); free(r); free(scale); free(dE); free(Ed); free(rd); free(ref); free(sref);
    free(dEref); free(Eh); free(rh); free(oh);
  }
}

static void test_layernorm_half(void **state) {
  (void)state;
  const int N = 7, d = 48;
  const size_t n = (size_t)N * d;
  for (int dt = ESMTB_F16; dt <= ESMTB_BF16; dt++) {
    float *x = randf(n, 2.0), *w = randf(d, 1.0), *b = randf(d, 0.5);
    for (size_t i = 0; i < n; i++) x[i] += 3.0f;
    round_dt(x, n, dt);
    float *r = rand_dt(n, 1.0, dt), *dx0 = rand_dt(n, 1.0, dt), *mean = zerof(N), *rstd = zerof(N);
    float *dw = randf(d, 1.0), *db = randf(d, 1.0);
    double *xd = to_d(x, n), *wd = to_d(w, d), *bd = to_d(b, d), *rd = to_d(r, n);
    double *ref = zerod(n), *mref = zerod(N), *sref = zerod(N);
    ln_ref(N, d, xd, wd, bd, ref, mref, sref);
    uint16_t *xh = pack(x, n, dt), *oh = pack(r, n, dt), *rh = pack(r, n, dt);
    uint16_t *dxh = pack(dx0, n, dt);
    esmtb_layernorm_args a = {0};
    a.struct_size = sizeof a; a.dtype = (esmtb_dtype)dt; a.N = N; a.d = d; a.eps = 1e-5f;
    a.x = xh; a.w = w; a.b = b; a.out = oh; a.mean = mean; a.rstd = rstd;
    assert_int_equal(ops->layernorm_forward(dev, &a, NULL), 0);
    report_half(oh, ref, n, "layernorm_forward out", dt);
    report_close(mean, mref, N, 1e-5, "layernorm mean (fp32)", dt);
    report_close(rstd, sref, N, 1e-5, "layernorm rstd (fp32)", dt);
    /* backward, dx accumulated onto a half residual gradient */
    double *gx = zerod(n), *gw = zerod(d), *gb = zerod(d);
    ln_ctx c = {N, d, 0, xd, wd, bd, rd};
    fd_grad(ln_loss, &c, xd, n, gx);
    c.wrt = 1;
    fd_grad(ln_loss, &c, wd, d, gw);
    c.wrt = 2;
    fd_grad(ln_loss, &c, bd, d, gb);
    for (size_t i = 0; i < n; i++) gx[i] += dx0[i];
    for (int k = 0; k < d; k++) {
      gw[k] += dw[k];
      gb[k] += db[k];
    }
    a.dout = rh; a.dx = dxh; a.dw = dw; a.db = db; a.accumulate_dx = 1;
    assert_int_equal(ops->layernorm_backward(dev, &a, NULL), 0);
    report_half(dxh, gx, n, "layernorm_backward dx (accum)", dt);
    report_close(dw, gw, d, 1e-5, "layernorm_backward dw (fp32)", dt);
    report_close(db, gb, d, 1e-5, "layernorm_backward db (fp32)", dt);
    free(x); free(w); free(b); free(r); free(dx0); free(mean); free(rstd); free(dw); free(db);
    free(xd); free(wd); free(bd); free(rd); free(ref); free(mref); free(sref); free(xh);
    free(oh); free(rh); free(dxh); free(gx); free(gw); free(gb);
  }
}

static void attention_half_case(int dt, int B, int T, int H, int hd, const int32_t *len) {
  const int half = hd / 2, D = H * hd;
  const size_t N = (size_t)B * T, nq = N * 3 * D, no = N * D;
  float *qkv = rand_dt(nq, 1.5, dt), *r = rand_dt(no, 1.0, dt), *lse = zerof(N * H);
  float *cs = malloc(sizeof(float) * T * half), *sn = malloc(sizeof(float) * T * half);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < half; i++) {
      const double ang = t * pow(10000.0, -2.0 * i / hd);
      cs[t * half + i] = (float)cos(ang);
      sn[t * half + i] = (float)sin(ang);
    }
  double *qd = to_d(qkv, nq), *rd = to_d(r, no), *ref = zerod(no), *lref = zerod(N * H);
  double *gref = zerod(nq);
  att_ctx c = {B, T, H, hd, 1.0f / sqrtf((float)hd), len, cs, sn, rd};
  att_ref(&c, qd, ref, lref);
  fd_grad(att_loss, &c, qd, nq, gref);
  uint16_t *qh = pack(qkv, nq, dt), *rh = pack(r, no, dt), *oh = pack(r, no, dt);
  uint16_t *gh = pack(qkv, nq, dt);
  esmtb_attention_args a = {0};
  a.struct_size = sizeof a; a.dtype = (esmtb_dtype)dt; a.B = B; a.T = T; a.H = H; a.hd = hd;
  a.scale = 1.0f / sqrtf((float)hd); a.seq_len = len; a.rope_cos = cs; a.rope_sin = sn;
  a.qkv = qh; a.out = oh; a.lse = lse; a.dout = rh; a.dqkv = gh;
  char what[96];
  snprintf(what, sizeof what, "attention B%d T%d H%d hd%d", B, T, H, hd);
  assert_int_equal(ops->attention_forward(dev, &a, NULL), 0);
  report_half(oh, ref, no, what, dt);
  float *lv = zerof(N * H);
  double *lrv = zerod(N * H);
  size_t nl = 0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < len[b]; t++, nl++) {
        lv[nl] = lse[((size_t)b * H + h) * T + t];
        lrv[nl] = lref[((size_t)b * H + h) * T + t];
      }
  report_close(lv, lrv, nl, 1e-5, "attention lse (fp32)", dt);
  assert_int_equal(ops->attention_backward(dev, &a, NULL), 0);
  strncat(what, " dqkv", sizeof what - strlen(what) - 1);
  report_half(gh, gref, nq, what, dt);
  for (int b = 0; b < B; b++) /* padding: exactly 0 out and no gradient */
    for (int t = len[b]; t < T; t++) {
      for (int k = 0; k < D; k++) assert_int_equal(oh[((size_t)b * T + t) * D + k], 0);
      for (int k = 0; k < 3 * D; k++) assert_int_equal(gh[((size_t)b * T + t) * 3 * D + k], 0);
    }
  /* the same bits with one thread */
  uint16_t *oh1 = pack(r, no, dt), *gh1 = pack(qkv, nq, dt);
  a.out = oh1; a.dqkv = gh1;
  assert_int_equal(ops->attention_forward(dev1, &a, NULL), 0);
  assert_int_equal(ops->attention_backward(dev1, &a, NULL), 0);
  assert_memory_equal(oh1, oh, no * sizeof *oh);
  assert_memory_equal(gh1, gh, nq * sizeof *gh);
  free(qkv); free(r); free(lse); free(cs); free(sn); free(qd); free(rd); free(ref); free(lref);
  free(gref); free(qh); free(rh); free(oh); free(gh); free(lv); free(lrv); free(oh1); free(gh1);
}

static void test_attention_half(void **state) {
  (void)state;
  const int32_t l1[] = {9, 4, 1}, l2[] = {19, 18};
  for (int dt = ESMTB_F16; dt <= ESMTB_BF16; dt++) {
    attention_half_case(dt, 3, 9, 2, 16, l1);
    attention_half_case(dt, 2, 19, 2, 10, l2);
  }
}

static void test_xent_half(void **state) {
  (void)state;
  const int N = 6, V = 33;
  const int32_t lab[] = {4, -100, 32, 7, -1, 0};
  const size_t n = (size_t)N * V;
  for (int dt = ESMTB_F16; dt <= ESMTB_BF16; dt++) {
    float *z = randf(n, 4.0);
    for (int v = 0; v < V; v++) z[3 * V + v] += 1000.0f;
    round_dt(z, n, dt);
    double *zd = to_d(z, n), *gref = zerod(n);
    xe_ctx c = {N, V, lab, 1.0 / 4};
    double lref = xe_ref(&c, zd, gref) + 0.5;
    uint16_t *zh = pack(z, n, dt), *gh = pack(z, n, dt);
    float loss = 0.5f;
    esmtb_xent_args a = {sizeof a, (esmtb_dtype)dt, N, V, zh, lab, &loss, gh, 0.25f};
    assert_int_equal(ops->xent(dev, &a, NULL), 0);
    report_close(&loss, &lref, 1, 1e-5, "xent loss_sum (fp32)", dt);
    report_half(gh, gref, n, "xent dlogits", dt);
    for (int v = 0; v < V; v++) assert_true(gh[1 * V + v] == 0 && gh[4 * V + v] == 0);
    a.dlogits = zh; /* dlogits may alias logits */
    assert_int_equal(ops->xent(dev, &a, NULL), 0);
    assert_memory_equal(zh, gh, n * sizeof *gh);
    free(z); free(zd); free(gref); free(zh); free(gh);
  }
}

/* params_lowp in each dtype: the updated fp32 weights, rounded */
static void test_adamw_lowp(void **state) {
  (void)state;
  const size_t P = 1000;
  const esmtb_segment segs[] = {{0, 600, 0.01f}, {600, 400, 0.0f}};
  for (int dt = ESMTB_F32; dt <= ESMTB_BF16; dt++) {
    float *p = randf(P, 1.0), *g = randf(P, 0.1), *m = zerof(P), *v = zerof(P);
    void *low = calloc(P, 4);
    esmtb_adamw_args a = {0};
    a.struct_size = sizeof a; a.n_segments = 2; a.segments = segs; a.params = p; a.grads = g;
    a.m = m; a.v = v; a.lr = 1e-2f; a.beta1 = 0.9f; a.beta2 = 0.98f; a.eps = 1e-8f; a.step = 1;
    a.grad_scale = 1.0f; a.params_lowp = low; a.lowp_dtype = (esmtb_dtype)dt;
    assert_int_equal(ops->adamw(dev, &a, NULL), 0);
    for (size_t i = 0; i < P; i++) {
      if (dt == ESMTB_F32) assert_true(((float *)low)[i] == p[i]);
      else assert_int_equal(((uint16_t *)low)[i], f2h(p[i], dt));
    }
    free(p); free(g); free(m); free(v); free(low);
  }
}

/* Every pair of f32, f16, bf16: half -> half goes through fp32, exactly. */
static void test_convert_pairs(void **state) {
  (void)state;
  const size_t n = 1037;
  float *x = randf(n, 1000.0);
  for (int sd = ESMTB_F32; sd <= ESMTB_BF16; sd++)
    for (int dd = ESMTB_F32; dd <= ESMTB_BF16; dd++) {
      float *src = malloc(n * sizeof *src);
      memcpy(src, x, n * sizeof *src);
      if (sd != ESMTB_F32) round_dt(src, n, sd);
      void *in = sd == ESMTB_F32 ? (void *)src : (void *)pack(src, n, sd);
      void *out = calloc(n, 4);
      esmtb_convert_args c = {sizeof c, n, in, (esmtb_dtype)sd, out, (esmtb_dtype)dd};
      assert_int_equal(ops->convert(dev, &c, NULL), 0);
      for (size_t i = 0; i < n; i++) {
        if (dd == ESMTB_F32) assert_true(((float *)out)[i] == src[i]);
        else if (((uint16_t *)out)[i] != f2h(src[i], dd))
          fail_msg("convert %d -> %d of %.9g: 0x%04x", sd, dd, src[i], ((uint16_t *)out)[i]);
      }
      if (in != src) free(in);
      free(src); free(out);
    }
  free(x);
}

int main(void) {
  const char *isa = getenv("ESMT_CPU_ISA");
  if (isa) printf("kernel variant limited to %s\n", isa);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_half_caps),     cmocka_unit_test(test_gemm_half),
      cmocka_unit_test(test_elementwise_half), cmocka_unit_test(test_f16_overflow),
      cmocka_unit_test(test_embedding_half), cmocka_unit_test(test_layernorm_half),
      cmocka_unit_test(test_attention_half), cmocka_unit_test(test_xent_half),
      cmocka_unit_test(test_adamw_lowp),    cmocka_unit_test(test_convert_pairs),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
