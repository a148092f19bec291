/* SPDX-License-Identifier: MIT */
/* See cpu_ops_common.h. */
#include "test_util.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops_common.h"

const esmtb_ops *ops;
esmtb_device *dev;  /* 2 threads */
esmtb_device *dev1; /* 1 thread */

int setup(void **state) {
  (void)state;
  ops = test_load_backend("cpu");
  esmtb_open_options o = {sizeof o, 0, 2, 0};
  if (ops->open(&o, &dev)) return -1;
  o.num_threads = 1;
  return ops->open(&o, &dev1) == 0 ? 0 : -1;
}
int teardown(void **state) {
  (void)state;
  if (!ops) return 0; /* setup failed */
  if (dev) ops->close(dev);
  if (dev1) ops->close(dev1);
  return 0;
}

/* ------------------------------------------------------------------ */
/* helpers                                                             */
/* ------------------------------------------------------------------ */

static uint64_t g_rng = 88172645463325252ull;
double urand(void) { /* uniform in [-1, 1) */
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 4503599627370496.0 - 1.0;
}
float *randf(size_t n, double scale) {
  float *v = malloc(n * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < n; i++) v[i] = (float)(urand() * scale);
  return v;
}
double *to_d(const float *x, size_t n) {
  double *d = malloc((n ? n : 1) * sizeof *d);
  assert_non_null(d);
  for (size_t i = 0; i < n; i++) d[i] = x[i];
  return d;
}
float *zerof(size_t n) {
  float *v = calloc(n ? n : 1, sizeof *v);
  assert_non_null(v);
  return v;
}
double *zerod(size_t n) {
  double *v = calloc(n ? n : 1, sizeof *v);
  assert_non_null(v);
  return v;
}
double dotfd(const float *a, const double *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}
double dotdd(const double *a, const double *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* ||got - ref|| <= tol * ||ref|| (got == ref exactly when ref is 0). */
void expect_close(const float *got, const double *ref, size_t n, double tol,
                         const char *what) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double e = got[i] - ref[i];
    num += e * e;
    den += ref[i] * ref[i];
  }
  if (!(num <= tol * tol * den) && !(den == 0 && num == 0))
    fail_msg("%s: normalised error %.3g > %.1g (|ref| = %.3g)", what, sqrt(num / (den ? den : 1)),
             tol, sqrt(den));
}


/* The op's gradient g (fp32) against central differences of the float64
 * reference: along 4 random directions, and at `nsample` elements (the
 * indices in `pick`, or random ones when pick is NULL). */
void check_grad(ref_loss f, void *ctx, const double *x, size_t n, const float *g,
                       const size_t *pick, int nsample, double tol, const char *what) {
  const double h = 1e-5;
  double *xp = malloc(n * sizeof *xp), *v = malloc(n * sizeof *v);
  assert_true(xp && v);
  double gn = 0;
  for (size_t i = 0; i < n; i++) gn += (double)g[i] * g[i];
  const double grms = sqrt(gn / (double)n);
  for (int k = 0; k < 4; k++) {
    for (size_t i = 0; i < n; i++) v[i] = urand();
    for (size_t i = 0; i < n; i++) xp[i] = x[i] + h * v[i];
    double lp = f(ctx, xp);
    for (size_t i = 0; i < n; i++) xp[i] = x[i] - h * v[i];
    double lm = f(ctx, xp);
    double fd = (lp - lm) / (2 * h), an = dotfd(g, v, n);
    double scale = fmax(fabs(fd), grms * sqrt((double)n / 3.0)); /* typical |g . v| */
    if (!(fabs(fd - an) <= tol * scale))
      fail_msg("%s: direction %d: finite difference %.9g vs gradient %.9g", what, k, fd, an);
  }
  memcpy(xp, x, n * sizeof *xp);
  for (int s = 0; s < nsample; s++) {
    size_t i = pick ? pick[s] : (size_t)((urand() + 1.0) * 0.5 * (double)n) % n;
    xp[i] = x[i] + h;
    double lp = f(ctx, xp);
    xp[i] = x[i] - h;
    double lm = f(ctx, xp);
    xp[i] = x[i];
    double fd = (lp - lm) / (2 * h);
    if (!(fabs(fd - g[i]) <= tol * fmax(fabs(fd), grms)))
      fail_msg("%s: element %zu: finite difference %.9g vs gradient %.9g", what, i, fd,
               (double)g[i]);
  }
  free(xp);
  free(v);
}

double gelu_d(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
uint16_t bits16(const void *p, size_t i) { return ((const uint16_t *)p)[i]; }

/* Reference roundings, by arithmetic on doubles (not bit tricks). */
uint16_t ref_f16(float f) {
  const uint16_t sign = signbit(f) ? 0x8000 : 0;
  double a = fabs((double)f);
  if (isinf(f) || a >= 65520.0) return sign | 0x7c00;
  if (a < ldexp(1.0, -14)) return sign | (uint16_t)rint(a / ldexp(1.0, -24)); /* subnormal */
  int ex;
  frexp(a, &ex);
  int e = ex - 1;                                   /* a = 1.m * 2^e */
  double m = rint((a / ldexp(1.0, e) - 1.0) * 1024); /* rint: nearest, ties to even */
  if (m == 1024) {
    m = 0;
    e++;
  }
  if (e + 15 >= 31) return sign | 0x7c00;
  return sign | (uint16_t)((e + 15) << 10) | (uint16_t)m;
}
uint16_t ref_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if (isinf(f)) return (uint16_t)(x >> 16);
  uint32_t lo = x & 0xffff0000u, hi = lo + 0x10000u; /* the neighbours toward and away from 0 */
  float fl, fh;
  memcpy(&fl, &lo, 4);
  memcpy(&fh, &hi, 4);
  /* past the largest finite value the next step is 2^128 (unbounded exponent): inf */
  double dh = isinf(fh) ? ldexp(1.0, 128) - fabs((double)f) : fabs((double)fh - f);
  double dl = fabs((double)f - fl);
  if (dl < dh || (dl == dh && !((lo >> 16) & 1))) return (uint16_t)(lo >> 16);
  return (uint16_t)(hi >> 16);
}
int is_nan16(uint16_t h, int bf) {
  return bf ? (h & 0x7f80) == 0x7f80 && (h & 0x7f) : (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

void emb_ref(const emb_ctx *k, const double *E, double *out, double *scale) {
  for (int b = 0; b < k->B; b++) {
    int n = 0, m = 0;
    for (int t = 0; t < k->T; t++) {
      n += k->tok[b * k->T + t] != PAD;
      m += k->tok[b * k->T + t] == MASK;
    }
    double s = (1.0 - (double)0.12f) / (1.0 - (double)m / n);
    if (scale) scale[b] = s;
    for (int t = 0; t < k->T; t++) {
      int32_t id = k->tok[b * k->T + t];
      for (int c = 0; c < k->d; c++)
        out[((size_t)b * k->T + t) * k->d + c] =
            (id == PAD || id == MASK) ? 0.0 : E[(size_t)id * k->d + c] * s;
    }
  }
}
double emb_loss(void *c, const double *E) {
  emb_ctx *k = c;
  size_t n = (size_t)k->B * k->T * k->d;
  double *out = malloc(n * sizeof *out);
  emb_ref(k, E, out, NULL);
  double s = dotdd(out, k->r, n);
  free(out);
  return s;
}
void ln_ref(int N, int d, const double *x, const double *w, const double *b, double *out,
                   double *mean, double *rstd) {
  for (int i = 0; i < N; i++) {
    const double *xi = x + (size_t)i * d;
    double mu = 0, var = 0;
    for (int c = 0; c < d; c++) mu += xi[c];
    mu /= d;
    for (int c = 0; c < d; c++) var += (xi[c] - mu) * (xi[c] - mu);
    double rs = 1.0 / sqrt(var / d + (double)1e-5f);
    for (int c = 0; c < d; c++) out[(size_t)i * d + c] = (xi[c] - mu) * rs * w[c] + b[c];
    if (mean) mean[i] = mu;
    if (rstd) rstd[i] = rs;
  }
}
double ln_loss(void *c, const double *p) {
  ln_ctx *k = c;
  size_t n = (size_t)k->N * k->d;
  double *out = malloc(n * sizeof *out);
  ln_ref(k->N, k->d, k->wrt == 0 ? p : k->x, k->wrt == 1 ? p : k->w, k->wrt == 2 ? p : k->b, out,
         NULL, NULL);
  double s = dotdd(out, k->r, n);
  free(out);
  return s;
}

/* out [B*T, H*hd] (0 on padded rows), lse [B*H*T] (valid rows only). */
void att_ref(const att_ctx *k, const double *qkv, double *out, double *lse) {
  const int T = k->T, H = k->H, hd = k->hd, half = hd / 2, D = H * hd;
  double *q = malloc(sizeof(double) * T * hd), *kk = malloc(sizeof(double) * T * hd);
  double *p = malloc(sizeof(double) * T);
  for (int b = 0; b < k->B; b++)
    for (int h = 0; h < H; h++) {
      const int L = k->len[b];
      for (int t = 0; t < T; t++) {
        const double *row = qkv + ((size_t)b * T + t) * 3 * D;
        for (int i = 0; i < half; i++) {
          double c = k->cs[t * half + i], s = k->sn[t * half + i];
          double q0 = row[h * hd + i] * k->scale, q1 = row[h * hd + i + half] * k->scale;
          double k0 = row[D + h * hd + i], k1 = row[D + h * hd + i + half];
          q[t * hd + i] = q0 * c - q1 * s;
          q[t * hd + i + half] = q1 * c + q0 * s;
          kk[t * hd + i] = k0 * c - k1 * s;
          kk[t * hd + i + half] = k1 * c + k0 * s;
        }
      }
      for (int t = 0; t < T; t++) {
        double *o = out + ((size_t)b * T + t) * D + h * hd;
        for (int c = 0; c < hd; c++) o[c] = 0.0;
        if (t >= L) continue;
        double mx = -INFINITY, z = 0;
        for (int j = 0; j < L; j++) {
          double s = 0;
          for (int c = 0; c < hd; c++) s += q[t * hd + c] * kk[j * hd + c];
          p[j] = s;
          mx = fmax(mx, s);
        }
        for (int j = 0; j < L; j++) z += (p[j] = exp(p[j] - mx));
        for (int j = 0; j < L; j++) {
          const double *v = qkv + ((size_t)b * T + j) * 3 * D + 2 * D + h * hd;
          for (int c = 0; c < hd; c++) o[c] += p[j] / z * v[c];
        }
        if (lse) lse[((size_t)b * H + h) * T + t] = mx + log(z);
      }
    }
  free(q); free(kk); free(p);
}
double att_loss(void *c, const double *qkv) {
  att_ctx *k = c;
  size_t n = (size_t)k->B * k->T * k->H * k->hd;
  double *out = malloc(n * sizeof *out);
  att_ref(k, qkv, out, NULL);
  double s = dotdd(out, k->r, n);
  free(out);
  return s;
}
double xe_ref(const xe_ctx *k, const double *z, double *grad) {
  double loss = 0;
  for (int i = 0; i < k->N; i++) {
    const double *zi = z + (size_t)i * k->V;
    if (k->lab[i] < 0) {
      if (grad)
        for (int v = 0; v < k->V; v++) grad[(size_t)i * k->V + v] = 0;
      continue;
    }
    double m = -INFINITY, s = 0;
    for (int v = 0; v < k->V; v++) m = fmax(m, zi[v]);
    for (int v = 0; v < k->V; v++) s += exp(zi[v] - m);
    double lse = m + log(s);
    loss += lse - zi[k->lab[i]];
    if (grad)
      for (int v = 0; v < k->V; v++)
        grad[(size_t)i * k->V + v] = (exp(zi[v] - lse) - (v == k->lab[i])) * k->gs;
  }
  return loss;
}
double xe_loss(void *c, const double *z) { /* grad_scale * loss: dlogits is its gradient */
  xe_ctx *k = c;
  return k->gs * xe_ref(k, z, NULL);
}
