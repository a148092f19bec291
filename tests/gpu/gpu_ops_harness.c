/* SPDX-License-Identifier: MIT */
/* The harness of test_gpu_ops (gpu_ops_harness.h). */
#include "gpu_ops_harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const esmtb_ops *cpu;
esmtb_device *cdev;
gpu g_gpus[2];
int g_ngpu;
int g_failed;

/* ------------------------------------------------------------------ */
/* host helpers                                                        */
/* ------------------------------------------------------------------ */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
double urand(void) { /* uniform in [-1, 1) */
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 4503599627370496.0 - 1.0;
}
float *randf(size_t n, double scale, double offset) {
  float *v = malloc((n ? n : 1) * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < n; i++) v[i] = (float)(urand() * scale + offset);
  return v;
}
float *copyf(const float *x, size_t n) {
  float *v = malloc((n ? n : 1) * sizeof *v);
  assert_non_null(v);
  memcpy(v, x, n * sizeof *v);
  return v;
}

float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023, bits;
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  bits = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
uint16_t f2h(float f) { /* round to nearest even, like __float2half_rn */
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);
  if (absx < 0x38800000u) {
    float v;
    memcpy(&v, &absx, 4);
    return (uint16_t)(sign | (uint32_t)lrintf(v * 16777216.0f));
  }
  uint32_t mant = absx & 0x7fffff, exp = (absx >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13), rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}
float bf2f(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
uint16_t f2bf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* Round to TF32 (10 mantissa bits, nearest even): such values pass through
 * TF32 tensor cores unchanged, whether the kernel rounds or truncates. */
void round_tf32(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], 4);
    u += 0xfffu + ((u >> 13) & 1u);
    u &= ~0x1fffu;
    memcpy(&x[i], &u, 4);
  }
}

const char *dt_name(esmtb_dtype dt) {
  return dt == ESMTB_F32 ? "f32" : dt == ESMTB_F16 ? "f16" : dt == ESMTB_BF16 ? "bf16" : "?";
}
size_t dt_size(esmtb_dtype dt) { return dt == ESMTB_F32 ? 4 : 2; }
double dt_tol(esmtb_dtype dt) { return dt == ESMTB_F32 ? 1e-5 : dt == ESMTB_F16 ? 1e-2 : 2e-2; }

/* x = the value the GPU sees after storing x in `dt`. */
void round_to(float *x, size_t n, esmtb_dtype dt) {
  for (size_t i = 0; i < n; i++)
    x[i] = dt == ESMTB_F16 ? h2f(f2h(x[i])) : dt == ESMTB_BF16 ? bf2f(f2bf(x[i])) : x[i];
}

double relerr(const float *got, const float *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double e = (double)got[i] - ref[i];
    num += e * e;
    den += (double)ref[i] * ref[i];
  }
  if (den == 0) return sqrt(num);
  return sqrt(num / den);
}


/* One line per check for the GPU log. */
void report(const gpu *g, const char *what, esmtb_dtype dt, double err, double tol) {
  int ok = err <= tol; /* NaN fails */
  printf("RESULT %-12s %-34s %-4s relerr %.3e (tol %.0e) %s\n", g->name, what, dt_name(dt), err,
         tol, ok ? "ok" : "FAIL");
  fflush(stdout);
  if (!ok) g_failed++;
}
void report_bits(const gpu *g, const char *what, esmtb_dtype dt, const void *x,
                        const void *y, size_t bytes) {
  int same = memcmp(x, y, bytes) == 0;
  printf("RESULT %-12s %-34s %-4s deterministic %s\n", g->name, what, dt_name(dt),
         same ? "ok" : "FAIL (two runs differ)");
  fflush(stdout);
  if (!same) g_failed++;
}

void report_same(const gpu *g, const char *what, esmtb_dtype dt, const void *cpu_out,
                 const void *gpu_out, size_t bytes) {
  int same = memcmp(cpu_out, gpu_out, bytes) == 0;
  printf("RESULT %-12s %-34s %-4s bitwise equal to cpu %s\n", g->name, what, dt_name(dt),
         same ? "ok" : "FAIL");
  fflush(stdout);
  if (!same) g_failed++;
}

/* ------------------------------------------------------------------ */
/* device helpers                                                      */
/* ------------------------------------------------------------------ */

void gsync(const gpu *g) {
  if (g->ops->stream_sync(g->dev, g->st)) fail_msg("%s stream_sync: %s", g->name, test_backend_error());
}
void *galloc(const gpu *g, size_t bytes) {
  void *p = NULL;
  if (g->ops->alloc(g->dev, ESMTB_MEM_DEVICE, bytes ? bytes : 1, &p))
    fail_msg("%s alloc %zu: %s", g->name, bytes, test_backend_error());
  return p;
}
void gfree(const gpu *g, void *p) { g->ops->free(g->dev, ESMTB_MEM_DEVICE, p); }
void gput_raw(const gpu *g, void *d, const void *h, size_t bytes) {
  if (g->ops->copy_async(g->dev, d, h, bytes, ESMTB_COPY_H2D, g->st))
    fail_msg("%s copy H2D: %s", g->name, test_backend_error());
  gsync(g);
}
void gget_raw(const gpu *g, void *h, const void *d, size_t bytes) {
  if (g->ops->copy_async(g->dev, h, d, bytes, ESMTB_COPY_D2H, g->st))
    fail_msg("%s copy D2H: %s", g->name, test_backend_error());
  gsync(g);
}
/* Store host floats into an existing device buffer in dtype dt. */
void gput(const gpu *g, void *d, const float *x, size_t n, esmtb_dtype dt) {
  if (dt == ESMTB_F32) {
    gput_raw(g, d, x, n * 4);
    return;
  }
  uint16_t *h = malloc((n ? n : 1) * 2);
  assert_non_null(h);
  for (size_t i = 0; i < n; i++) h[i] = dt == ESMTB_F16 ? f2h(x[i]) : f2bf(x[i]);
  gput_raw(g, d, h, n * 2);
  free(h);
}
void *gup(const gpu *g, const float *x, size_t n, esmtb_dtype dt) {
  void *d = galloc(g, n * dt_size(dt));
  gput(g, d, x, n, dt);
  return d;
}
float *gdown(const gpu *g, const void *d, size_t n, esmtb_dtype dt) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  assert_non_null(x);
  if (dt == ESMTB_F32) {
    gget_raw(g, x, d, n * 4);
    return x;
  }
  uint16_t *h = malloc((n ? n : 1) * 2);
  assert_non_null(h);
  gget_raw(g, h, d, n * 2);
  for (size_t i = 0; i < n; i++) x[i] = dt == ESMTB_F16 ? h2f(h[i]) : bf2f(h[i]);
  free(h);
  return x;
}
void cpu_ok(esmtb_status st, const char *op) {
  if (st) fail_msg("cpu %s: %s", op, test_backend_error());
}
void gpu_ok(const gpu *g, esmtb_status st, const char *op) {
  if (st) fail_msg("%s %s: %s", g->name, op, test_backend_error());
  gsync(g);
}

int has_dtype(const gpu *g, esmtb_dtype dt) {
  uint32_t want = dt == ESMTB_F32 ? ESMTB_CAP_F32 : dt == ESMTB_F16 ? ESMTB_CAP_F16 : ESMTB_CAP_BF16;
  return (g->ops->caps & want) != 0;
}
