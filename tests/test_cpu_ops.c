/* Each CPU op alone: its backward against central finite differences of
 * its own forward (directional derivatives of L = sum(r * out) along
 * random directions, evaluated in double from the fp32 outputs), plus
 * argument errors. The whole model is checked against the float64
 * PyTorch reference in test_model_reference.c. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const esmtb_ops *ops;
static esmtb_device *dev;

static int setup(void **state) {
  (void)state;
  ops = test_load_backend("cpu");
  esmtb_open_options o = {sizeof o, 0, 2, 0};
  return ops->open(&o, &dev) == 0 ? 0 : -1;
}
static int teardown(void **state) {
  (void)state;
  ops->close(dev);
  return 0;
}

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) { /* uniform in [-1, 1) */
  g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
  return (float)((double)(g_rng >> 11) / 4503599627370496.0 - 1.0);
}
static float *randv(size_t n, float scale) {
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = frand() * scale;
  return v;
}
static double dot(const float *a, const float *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

/* A forward evaluated at x + t*v, reduced to sum(r * out). */
typedef double (*loss_fn)(void *ctx, const float *x);

/* |FD - analytic| <= tol * max(|FD|, |analytic|, floor) along 3 directions. */
static void check_direction(loss_fn f, void *ctx, float *x, size_t n, const float *grad,
                            double eps, double tol, const char *what) {
  float *xp = malloc(n * sizeof *xp);
  for (int k = 0; k < 3; k++) {
    float *v = randv(n, 1.0f);
    for (size_t i = 0; i < n; i++) xp[i] = x[i] + (float)eps * v[i];
    double lp = f(ctx, xp);
    for (size_t i = 0; i < n; i++) xp[i] = x[i] - (float)eps * v[i];
    double lm = f(ctx, xp);
    double fd = (lp - lm) / (2 * eps), an = dot(grad, v, n);
    double scale = fmax(fmax(fabs(fd), fabs(an)), 1e-3);
    if (fabs(fd - an) > tol * scale)
      fail_msg("%s: finite difference %.6g vs analytic %.6g (direction %d)", what, fd, an, k);
    free(v);
  }
  free(xp);
}

/* ---- layernorm ---- */
typedef struct ln_ctx { int N, d; const float *w, *b, *r; float *out, *mean, *rstd; int wrt; const float *x; } ln_ctx;
static double ln_loss(void *c, const float *p) {
  ln_ctx *k = c;
  esmtb_layernorm_args a = {0};
  a.struct_size = sizeof a; a.N = k->N; a.d = k->d; a.eps = 1e-5f;
  a.x = k->wrt == 0 ? p : k->x; a.w = k->wrt == 1 ? p : k->w; a.b = k->wrt == 2 ? p : k->b;
  a.out = k->out; a.mean = k->mean; a.rstd = k->rstd;
  assert_int_equal(ops->layernorm_forward(dev, &a, NULL), 0);
  return dot(k->out, k->r, (size_t)k->N * k->d);
}
static void test_layernorm(void **state) {
  (void)state;
  const int N = 7, d = 48;
  float *x = randv((size_t)N * d, 2.0f), *w = randv(d, 1.0f), *b = randv(d, 0.5f), *r = randv((size_t)N * d, 1.0f);
  float *out = calloc((size_t)N * d, 4), *mean = calloc(N, 4), *rstd = calloc(N, 4);
  float *dx = calloc((size_t)N * d, 4), *dw = calloc(d, 4), *db = calloc(d, 4);
  ln_ctx c = {N, d, w, b, r, out, mean, rstd, 0, x};
  ln_loss(&c, x);
  esmtb_layernorm_args a = {0};
  a.struct_size = sizeof a; a.N = N; a.d = d; a.eps = 1e-5f; a.x = x; a.w = w; a.b = b;
  a.out = out; a.mean = mean; a.rstd = rstd; a.dout = r; a.dx = dx; a.dw = dw; a.db = db;
  assert_int_equal(ops->layernorm_backward(dev, &a, NULL), 0);
  check_direction(ln_loss, &c, x, (size_t)N * d, dx, 1e-2, 2e-2, "layernorm dx");
  c.wrt = 1; check_direction(ln_loss, &c, w, d, dw, 1e-2, 2e-2, "layernorm dw");
  c.wrt = 2; check_direction(ln_loss, &c, b, d, db, 1e-2, 2e-2, "layernorm db");
  /* accumulate_dx adds */
  float *dx2 = malloc((size_t)N * d * 4);
  for (int i = 0; i < N * d; i++) dx2[i] = 1.0f;
  a.dx = dx2; a.accumulate_dx = 1;
  assert_int_equal(ops->layernorm_backward(dev, &a, NULL), 0);
  for (int i = 0; i < N * d; i++) assert_true(fabsf(dx2[i] - 1.0f - dx[i]) < 1e-5f);
  free(x); free(w); free(b); free(r); free(out); free(mean); free(rstd); free(dx); free(dw); free(db); free(dx2);
}

/* ---- gelu epilogue forward vs gelu_backward ---- */
typedef struct gelu_ctx { int n; const float *r; float *out; } gelu_ctx;
static double gelu_loss(void *c, const float *p) {
  gelu_ctx *k = c;
  /* GELU through the GEMM epilogue: out = gelu(I . p) with a 1 x n row */
  float one = 1.0f;
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g; g.m = 1; g.n = k->n; g.k = 1; g.alpha = 1.0f;
  g.a = &one; g.lda = 1; g.b = p; g.ldb = k->n; g.c = k->out; g.ldc = k->n; g.epilogue = ESMTB_EPI_GELU;
  assert_int_equal(ops->gemm(dev, &g, NULL), 0);
  return dot(k->out, k->r, (size_t)k->n);
}
static void test_gelu(void **state) {
  (void)state;
  const int n = 300;
  float *x = randv(n, 4.0f), *r = randv(n, 1.0f), *out = calloc(n, 4), *dx = calloc(n, 4);
  gelu_ctx c = {n, r, out};
  gelu_loss(&c, x);
  for (int i = 0; i < n; i++) { /* exact erf GELU */
    double ref = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2.0)));
    assert_true(fabs(out[i] - ref) <= 1e-6 * fmax(1, fabs(ref)));
  }
  esmtb_gelu_backward_args a = {sizeof a, ESMTB_F32, (size_t)n, x, r, dx};
  assert_int_equal(ops->gelu_backward(dev, &a, NULL), 0);
  check_direction(gelu_loss, &c, x, n, dx, 1e-3, 1e-2, "gelu");
  free(x); free(r); free(out); free(dx);
}

/* ---- embedding with token dropout ---- */
typedef struct emb_ctx { int B, T, d; const int32_t *tok; const float *r; float *out, *scale; } emb_ctx;
static double emb_loss(void *c, const float *E) {
  emb_ctx *k = c;
  esmtb_embed_args a = {0};
  a.struct_size = sizeof a; a.B = k->B; a.T = k->T; a.d = k->d; a.tokens = k->tok; a.E = E;
  a.out = k->out; a.row_scale = k->scale; a.mask_id = 32; a.pad_id = 1; a.mask_ratio_train = 0.12f;
  assert_int_equal(ops->embed_forward(dev, &a, NULL), 0);
  return dot(k->out, k->r, (size_t)k->B * k->T * k->d);
}
static void test_embedding(void **state) {
  (void)state;
  const int B = 2, T = 6, d = 16, V = 33;
  int32_t tok[] = {0, 5, 32, 7, 2, 1, /* one mask */ 0, 8, 9, 2, 1, 1};
  float *E = randv((size_t)V * d, 0.5f), *r = randv((size_t)B * T * d, 1.0f);
  float *out = calloc((size_t)B * T * d, 4), *scale = calloc(B, 4), *dE = calloc((size_t)V * d, 4);
  emb_ctx c = {B, T, d, tok, r, out, scale};
  emb_loss(&c, E);
  /* row 0: 5 non-pad, 1 mask -> 0.88 / (1 - 1/5); row 1: no mask -> 0.88 */
  assert_true(fabsf(scale[0] - 0.88f / 0.8f) < 1e-6f);
  assert_true(fabsf(scale[1] - 0.88f) < 1e-6f);
  for (int c2 = 0; c2 < d; c2++) {
    assert_true(out[2 * d + c2] == 0.0f); /* the mask position */
    assert_true(out[5 * d + c2] == 0.0f); /* padding */
  }
  esmtb_embed_args a = {0};
  a.struct_size = sizeof a; a.B = B; a.T = T; a.d = d; a.tokens = tok; a.E = E; a.row_scale = scale;
  a.mask_id = 32; a.pad_id = 1; a.mask_ratio_train = 0.12f; a.dout = r; a.dE = dE;
  assert_int_equal(ops->embed_backward(dev, &a, NULL), 0);
  check_direction(emb_loss, &c, E, (size_t)V * d, dE, 1e-2, 1e-3, "embedding dE");
  for (int c2 = 0; c2 < d; c2++) assert_true(dE[1 * d + c2] == 0.0f && dE[32 * d + c2] == 0.0f);
  free(E); free(r); free(out); free(scale); free(dE);
}

/* ---- attention ---- */
typedef struct att_ctx { esmtb_attention_args a; const float *r; size_t nout; } att_ctx;
static double att_loss(void *c, const float *qkv) {
  att_ctx *k = c;
  esmtb_attention_args a = k->a;
  a.qkv = qkv;
  assert_int_equal(ops->attention_forward(dev, &a, NULL), 0);
  return dot(a.out, k->r, k->nout);
}
static void attention_case(int B, int T, int H, int hd, const int32_t *len) {
  const size_t D = (size_t)H * hd, N = (size_t)B * T;
  float *qkv = randv(N * 3 * D, 1.0f), *r = randv(N * D, 1.0f);
  float *out = calloc(N * D, 4), *lse = calloc(N * H, 4), *dqkv = calloc(N * 3 * D, 4);
  float *cs = malloc((size_t)T * hd / 2 * 4), *sn = malloc((size_t)T * hd / 2 * 4);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < hd / 2; i++) {
      double ang = t * pow(10000.0, -2.0 * i / hd);
      cs[t * hd / 2 + i] = (float)cos(ang);
      sn[t * hd / 2 + i] = (float)sin(ang);
    }
  for (size_t b = 0; b < (size_t)B; b++) /* padded query rows carry no gradient */
    for (int t = len[b]; t < T; t++)
      for (size_t c = 0; c < D; c++) r[(b * T + t) * D + c] = 0.0f;
  att_ctx c;
  memset(&c, 0, sizeof c);
  c.a.struct_size = sizeof c.a; c.a.B = B; c.a.T = T; c.a.H = H; c.a.hd = hd;
  c.a.scale = 1.0f / sqrtf((float)hd); c.a.seq_len = len; c.a.rope_cos = cs; c.a.rope_sin = sn;
  c.a.out = out; c.a.lse = lse; c.r = r; c.nout = N * D;
  att_loss(&c, qkv);
  for (size_t b = 0; b < (size_t)B; b++) /* padded queries output 0 */
    for (int t = len[b]; t < T; t++)
      for (size_t k = 0; k < D; k++) assert_true(out[(b * T + t) * D + k] == 0.0f);
  esmtb_attention_args a = c.a;
  a.qkv = qkv; a.dout = r; a.dqkv = dqkv;
  assert_int_equal(ops->attention_backward(dev, &a, NULL), 0);
  char what[64];
  snprintf(what, sizeof what, "attention hd=%d", hd);
  check_direction(att_loss, &c, qkv, N * 3 * D, dqkv, 1e-2, 2e-2, what);
  /* keys past a row's length do not matter: changing them changes nothing */
  float before = out[0];
  if (len[0] < T) {
    qkv[((size_t)(T - 1)) * 3 * D + D] += 5.0f;
    att_loss(&c, qkv);
    assert_true(out[0] == before);
  }
  free(qkv); free(r); free(out); free(lse); free(dqkv); free(cs); free(sn);
}
static void test_attention(void **state) {
  (void)state;
  int32_t l1[] = {9, 4, 1};
  attention_case(3, 9, 2, 16, l1);
  int32_t l2[] = {11, 7};
  attention_case(2, 11, 2, 24, l2);
  int32_t l3[] = {6, 5};
  attention_case(2, 6, 1, 64, l3);
}

/* ---- cross-entropy ---- */
typedef struct xe_ctx { int N, V; const int32_t *lab; float *loss; } xe_ctx;
static double xe_loss(void *c, const float *z) {
  xe_ctx *k = c;
  *k->loss = 0;
  esmtb_xent_args a = {sizeof a, ESMTB_F32, k->N, k->V, z, k->lab, k->loss, NULL, 1.0f};
  assert_int_equal(ops->xent(dev, &a, NULL), 0);
  return *k->loss;
}
static void test_xent(void **state) {
  (void)state;
  const int N = 5, V = 33;
  int32_t lab[] = {4, -100, 32, 7, -100};
  float *z = randv((size_t)N * V, 3.0f), *dz = calloc((size_t)N * V, 4), loss = 0;
  xe_ctx c = {N, V, lab, &loss};
  double l0 = xe_loss(&c, z);
  double ref = 0;
  for (int i = 0; i < N; i++) {
    if (lab[i] < 0) continue;
    double m = -1e30, s = 0;
    for (int v = 0; v < V; v++) m = fmax(m, z[i * V + v]);
    for (int v = 0; v < V; v++) s += exp(z[i * V + v] - m);
    ref += m + log(s) - z[i * V + lab[i]];
  }
  assert_true(fabs(l0 - ref) < 1e-4 * ref);
  esmtb_xent_args a = {sizeof a, ESMTB_F32, N, V, z, lab, &loss, dz, 1.0f};
  loss = 0;
  assert_int_equal(ops->xent(dev, &a, NULL), 0);
  check_direction(xe_loss, &c, z, (size_t)N * V, dz, 1e-2, 1e-2, "cross-entropy");
  for (int v = 0; v < V; v++) assert_true(dz[1 * V + v] == 0.0f); /* unlabelled row */
  free(z); free(dz);
}

/* ---- GEMM layouts, bias, accumulation; bias_grad; adamw; sumsq ---- */
static void test_gemm_and_reductions(void **state) {
  (void)state;
  const int m = 5, n = 7, k = 3;
  float *A = randv((size_t)m * k, 1.0f), *Bm = randv((size_t)k * n, 1.0f), *bias = randv(n, 1.0f);
  float *C = calloc((size_t)m * n, 4), *At = malloc((size_t)m * k * 4), *Bt = malloc((size_t)k * n * 4);
  for (int i = 0; i < m; i++) for (int j = 0; j < k; j++) At[j * m + i] = A[i * k + j];
  for (int i = 0; i < k; i++) for (int j = 0; j < n; j++) Bt[j * k + i] = Bm[i * n + j];
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      esmtb_gemm_args g = {0};
      g.struct_size = sizeof g; g.trans_a = ta; g.trans_b = tb; g.m = m; g.n = n; g.k = k;
      g.alpha = 1.0f; g.a = ta ? At : A; g.lda = ta ? m : k; g.b = tb ? Bt : Bm; g.ldb = tb ? k : n;
      g.c = C; g.ldc = n; g.bias = bias;
      assert_int_equal(ops->gemm(dev, &g, NULL), 0);
      for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
          double ref = bias[j];
          for (int q = 0; q < k; q++) ref += (double)A[i * k + q] * Bm[q * n + j];
          assert_true(fabs(C[i * n + j] - ref) < 1e-5);
        }
    }
  /* beta = 1 accumulates */
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g; g.m = m; g.n = n; g.k = k; g.alpha = 1.0f; g.beta = 1.0f;
  g.a = A; g.lda = k; g.b = Bm; g.ldb = n; g.c = C; g.ldc = n;
  float *C0 = malloc((size_t)m * n * 4);
  memcpy(C0, C, (size_t)m * n * 4);
  assert_int_equal(ops->gemm(dev, &g, NULL), 0);
  for (int i = 0; i < m * n; i++) assert_true(fabsf(C[i] - 2 * C0[i] + bias[i % n]) < 1e-5f);
  /* bias gradient = column sums, accumulated */
  float db[7] = {1, 1, 1, 1, 1, 1, 1};
  esmtb_bias_grad_args bg = {sizeof bg, ESMTB_F32, m, n, C, db};
  assert_int_equal(ops->bias_grad(dev, &bg, NULL), 0);
  for (int j = 0; j < n; j++) {
    double s = 1;
    for (int i = 0; i < m; i++) s += C[i * n + j];
    assert_true(fabs(db[j] - s) < 1e-5);
  }
  /* AdamW: three steps against a double implementation */
  const size_t P = 1000;
  float *p = randv(P, 1.0f), *gr = randv(P, 0.1f), *mm = calloc(P, 4), *vv = calloc(P, 4);
  double *pd = malloc(P * 8), *md = calloc(P, 8), *vd = calloc(P, 8);
  for (size_t i = 0; i < P; i++) pd[i] = p[i];
  esmtb_segment segs[] = {{0, 600, 0.01f}, {600, 400, 0.0f}};
  for (int step = 1; step <= 3; step++) {
    esmtb_adamw_args a = {0};
    a.struct_size = sizeof a; a.n_segments = 2; a.segments = segs; a.params = p; a.grads = gr;
    a.m = mm; a.v = vv; a.lr = 1e-2f; a.beta1 = 0.9f; a.beta2 = 0.98f; a.eps = 1e-8f; a.step = step;
    a.grad_scale = 0.5f;
    assert_int_equal(ops->adamw(dev, &a, NULL), 0);
    for (size_t i = 0; i < P; i++) {
      double g2 = gr[i] * 0.5, wd = i < 600 ? 0.01 : 0.0;
      md[i] = 0.9 * md[i] + 0.1 * g2;
      vd[i] = 0.98 * vd[i] + 0.02 * g2 * g2;
      double mh = md[i] / (1 - pow(0.9, step)), vh = vd[i] / (1 - pow(0.98, step));
      pd[i] -= 1e-2 * (wd * pd[i] + mh / (sqrt(vh) + 1e-8));
    }
  }
  for (size_t i = 0; i < P; i++) assert_true(fabs(p[i] - pd[i]) < 1e-5);
  /* sum of squares: exact enough and bit-identical twice */
  float s1 = 0, s2 = 0;
  esmtb_sumsq_args sa = {sizeof sa, P, p, &s1};
  assert_int_equal(ops->sumsq(dev, &sa, NULL), 0);
  sa.out = &s2;
  assert_int_equal(ops->sumsq(dev, &sa, NULL), 0);
  assert_memory_equal(&s1, &s2, sizeof s1);
  assert_true(fabs(s1 - dot(p, p, P)) < 1e-5 * s1);
  free(A); free(Bm); free(bias); free(C); free(At); free(Bt); free(C0);
  free(p); free(gr); free(mm); free(vv); free(pd); free(md); free(vd);
}

static void test_errors(void **state) {
  (void)state;
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g;
  g.dtype = ESMTB_F16;
  g.m = g.n = g.k = 1;
  float x = 1;
  g.a = g.b = &x; g.c = &x;
  assert_int_not_equal(ops->gemm(dev, &g, NULL), 0);
  assert_non_null(strstr(test_backend_error(), "fp32"));
  g.dtype = ESMTB_F32;
  g.m = 0;
  assert_int_not_equal(ops->gemm(dev, &g, NULL), 0);
  assert_non_null(strstr(test_backend_error(), "positive"));
  esmtb_attention_args a = {0};
  a.struct_size = sizeof a;
  assert_int_not_equal(ops->attention_forward(dev, &a, NULL), 0);
  assert_non_null(strstr(test_backend_error(), "NULL"));
  assert_int_not_equal(ops->layernorm_forward(dev, NULL, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layernorm),   cmocka_unit_test(test_gelu),
      cmocka_unit_test(test_embedding),   cmocka_unit_test(test_attention),
      cmocka_unit_test(test_xent),        cmocka_unit_test(test_gemm_and_reductions),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
