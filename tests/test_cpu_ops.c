/* SPDX-License-Identifier: MIT */
/* Every CPU op against a naive float64 reference (cpu_ops_common.c).
 *  - Forward outputs: normalised error ||op - ref|| / ||ref|| <= 1e-5.
 *  - Backward ops: the op's gradient against central differences of the
 *    float64 reference, L = sum(r * out) for random r, along random
 *    directions and at sampled single elements (tolerance 1e-4 relative).
 *  - Argument errors return non-zero with a message naming the op.
 * F16/BF16 activations are test_cpu_ops_half.c. ctest also runs both with
 * ESMT_CPU_ISA=avx2 and =generic so that each per-ISA kernel variant is
 * checked. The whole model is compared with the float64 PyTorch reference
 * in test_model_reference.c. */
#include "test_util.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops_common.h"

/* ------------------------------------------------------------------ */
/* GEMM with bias / GELU epilogues; gelu_backward; bias_grad           */
/* ------------------------------------------------------------------ */

static void gemm_case(int ta, int tb, int m, int n, int k, float alpha, float beta, int bias,
                      int gelu) {
  const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
  const size_t asz = (size_t)(ta ? k : m) * lda, bsz = (size_t)(tb ? n : k) * ldb;
  const size_t csz = (size_t)m * ldc;
  float *A = randf(asz, 1.0), *Bm = randf(bsz, 1.0), *C = randf(csz, 1.0), *bv = randf(n, 1.0);
  float *pre = zerof(csz);
  double *ref = to_d(C, csz), *refpre = zerod(csz);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int q = 0; q < k; q++) {
        double av = ta ? A[(size_t)q * lda + i] : A[(size_t)i * lda + q];
        double bw = tb ? Bm[(size_t)j * ldb + q] : Bm[(size_t)q * ldb + j];
        s += av * bw;
      }
      double y = alpha * s + beta * ref[(size_t)i * ldc + j] + (bias ? bv[j] : 0.0);
      refpre[(size_t)i * ldc + j] = y;
      ref[(size_t)i * ldc + j] = gelu ? gelu_d(y) : y;
    }
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g;
  g.trans_a = ta; g.trans_b = tb; g.m = m; g.n = n; g.k = k; g.alpha = alpha; g.beta = beta;
  g.a = A; g.lda = lda; g.b = Bm; g.ldb = ldb; g.c = C; g.ldc = ldc;
  g.bias = bias ? bv : NULL; g.epilogue = gelu ? ESMTB_EPI_GELU : ESMTB_EPI_NONE;
  g.pre = gelu ? pre : NULL;
  assert_int_equal(ops->gemm(dev, &g, NULL), 0);
  /* only the m x n window is compared; the ld padding must be untouched */
  double *refwin = zerod((size_t)m * n), *prewin = zerod((size_t)m * n);
  float *cwin = zerof((size_t)m * n), *pwin = zerof((size_t)m * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < ldc; j++) {
      size_t o = (size_t)i * ldc + j;
      if (j >= n) {
        assert_true(C[o] == (float)ref[o]); /* unchanged padding */
        continue;
      }
      refwin[(size_t)i * n + j] = ref[o];
      prewin[(size_t)i * n + j] = refpre[o];
      cwin[(size_t)i * n + j] = C[o];
      pwin[(size_t)i * n + j] = pre[o];
    }
  char what[96];
  snprintf(what, sizeof what, "gemm ta=%d tb=%d %dx%dx%d beta=%g bias=%d gelu=%d", ta, tb, m, n, k,
           beta, bias, gelu);
  expect_close(cwin, refwin, (size_t)m * n, 1e-5, what);
  if (gelu) expect_close(pwin, prewin, (size_t)m * n, 1e-5, what);
  free(A); free(Bm); free(C); free(bv); free(pre); free(ref); free(refpre);
  free(refwin); free(prewin); free(cwin); free(pwin);
}

static void test_gemm(void **state) {
  (void)state;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      gemm_case(ta, tb, 37, 29, 23, 1.0f, 0.0f, 0, 0);
      gemm_case(ta, tb, 37, 29, 23, 0.75f, 0.0f, 1, 0);     /* bias */
      gemm_case(ta, tb, 37, 29, 23, 1.0f, 0.0f, 1, 1);      /* bias + GELU, pre saved */
      gemm_case(ta, tb, 21, 40, 17, 1.0f, 1.0f, 0, 0);      /* beta = 1 accumulates */
      gemm_case(ta, tb, 21, 40, 17, -0.5f, 0.25f, 0, 1);    /* beta with GELU */
    }
  gemm_case(0, 1, 130, 97, 64, 1.0f, 0.0f, 1, 1); /* large enough to thread */
  gemm_case(1, 0, 70, 33, 150, 1.0f, 1.0f, 0, 0);
}

typedef struct gelu_ctx { size_t n; const double *r; } gelu_ctx;
static double gelu_loss(void *c, const double *x) {
  gelu_ctx *k = c;
  double s = 0;
  for (size_t i = 0; i < k->n; i++) s += k->r[i] * gelu_d(x[i]);
  return s;
}
static void test_gelu_backward(void **state) {
  (void)state;
  const size_t n = 1000;
  float *x = randf(n, 5.0), *r = randf(n, 1.0), *dx = zerof(n);
  x[0] = 0.0f; x[1] = -10.0f; x[2] = 10.0f; x[3] = 1e-4f;
  double *xd = to_d(x, n), *rd = to_d(r, n), *ref = zerod(n);
  for (size_t i = 0; i < n; i++) { /* gelu'(x) = Phi(x) + x phi(x) */
    double xi = xd[i];
    const double pdf = exp(-0.5 * xi * xi) / sqrt(2 * 3.14159265358979323846);
    ref[i] = rd[i] * (0.5 * (1 + erf(xi / sqrt(2.0))) + xi * pdf);
  }
  esmtb_gelu_backward_args a = {sizeof a, ESMTB_F32, n, x, r, dx};
  assert_int_equal(ops->gelu_backward(dev, &a, NULL), 0);
  expect_close(dx, ref, n, 1e-5, "gelu_backward vs analytic");
  gelu_ctx c = {n, rd};
  check_grad(gelu_loss, &c, xd, n, dx, NULL, 20, 1e-4, "gelu_backward");
  /* dpre may alias dout */
  float *alias = malloc(n * sizeof *alias);
  memcpy(alias, r, n * sizeof *alias);
  esmtb_gelu_backward_args b = {sizeof b, ESMTB_F32, n, x, alias, alias};
  assert_int_equal(ops->gelu_backward(dev, &b, NULL), 0);
  assert_memory_equal(alias, dx, n * sizeof *dx);
  free(x); free(r); free(dx); free(xd); free(rd); free(ref); free(alias);
}

typedef struct bias_ctx { int rows, cols; const double *x, *r; } bias_ctx;
static double bias_loss(void *c, const double *bias) { /* y = x + bias per row */
  bias_ctx *k = c;
  double s = 0;
  for (int i = 0; i < k->rows; i++)
    for (int j = 0; j < k->cols; j++)
      s += k->r[(size_t)i * k->cols + j] * (k->x[(size_t)i * k->cols + j] + bias[j]);
  return s;
}
static void test_bias_grad(void **state) {
  (void)state;
  const int rows = 301, cols = 77;
  float *dy = randf((size_t)rows * cols, 1.0), *db = randf(cols, 1.0), *b = randf(cols, 1.0);
  double *ref = to_d(db, cols), *xd = zerod((size_t)rows * cols);
  double *rd = to_d(dy, (size_t)rows * cols);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) ref[j] += dy[(size_t)i * cols + j];
  float *db0 = malloc(cols * sizeof *db0);
  memcpy(db0, db, cols * sizeof *db0);
  esmtb_bias_grad_args a = {sizeof a, ESMTB_F32, rows, cols, dy, db};
  assert_int_equal(ops->bias_grad(dev, &a, NULL), 0);
  expect_close(db, ref, cols, 1e-6, "bias_grad (accumulated)");
  for (int j = 0; j < cols; j++) db[j] -= db0[j];
  bias_ctx c = {rows, cols, xd, rd};
  double *bd = to_d(b, cols);
  check_grad(bias_loss, &c, bd, cols, db, NULL, 10, 1e-4, "bias_grad");
  free(dy); free(db); free(b); free(ref); free(xd); free(rd); free(db0); free(bd);
}

/* ------------------------------------------------------------------ */
/* add, scale, sumsq, convert                                          */
/* ------------------------------------------------------------------ */

static void test_add_scale(void **state) {
  (void)state;
  const size_t n = 10007;
  float *a = randf(n, 1.0), *b = randf(n, 1.0), *y = zerof(n);
  double *ref = zerod(n);
  for (size_t i = 0; i < n; i++) ref[i] = (double)a[i] + b[i];
  esmtb_add_args ad = {sizeof ad, ESMTB_F32, n, a, b, y};
  assert_int_equal(ops->add(dev, &ad, NULL), 0);
  expect_close(y, ref, n, 1e-7, "add");
  ad.y = a; /* y may alias a */
  assert_int_equal(ops->add(dev, &ad, NULL), 0);
  assert_memory_equal(a, y, n * sizeof *y);
  esmtb_scale_args sc = {sizeof sc, n, y, -0.37f};
  for (size_t i = 0; i < n; i++) ref[i] = (double)y[i] * -0.37f;
  assert_int_equal(ops->scale(dev, &sc, NULL), 0);
  expect_close(y, ref, n, 1e-7, "scale");
  free(a); free(b); free(y); free(ref);
}

static void test_sumsq(void **state) {
  (void)state;
  const size_t n = 1000003;
  float *x = randf(n, 3.0);
  double ref = 1.5;
  for (size_t i = 0; i < n; i++) ref += (double)x[i] * x[i];
  float s1 = 1.5f, s2 = 1.5f, s3 = 1.5f;
  esmtb_sumsq_args a = {sizeof a, n, x, &s1};
  assert_int_equal(ops->sumsq(dev, &a, NULL), 0);
  a.out = &s2;
  assert_int_equal(ops->sumsq(dev, &a, NULL), 0);
  assert_memory_equal(&s1, &s2, sizeof s1); /* same bits every time */
  double refd = ref;
  expect_close(&s1, &refd, 1, 1e-6, "sumsq");
  a.out = &s3;
  assert_int_equal(ops->sumsq(dev1, &a, NULL), 0);
  expect_close(&s3, &refd, 1, 1e-6, "sumsq, 1 thread");
  a.n = 0; /* empty: adds nothing */
  const float before = s3;
  assert_int_equal(ops->sumsq(dev, &a, NULL), 0);
  assert_true(s3 == before);
  free(x);
}


/* Long arrays through the vector paths (and their tails) against the
 * reference roundings. */
static void convert_bulk(void) {
  const size_t n = 1037;
  float *src = malloc(n * sizeof *src), *back = malloc(n * sizeof *back);
  uint16_t *h = malloc(n * sizeof *h);
  for (size_t i = 0; i < n; i++) { /* magnitudes from fp16 subnormals to beyond its range */
    double e = urand() * 20.0;
    src[i] = (float)(urand() * pow(2.0, e));
  }
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65519.0f, 65520.0f,
                           1.00048828125f, 1.00146484375f, 1.00390625f, 1.01171875f, 3.0e38f,
                           3.4028235e38f, 1e-8f, -5.9604645e-8f, 6.0e-5f, 1e-40f};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) src[i * 53 % n] = special[i];
  for (int dt = ESMTB_F16; dt <= ESMTB_BF16; dt++) {
    const int bf = dt == ESMTB_BF16;
    esmtb_convert_args c = {sizeof c, n, src, ESMTB_F32, h, (esmtb_dtype)dt};
    assert_int_equal(ops->convert(dev, &c, NULL), 0);
    for (size_t i = 0; i < n; i++) {
      if (isnan(src[i])) {
        assert_true(is_nan16(h[i], bf));
        continue;
      }
      uint16_t want = bf ? ref_bf16(src[i]) : ref_f16(src[i]);
      if (h[i] != want)
        fail_msg("f32 -> %s of %.9g: 0x%04x, want 0x%04x", bf ? "bf16" : "f16", src[i], h[i],
                 want);
    }
    esmtb_convert_args r = {sizeof r, n, h, (esmtb_dtype)dt, back, ESMTB_F32};
    assert_int_equal(ops->convert(dev, &r, NULL), 0);
    for (size_t i = 0; i < n; i++) { /* widening is exact: converting back gives the same bits */
      if (isnan(src[i])) {
        assert_true(isnan(back[i]));
        continue;
      }
      uint16_t again = bf ? ref_bf16(back[i]) : ref_f16(back[i]);
      assert_int_equal(again, h[i]);
    }
  }
  free(src); free(back); free(h);
}

static void test_convert(void **state) {
  (void)state;
  const float vals[] = {1.0f, -2.5f, 65504.0f, 65520.0f, 1e-8f, 5.9604645e-8f, 0.0f, -0.0f,
                        INFINITY, 1.00048828125f, 1.00146484375f, 3.0e38f, 1.00390625f,
                        1.01171875f, 0.333333343f};
  const size_t n = sizeof vals / sizeof vals[0];
  uint16_t h[sizeof vals / sizeof vals[0]], bf[sizeof vals / sizeof vals[0]];
  float back[sizeof vals / sizeof vals[0]];
  esmtb_convert_args c = {sizeof c, n, vals, ESMTB_F32, h, ESMTB_F16};
  assert_int_equal(ops->convert(dev, &c, NULL), 0);
  /* fp16: exact, max finite, overflow to inf, subnormals, signed zero, ties to even */
  const uint16_t want_h[] = {0x3c00, 0xc100, 0x7bff, 0x7c00, 0x0000, 0x0001, 0x0000, 0x8000,
                             0x7c00, 0x3c00, 0x3c02, 0x7c00, 0x3c04, 0x3c0c, 0x3555};
  for (size_t i = 0; i < n; i++)
    if (bits16(h, i) != want_h[i])
      fail_msg("f32->f16 of %g: 0x%04x, want 0x%04x", vals[i], bits16(h, i), want_h[i]);
  c.src = h; c.src_dtype = ESMTB_F16; c.dst = back; c.dst_dtype = ESMTB_F32;
  assert_int_equal(ops->convert(dev, &c, NULL), 0);
  assert_true(back[0] == 1.0f && back[1] == -2.5f && back[2] == 65504.0f && isinf(back[3]));
  assert_true(back[5] == 5.9604645e-8f && back[10] == 1.001953125f);
  c.src = vals; c.src_dtype = ESMTB_F32; c.dst = bf; c.dst_dtype = ESMTB_BF16;
  assert_int_equal(ops->convert(dev, &c, NULL), 0);
  /* bf16: round to nearest even (1.00390625 is a tie, 1.01171875 rounds up) */
  assert_int_equal(bits16(bf, 0), 0x3f80);
  assert_int_equal(bits16(bf, 12), 0x3f80);
  assert_int_equal(bits16(bf, 13), 0x3f82);
  assert_int_equal(bits16(bf, 8), 0x7f80);
  c.src = bf; c.src_dtype = ESMTB_BF16; c.dst = back; c.dst_dtype = ESMTB_F32;
  assert_int_equal(ops->convert(dev, &c, NULL), 0);
  for (size_t i = 0; i < n; i++) { /* bf16 -> f32 is exact: within 2^-8 relative */
    if (isinf(vals[i])) assert_true(isinf(back[i]));
    else assert_true(fabsf(back[i] - vals[i]) <= fabsf(vals[i]) * (1.0f / 256));
  }
  float nanv = NAN, nanout = 0;
  uint16_t nh = 0;
  esmtb_convert_args cn = {sizeof cn, 1, &nanv, ESMTB_F32, &nh, ESMTB_BF16};
  assert_int_equal(ops->convert(dev, &cn, NULL), 0);
  cn.src = &nh; cn.src_dtype = ESMTB_BF16; cn.dst = &nanout; cn.dst_dtype = ESMTB_F32;
  assert_int_equal(ops->convert(dev, &cn, NULL), 0);
  assert_true(isnan(nanout));
  convert_bulk();
  /* f32 -> f32 copies a large buffer exactly */
  const size_t big = 100001;
  float *src = randf(big, 10.0), *dst = zerof(big);
  esmtb_convert_args cc = {sizeof cc, big, src, ESMTB_F32, dst, ESMTB_F32};
  assert_int_equal(ops->convert(dev, &cc, NULL), 0);
  assert_memory_equal(src, dst, big * sizeof *src);
  free(src); free(dst);
}

/* ------------------------------------------------------------------ */
/* embedding with token dropout                                        */
/* ------------------------------------------------------------------ */

static void test_embedding(void **state) {
  (void)state;
  const int B = 4, T = 9, d = 40;
  const int32_t tok[] = {0, 5,  32, 7, 32, 9, 2, 1, 1,   /* two masks, pads */
                         0, 8,  9,  2, 1,  1, 1, 1, 1,   /* no mask */
                         0, 4,  5,  6, 7,  8, 9, 10, 2,  /* full length */
                         0, 32, 2,  1, 1,  1, 1, 1, 1};  /* 1 mask of 3 */
  float *E = randf((size_t)VOCAB * d, 0.5), *out = randf((size_t)B * T * d, 1.0);
  float *scale = zerof(B), *r = randf((size_t)B * T * d, 1.0), *dE = randf((size_t)VOCAB * d, 1.0);
  double *Ed = to_d(E, (size_t)VOCAB * d), *rd = to_d(r, (size_t)B * T * d);
  double *ref = zerod((size_t)B * T * d), *sref = zerod(B);
  emb_ctx c = {B, T, d, tok, rd};
  emb_ref(&c, Ed, ref, sref);
  esmtb_embed_args a = {0};
  a.struct_size = sizeof a; a.B = B; a.T = T; a.d = d; a.tokens = tok; a.E = E; a.out = out;
  a.row_scale = scale; a.mask_id = MASK; a.pad_id = PAD; a.mask_ratio_train = 0.12f;
  assert_int_equal(ops->embed_forward(dev, &a, NULL), 0);
  expect_close(out, ref, (size_t)B * T * d, 1e-6, "embed_forward");
  expect_close(scale, sref, B, 1e-7, "embed row_scale");
  assert_true(fabs(scale[0] - 0.88 / (1 - 2.0 / 7)) < 1e-6 && fabs(scale[1] - 0.88) < 1e-6);
  for (int i = 0; i < B * T; i++) /* pad and mask rows are exactly 0 */
    if (tok[i] == PAD || tok[i] == MASK)
      for (int k = 0; k < d; k++) assert_true(out[(size_t)i * d + k] == 0.0f);
  float *dE0 = malloc((size_t)VOCAB * d * sizeof *dE0);
  memcpy(dE0, dE, (size_t)VOCAB * d * sizeof *dE0);
  a.dout = r; a.dE = dE;
  assert_int_equal(ops->embed_backward(dev, &a, NULL), 0);
  for (int i = 0; i < VOCAB * d; i++) dE[i] -= dE0[i]; /* it accumulates */
  for (int k = 0; k < d; k++) /* never into the pad and mask rows */
    assert_true(dE[PAD * d + k] == 0.0f && dE[MASK * d + k] == 0.0f);
  size_t pick[] = {5 * d + 3, 9 * d, 2 * d + 7, 0, PAD * d + 1, MASK * d + 2, 30 * d};
  check_grad(emb_loss, &c, Ed, (size_t)VOCAB * d, dE, pick, 7, 1e-4, "embed_backward");
  free(E); free(out); free(scale); free(r); free(dE); free(Ed); free(rd); free(ref); free(sref);
  free(dE0);
}

/* ------------------------------------------------------------------ */
/* LayerNorm                                                           */
/* ------------------------------------------------------------------ */

static void layernorm_case(int N, int d) {
  const size_t n = (size_t)N * d;
  float *x = randf(n, 2.0), *w = randf(d, 1.0), *b = randf(d, 0.5), *r = randf(n, 1.0);
  for (size_t i = 0; i < n; i++) x[i] += 3.0f; /* an offset: variance must not cancel */
  float *out = zerof(n), *mean = zerof(N), *rstd = zerof(N), *dx = randf(n, 1.0);
  float *dw = randf(d, 1.0), *db = randf(d, 1.0);
  double *xd = to_d(x, n), *wd = to_d(w, d), *bd = to_d(b, d), *rd = to_d(r, n);
  double *ref = zerod(n), *mref = zerod(N), *sref = zerod(N);
  ln_ref(N, d, xd, wd, bd, ref, mref, sref);
  esmtb_layernorm_args a = {0};
  a.struct_size = sizeof a; a.N = N; a.d = d; a.eps = 1e-5f; a.x = x; a.w = w; a.b = b;
  a.out = out; a.mean = mean; a.rstd = rstd;
  assert_int_equal(ops->layernorm_forward(dev, &a, NULL), 0);
  expect_close(out, ref, n, 1e-5, "layernorm_forward out");
  expect_close(mean, mref, N, 1e-6, "layernorm_forward mean");
  expect_close(rstd, sref, N, 1e-6, "layernorm_forward rstd");
  /* backward, dx overwritten; dw and db accumulate */
  float *dw0 = malloc(d * sizeof *dw0), *db0 = malloc(d * sizeof *db0);
  memcpy(dw0, dw, d * sizeof *dw0);
  memcpy(db0, db, d * sizeof *db0);
  a.dout = r; a.dx = dx; a.dw = dw; a.db = db; a.accumulate_dx = 0;
  assert_int_equal(ops->layernorm_backward(dev, &a, NULL), 0);
  for (int c = 0; c < d; c++) {
    dw[c] -= dw0[c];
    db[c] -= db0[c];
  }
  ln_ctx c = {N, d, 0, xd, wd, bd, rd};
  check_grad(ln_loss, &c, xd, n, dx, NULL, 12, 1e-4, "layernorm dx");
  c.wrt = 1;
  check_grad(ln_loss, &c, wd, d, dw, NULL, 6, 1e-4, "layernorm dw");
  c.wrt = 2;
  check_grad(ln_loss, &c, bd, d, db, NULL, 6, 1e-4, "layernorm db");
  /* accumulate_dx adds to what is there */
  float *dx2 = randf(n, 1.0);
  double *want = to_d(dx2, n);
  for (size_t i = 0; i < n; i++) want[i] += dx[i];
  a.dx = dx2; a.accumulate_dx = 1;
  assert_int_equal(ops->layernorm_backward(dev, &a, NULL), 0);
  expect_close(dx2, want, n, 1e-6, "layernorm accumulate_dx");
  free(x); free(w); free(b); free(r); free(out); free(mean); free(rstd); free(dx); free(dw);
  free(db); free(xd); free(wd); free(bd); free(rd); free(ref); free(mref); free(sref); free(dw0);
  free(db0); free(dx2); free(want);
}
static void test_layernorm(void **state) {
  (void)state;
  layernorm_case(7, 48);
  layernorm_case(130, 320); /* threaded, ESM-2 width */
  layernorm_case(3, 5);
}

/* ------------------------------------------------------------------ */
/* attention                                                           */
/* ------------------------------------------------------------------ */


static void attention_case(int B, int T, int H, int hd, const int32_t *len) {
  const int half = hd / 2, D = H * hd;
  const size_t N = (size_t)B * T, nq = N * 3 * D, no = N * D;
  float *qkv = randf(nq, 1.5), *r = randf(no, 1.0);
  float *out = randf(no, 1.0), *lse = randf(N * H, 1.0), *dqkv = randf(nq, 1.0);
  float *cs = malloc(sizeof(float) * T * half), *sn = malloc(sizeof(float) * T * half);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < half; i++) {
      double ang = t * pow(10000.0, -2.0 * i / hd);
      cs[t * half + i] = (float)cos(ang);
      sn[t * half + i] = (float)sin(ang);
    }
  double *qd = to_d(qkv, nq), *rd = to_d(r, no), *ref = zerod(no), *lref = zerod(N * H);
  att_ctx c = {B, T, H, hd, 1.0f / sqrtf((float)hd), len, cs, sn, rd};
  att_ref(&c, qd, ref, lref);
  esmtb_attention_args a = {0};
  a.struct_size = sizeof a; a.dtype = ESMTB_F32; a.B = B; a.T = T; a.H = H; a.hd = hd;
  a.scale = 1.0f / sqrtf((float)hd); a.seq_len = len; a.rope_cos = cs; a.rope_sin = sn;
  a.qkv = qkv; a.out = out; a.lse = lse; a.dout = r; a.dqkv = dqkv;
  char what[96];
  snprintf(what, sizeof what, "attention B=%d T=%d H=%d hd=%d", B, T, H, hd);
  assert_int_equal(ops->attention_forward(dev, &a, NULL), 0);
  expect_close(out, ref, no, 1e-5, what);
  /* lse on valid rows */
  float *lv = zerof(N * H);
  double *lrv = zerod(N * H);
  size_t nl = 0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < len[b]; t++, nl++) {
        lv[nl] = lse[((size_t)b * H + h) * T + t];
        lrv[nl] = lref[((size_t)b * H + h) * T + t];
      }
  expect_close(lv, lrv, nl, 1e-5, "attention lse");
  for (int b = 0; b < B; b++) /* padded queries: exactly 0 */
    for (int t = len[b]; t < T; t++)
      for (int k = 0; k < D; k++) assert_true(out[((size_t)b * T + t) * D + k] == 0.0f);
  assert_int_equal(ops->attention_backward(dev, &a, NULL), 0);
  for (int b = 0; b < B; b++) /* padded rows get no gradient (q, k and v) */
    for (int t = len[b]; t < T; t++)
      for (int k = 0; k < 3 * D; k++) assert_true(dqkv[((size_t)b * T + t) * 3 * D + k] == 0.0f);
  /* sampled elements: q, k and v of a few valid tokens, and a padded one */
  size_t pick[8];
  int np = 0;
  for (int b = 0; b < B && np < 6; b++) {
    size_t row = ((size_t)b * T + (size_t)(len[b] - 1)) * 3 * D;
    pick[np++] = row + (size_t)(b % H) * hd + 1;                 /* q */
    pick[np++] = row + D + (size_t)((b + 1) % H) * hd + half;    /* k */
  }
  pick[np++] = (size_t)(T / 2) * 3 * D + 2 * D + 3 % hd;          /* v of row 0 */
  for (int b = 0; b < B; b++)
    if (len[b] < T) {
      pick[np++] = ((size_t)b * T + T - 1) * 3 * D + D; /* a padded key */
      break;
    }
  strncat(what, " backward", sizeof what - strlen(what) - 1);
  check_grad(att_loss, &c, qd, nq, dqkv, pick, np, 1e-4, what);
  /* the same bits with one thread (work splits by (row, head) only) */
  float *out1 = zerof(no), *dqkv1 = zerof(nq), *lse1 = zerof(N * H);
  a.out = out1; a.lse = lse1; a.dqkv = dqkv1;
  assert_int_equal(ops->attention_forward(dev1, &a, NULL), 0);
  assert_int_equal(ops->attention_backward(dev1, &a, NULL), 0);
  assert_memory_equal(out1, out, no * sizeof *out);
  assert_memory_equal(dqkv1, dqkv, nq * sizeof *dqkv);
  free(qkv); free(r); free(out); free(lse); free(dqkv); free(cs); free(sn); free(qd); free(rd);
  free(ref); free(lref); free(lv); free(lrv); free(out1); free(dqkv1); free(lse1);
}

static void test_attention(void **state) {
  (void)state;
  const int32_t l1[] = {9, 4, 1};
  attention_case(3, 9, 2, 16, l1);      /* seq_len T, partial and 1 */
  const int32_t l2[] = {37, 20};
  attention_case(2, 37, 3, 24, l2);     /* hd 24: not a multiple of the vector width */
  const int32_t l3[] = {70, 33};
  attention_case(2, 70, 1, 64, l3);     /* several key tiles */
  const int32_t l4[] = {1};
  attention_case(1, 1, 2, 16, l4);      /* a single token */
  const int32_t l5[] = {19, 18};
  attention_case(2, 19, 2, 10, l5);     /* an unusual even hd */
  const int32_t l6[] = {40};
  attention_case(1, 40, 1, 128, l6);
}

/* ------------------------------------------------------------------ */
/* cross-entropy                                                       */
/* ------------------------------------------------------------------ */

static void test_xent(void **state) {
  (void)state;
  const int N = 6, V = 33;
  const int32_t lab[] = {4, -100, 32, 7, -1, 0};
  float *z = randf((size_t)N * V, 4.0), *dz = zerof((size_t)N * V);
  for (int v = 0; v < V; v++) z[3 * V + v] += 1000.0f; /* stable for large logits */
  double *zd = to_d(z, (size_t)N * V), *gref = zerod((size_t)N * V);
  xe_ctx c = {N, V, lab, 1.0 / 4};
  double lref = xe_ref(&c, zd, gref) + 0.5;
  float loss = 0.5f; /* loss_sum accumulates */
  esmtb_xent_args a = {sizeof a, ESMTB_F32, N, V, z, lab, &loss, dz, 0.25f};
  assert_int_equal(ops->xent(dev, &a, NULL), 0);
  expect_close(&loss, &lref, 1, 1e-6, "xent loss");
  expect_close(dz, gref, (size_t)N * V, 1e-5, "xent dlogits");
  for (int v = 0; v < V; v++) /* unlabelled rows: zero gradient */
    assert_true(dz[1 * V + v] == 0.0f && dz[4 * V + v] == 0.0f);
  check_grad(xe_loss, &c, zd, (size_t)N * V, dz, NULL, 10, 1e-4, "xent");
  /* forward only, and dlogits aliasing logits */
  float l2 = 0;
  esmtb_xent_args f = {sizeof f, ESMTB_F32, N, V, z, lab, &l2, NULL, 1.0f};
  assert_int_equal(ops->xent(dev, &f, NULL), 0);
  assert_true(fabs(l2 - (lref - 0.5)) <= 1e-6 * lref);
  float *alias = malloc((size_t)N * V * sizeof *alias);
  memcpy(alias, z, (size_t)N * V * sizeof *alias);
  esmtb_xent_args al = {sizeof al, ESMTB_F32, N, V, alias, lab, &l2, alias, 0.25f};
  assert_int_equal(ops->xent(dev, &al, NULL), 0);
  assert_memory_equal(alias, dz, (size_t)N * V * sizeof *dz);
  /* no labels at all: adds 0 */
  const int32_t none[] = {-100, -100, -100, -100, -100, -100};
  float l3 = 2.0f;
  esmtb_xent_args nl = {sizeof nl, ESMTB_F32, N, V, z, none, &l3, dz, 1.0f};
  assert_int_equal(ops->xent(dev, &nl, NULL), 0);
  assert_true(l3 == 2.0f);
  for (int i = 0; i < N * V; i++) assert_true(dz[i] == 0.0f);
  free(z); free(dz); free(zd); free(gref); free(alias);
}

/* ------------------------------------------------------------------ */
/* AdamW                                                               */
/* ------------------------------------------------------------------ */

static void test_adamw(void **state) {
  (void)state;
  const size_t P = 10000;
  float *p = randf(P, 1.0), *g = randf(P, 0.1), *m = zerof(P), *v = zerof(P), *low = zerof(P);
  double *pd = to_d(p, P), *md = zerod(P), *vd = zerod(P);
  const esmtb_segment segs[] = {{0, 6000, 0.01f}, {6000, 3000, 0.0f}, {9000, 1000, 0.1f}};
  const double b1 = 0.9f, b2 = 0.98f, eps = 1e-8f, lr = 1e-2f, gs = 0.5f;
  for (int step = 1; step <= 3; step++) {
    esmtb_adamw_args a = {0};
    a.struct_size = sizeof a; a.n_segments = 3; a.segments = segs; a.params = p; a.grads = g;
    a.m = m; a.v = v; a.lr = (float)lr; a.beta1 = (float)b1; a.beta2 = (float)b2;
    a.eps = (float)eps; a.step = step; a.grad_scale = (float)gs;
    a.params_lowp = low; a.lowp_dtype = ESMTB_F32;
    assert_int_equal(ops->adamw(dev, &a, NULL), 0);
    for (size_t i = 0; i < P; i++) {
      double gi = g[i] * gs, wd = i < 6000 ? (double)0.01f : i < 9000 ? 0.0 : (double)0.1f;
      md[i] = b1 * md[i] + (1 - b1) * gi;
      vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
      double mh = md[i] / (1 - pow(b1, step)), vh = vd[i] / (1 - pow(b2, step));
      pd[i] -= lr * (wd * pd[i] + mh / (sqrt(vh) + eps));
    }
  }
  expect_close(p, pd, P, 1e-6, "adamw params");
  expect_close(m, md, P, 1e-6, "adamw m");
  expect_close(v, vd, P, 1e-5, "adamw v");
  assert_memory_equal(low, p, P * sizeof *p); /* the F32 copy */
  free(p); free(g); free(m); free(v); free(low); free(pd); free(md); free(vd);
}

/* Lion against the float64 formula (Chen et al. 2023, Algorithm 2 with
 * decoupled decay); a zero gradient on a zero moment updates by sign(0) = 0. */
static void test_lion(void **state) {
  (void)state;
  const size_t P = 10000;
  float *p = randf(P, 1.0), *g = randf(P, 0.1), *m = zerof(P), *low = zerof(P);
  for (size_t i = 0; i < P; i += 97) g[i] = 0.0f; /* c = 0 at step 1: no sign step */
  double *pd = to_d(p, P), *md = zerod(P);
  const esmtb_segment segs[] = {{0, 6000, 0.1f}, {6000, 3000, 0.0f}, {9000, 1000, 0.3f}};
  const double b1 = 0.9f, b2 = 0.99f, lr = 1e-3f, gs = 0.5f;
  for (int step = 1; step <= 3; step++) {
    esmtb_lion_args a = {0};
    a.struct_size = sizeof a; a.n_segments = 3; a.segments = segs; a.params = p; a.grads = g;
    a.m = m; a.lr = (float)lr; a.beta1 = (float)b1; a.beta2 = (float)b2;
    a.grad_scale = (float)gs; a.params_lowp = low; a.lowp_dtype = ESMTB_F32;
    assert_non_null(ops->lion);
    assert_int_equal(ops->lion(dev, &a, NULL), 0);
    for (size_t i = 0; i < P; i++) {
      double gi = g[i] * gs, wd = i < 6000 ? (double)0.1f : i < 9000 ? 0.0 : (double)0.3f;
      double c = b1 * md[i] + (1 - b1) * gi, u = (c > 0) - (c < 0);
      pd[i] -= lr * (wd * pd[i] + u);
      md[i] = b2 * md[i] + (1 - b2) * gi;
    }
    if (step == 1) assert_float_equal(p[97], (float)pd[97], 1e-6); /* 0 grad, 0.1 decay only */
  }
  expect_close(p, pd, P, 1e-6, "lion params");
  expect_close(m, md, P, 1e-6, "lion m");
  assert_memory_equal(low, p, P * sizeof *p); /* the F32 copy */
  free(p); free(g); free(m); free(low); free(pd); free(md);
}

/* ------------------------------------------------------------------ */
/* argument errors                                                     */
/* ------------------------------------------------------------------ */

#define EXPECT_FAIL(call, status, word)                                        \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (status) assert_int_equal(rc_, status);                                 \
    else assert_int_not_equal(rc_, 0);                                         \
    if (!strstr(test_backend_error(), word))                                   \
      fail_msg("%s: message '%s' lacks '%s'", #call, test_backend_error(), word); \
  } while (0)

static void test_errors(void **state) {
  (void)state;
  float x[64] = {0};
  int32_t tok[4] = {0, 4, 2, 1}, len[1] = {2};
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g; g.dtype = ESMTB_I32; g.m = g.n = g.k = 1; g.alpha = 1;
  g.a = g.b = x; g.c = x; g.lda = g.ldb = g.ldc = 1;
  EXPECT_FAIL(ops->gemm(dev, &g, NULL), 8, "bf16");
  g.dtype = ESMTB_BF16; g.c_f32 = 1; g.bias = x; /* fp32 C: no bias, no epilogue */
  EXPECT_FAIL(ops->gemm(dev, &g, NULL), 0, "c_f32");
  g.bias = NULL; g.epilogue = ESMTB_EPI_GELU;
  EXPECT_FAIL(ops->gemm(dev, &g, NULL), 0, "c_f32");
  g.epilogue = ESMTB_EPI_NONE; g.c_f32 = 0;
  g.dtype = ESMTB_F32; g.a = NULL;
  EXPECT_FAIL(ops->gemm(dev, &g, NULL), 0, "gemm");
  g.a = x; g.m = 0;
  EXPECT_FAIL(ops->gemm(dev, &g, NULL), 0, "positive");
  g.m = 1; g.bias = x; g.beta = 1;
  EXPECT_FAIL(ops->gemm(dev, &g, NULL), 0, "bias");
  g.bias = NULL; g.m = 2; g.k = 3; g.lda = 2; /* row-major A [2, 3] needs lda >= 3 */
  EXPECT_FAIL(ops->gemm(dev, &g, NULL), 0, "leading");

  esmtb_embed_args e = {0};
  e.struct_size = sizeof e; e.dtype = ESMTB_U8; e.B = 1; e.T = 4; e.d = 2; e.tokens = tok;
  e.E = x; e.out = x; e.row_scale = x; e.mask_id = 32; e.pad_id = 1; e.dout = x; e.dE = x;
  EXPECT_FAIL(ops->embed_forward(dev, &e, NULL), 8, "embed_forward supports dtypes");
  EXPECT_FAIL(ops->embed_backward(dev, &e, NULL), 8, "embed_backward supports dtypes");
  e.dtype = ESMTB_F32; tok[1] = -4;
  EXPECT_FAIL(ops->embed_forward(dev, &e, NULL), 0, "is -4");
  EXPECT_FAIL(ops->embed_backward(dev, &e, NULL), 0, "is -4");
  tok[1] = 4; e.tokens = NULL;
  EXPECT_FAIL(ops->embed_forward(dev, &e, NULL), 0, "embed_forward");
  EXPECT_FAIL(ops->embed_backward(dev, &e, NULL), 0, "embed_backward");

  esmtb_layernorm_args l = {0};
  l.struct_size = sizeof l; l.dtype = ESMTB_I32; l.N = 1; l.d = 4; l.eps = 1e-5f; l.x = x;
  l.w = x; l.b = x; l.out = x; l.mean = x; l.rstd = x; l.dout = x; l.dx = x; l.dw = x; l.db = x;
  EXPECT_FAIL(ops->layernorm_forward(dev, &l, NULL), 8, "layernorm_forward supports");
  EXPECT_FAIL(ops->layernorm_backward(dev, &l, NULL), 8, "layernorm_backward supports");
  l.dtype = ESMTB_F32; l.w = NULL;
  EXPECT_FAIL(ops->layernorm_forward(dev, &l, NULL), 0, "layernorm_forward");
  EXPECT_FAIL(ops->layernorm_backward(dev, &l, NULL), 0, "layernorm_backward");
  EXPECT_FAIL(ops->layernorm_forward(dev, NULL, NULL), 0, "layernorm_forward");

  esmtb_add_args ad = {sizeof ad, ESMTB_I32, 4, x, x, x};
  EXPECT_FAIL(ops->add(dev, &ad, NULL), 8, "add supports");
  ad.dtype = ESMTB_F32; ad.b = NULL;
  EXPECT_FAIL(ops->add(dev, &ad, NULL), 0, "add");
  esmtb_gelu_backward_args gb = {sizeof gb, ESMTB_I32, 4, x, x, x};
  EXPECT_FAIL(ops->gelu_backward(dev, &gb, NULL), 8, "gelu_backward supports");
  gb.dtype = ESMTB_F32; gb.pre = NULL;
  EXPECT_FAIL(ops->gelu_backward(dev, &gb, NULL), 0, "gelu_backward");
  esmtb_bias_grad_args bg = {sizeof bg, ESMTB_I32, 2, 2, x, x};
  EXPECT_FAIL(ops->bias_grad(dev, &bg, NULL), 8, "bias_grad supports");
  bg.dtype = ESMTB_F32; bg.db = NULL;
  EXPECT_FAIL(ops->bias_grad(dev, &bg, NULL), 0, "bias_grad");

  float cs[8] = {1, 1, 1, 1, 1, 1, 1, 1}, sn[8] = {0};
  esmtb_attention_args a = {0};
  a.struct_size = sizeof a; a.dtype = ESMTB_I32; a.B = 1; a.T = 2; a.H = 1; a.hd = 4;
  a.scale = 0.5f; a.seq_len = len; a.rope_cos = cs; a.rope_sin = sn; a.qkv = x; a.out = x;
  a.lse = x; a.dout = x; a.dqkv = x;
  EXPECT_FAIL(ops->attention_forward(dev, &a, NULL), 8, "attention_forward supports");
  EXPECT_FAIL(ops->attention_backward(dev, &a, NULL), 8, "attention_backward supports");
  a.dtype = ESMTB_F32; a.qkv = NULL;
  EXPECT_FAIL(ops->attention_forward(dev, &a, NULL), 0, "NULL");
  a.qkv = x; a.dqkv = NULL;
  EXPECT_FAIL(ops->attention_backward(dev, &a, NULL), 0, "NULL");
  a.dqkv = x; a.hd = 3;
  EXPECT_FAIL(ops->attention_forward(dev, &a, NULL), 0, "hd");
  a.hd = 4; len[0] = 3;
  EXPECT_FAIL(ops->attention_forward(dev, &a, NULL), 0, "seq_len");
  len[0] = 0;
  EXPECT_FAIL(ops->attention_backward(dev, &a, NULL), 0, "seq_len");

  int32_t lab[2] = {0, 40};
  float loss = 0;
  esmtb_xent_args xe = {sizeof xe, ESMTB_I32, 2, 33, x, lab, &loss, NULL, 1.0f};
  EXPECT_FAIL(ops->xent(dev, &xe, NULL), 8, "xent supports");
  xe.dtype = ESMTB_F32;
  EXPECT_FAIL(ops->xent(dev, &xe, NULL), 0, "label 40");
  xe.labels = NULL;
  EXPECT_FAIL(ops->xent(dev, &xe, NULL), 0, "xent");

  esmtb_segment seg = {0, 4, 0.0f};
  esmtb_adamw_args aw = {0};
  aw.struct_size = sizeof aw; aw.n_segments = 1; aw.segments = &seg; aw.params = x;
  aw.grads = x; aw.m = x; aw.v = NULL; aw.step = 1;
  EXPECT_FAIL(ops->adamw(dev, &aw, NULL), 0, "adamw");
  aw.v = x; aw.step = 0;
  EXPECT_FAIL(ops->adamw(dev, &aw, NULL), 0, "step");
  aw.step = 1; aw.params_lowp = x; aw.lowp_dtype = ESMTB_I32;
  EXPECT_FAIL(ops->adamw(dev, &aw, NULL), 8, "lowp_dtype");
  esmtb_lion_args al = {0};
  al.struct_size = sizeof al; al.n_segments = 1;
  EXPECT_FAIL(ops->lion(dev, &al, NULL), 0, "lion");
  al.params = al.m = x; al.grads = x; al.segments = &seg; al.n_segments = -1;
  EXPECT_FAIL(ops->lion(dev, &al, NULL), 0, "negative");
  al.n_segments = 0; al.params_lowp = x; al.lowp_dtype = ESMTB_I32;
  EXPECT_FAIL(ops->lion(dev, &al, NULL), 8, "lowp_dtype");

  esmtb_sumsq_args ss = {sizeof ss, 4, x, NULL};
  EXPECT_FAIL(ops->sumsq(dev, &ss, NULL), 0, "sumsq");
  esmtb_scale_args sc = {sizeof sc, 4, NULL, 1.0f};
  EXPECT_FAIL(ops->scale(dev, &sc, NULL), 0, "scale");
  esmtb_convert_args cv = {sizeof cv, 4, x, ESMTB_I32, x, ESMTB_F32};
  EXPECT_FAIL(ops->convert(dev, &cv, NULL), 8, "convert");
  cv.src_dtype = ESMTB_F32; cv.dst = NULL;
  EXPECT_FAIL(ops->convert(dev, &cv, NULL), 0, "convert");
}

int main(void) {
  const char *isa = getenv("ESMT_CPU_ISA");
  if (isa) printf("kernel variant limited to %s\n", isa);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm),          cmocka_unit_test(test_gelu_backward),
      cmocka_unit_test(test_bias_grad),     cmocka_unit_test(test_add_scale),
      cmocka_unit_test(test_sumsq),         cmocka_unit_test(test_convert),
      cmocka_unit_test(test_embedding),     cmocka_unit_test(test_layernorm),
      cmocka_unit_test(test_attention),     cmocka_unit_test(test_xent),
      cmocka_unit_test(test_adamw),
      cmocka_unit_test(test_lion),         cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
