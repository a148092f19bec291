/* SPDX-License-Identifier: MIT */
/* Elementwise and row kernels, compiled once per instruction set (see
 * isa_kernels.h): plain loops for the vectoriser, and explicit vectors
 * (cpu_vec.h) where it would not do well alone. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_half.h"
#include "cpu_vec.h"
#include "isa_kernels.h"
#include "esmtrain/philox.h"

/* The GELU loops use explicit vectors (cpu_vec.h): a fast reciprocal and
 * exp that the vectoriser would not produce from scalar code. A tail
 * shorter than a vector goes through a zero-padded copy. */
static void gelu(float *x, float *pre, long n) {
  long i = 0;
  for (; i + VW <= n; i += VW) {
    const vf v = vload(x + i);
    if (pre) vstore(pre + i, v);
    vstore(x + i, vgelu(v));
  }
  if (i < n) {
    float t[VW] = {0};
    memcpy(t, x + i, (size_t)(n - i) * sizeof *t);
    if (pre) memcpy(pre + i, t, (size_t)(n - i) * sizeof *t);
    vstore(t, vgelu(vload(t)));
    memcpy(x + i, t, (size_t)(n - i) * sizeof *t);
  }
}

static void gelu_backward(const float *pre, const float *dout, float *dpre, long n) {
  long i = 0;
  for (; i + VW <= n; i += VW) vstore(dpre + i, vload(dout + i) * vgelu_grad(vload(pre + i)));
  if (i < n) {
    float p[VW] = {0}, d[VW] = {0};
    memcpy(p, pre + i, (size_t)(n - i) * sizeof *p);
    memcpy(d, dout + i, (size_t)(n - i) * sizeof *d);
    vstore(d, vload(d) * vgelu_grad(vload(p)));
    memcpy(dpre + i, d, (size_t)(n - i) * sizeof *d);
  }
}

static void add(const float *a, const float *b, float *y, long n) {
#pragma omp simd
  for (long i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void layernorm_row(const float *x, const float *w, const float *b, float *o, int d,
                          float eps, float *mean_out, float *rstd_out) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int c = 0; c < d; c++) sum += x[c];
  const float mean = sum / (float)d;
  float var = 0.0f; /* two passes: no cancellation */
#pragma omp simd reduction(+ : var)
  for (int c = 0; c < d; c++) var += (x[c] - mean) * (x[c] - mean);
  const float rstd = 1.0f / sqrtf(var / (float)d + eps);
#pragma omp simd
  for (int c = 0; c < d; c++) o[c] = (x[c] - mean) * rstd * w[c] + b[c];
  *mean_out = mean;
  *rstd_out = rstd;
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * w. */
static void layernorm_back_row(const float *x, const float *w, const float *dout, float mean,
                               float rstd, float *dx, int accumulate, float *dw, float *db, int d) {
  float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
  for (int c = 0; c < d; c++) {
    float xhat = (x[c] - mean) * rstd;
    float gw = dout[c] * w[c];
    sg += gw;
    sgx += gw * xhat;
    dw[c] += dout[c] * xhat;
    db[c] += dout[c];
  }
  sg /= (float)d;
  sgx /= (float)d;
  if (accumulate) {
#pragma omp simd
    for (int c = 0; c < d; c++) dx[c] += rstd * (dout[c] * w[c] - sg - (x[c] - mean) * rstd * sgx);
  } else {
#pragma omp simd
    for (int c = 0; c < d; c++) dx[c] = rstd * (dout[c] * w[c] - sg - (x[c] - mean) * rstd * sgx);
  }
}

static void adamw(float *p, const float *g, float *m, float *v, long n, const cpu_adamw_consts *k) {
  const float b1 = k->b1, b2 = k->b2, eps = k->eps, gs = k->gs, step = k->step_size;
  const float isb = k->inv_sqrt_bc2, decay = k->decay;
#pragma omp simd
  for (long i = 0; i < n; i++) {
    float gi = g[i] * gs;
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step * mi / (sqrtf(vi) * isb + eps);
  }
}

/* Sum of squares in double: 4 vector accumulators of VW/2 doubles, summed
 * in a fixed order, so the result depends only on (x, n). */
typedef float vhalf __attribute__((vector_size(VW * 2)));
typedef double vd __attribute__((vector_size(VW * 4)));
#if VW == 16
#define VLO 0, 1, 2, 3, 4, 5, 6, 7
#define VHI 8, 9, 10, 11, 12, 13, 14, 15
#elif VW == 8
#define VLO 0, 1, 2, 3
#define VHI 4, 5, 6, 7
#else
#define VLO 0, 1
#define VHI 2, 3
#endif
static double sumsq(const float *x, long n) {
  vd acc[4] = {{0}};
  long i = 0;
  for (; i + 2 * VW <= n; i += 2 * VW) {
    const vf v = vload(x + i), w = vload(x + i + VW);
    const vd a = __builtin_convertvector(__builtin_shufflevector(v, v, VLO), vd);
    const vd b = __builtin_convertvector(__builtin_shufflevector(v, v, VHI), vd);
    const vd c = __builtin_convertvector(__builtin_shufflevector(w, w, VLO), vd);
    const vd d = __builtin_convertvector(__builtin_shufflevector(w, w, VHI), vd);
    acc[0] += a * a;
    acc[1] += b * b;
    acc[2] += c * c;
    acc[3] += d * d;
  }
  const vd t = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  double lanes[VW / 2], total = 0.0;
  memcpy(lanes, &t, sizeof lanes);
  for (int k = 0; k < VW / 2; k++) total += lanes[k];
  for (; i < n; i++) total += (double)x[i] * x[i];
  return total;
}

/* fp32 -> bf16, round to nearest even; NaN stays a (quiet) NaN. */
static void f32_to_bf16(const float *src, uint16_t *dst, long n) {
  typedef uint16_t vh16 __attribute__((vector_size(VW * 2)));
  long i = 0;
  for (; i + VW <= n; i += VW) {
    const vu x = (vu)vload(src + i);
    const vu nan = (vu)((x & 0x7fffffffu) > 0x7f800000u);
    const vu r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const vh16 h = __builtin_convertvector((nan & ((x >> 16) | 0x40u)) | (~nan & r), vh16);
    memcpy(dst + i, &h, sizeof h);
  }
  for (; i < n; i++) {
    uint32_t x;
    memcpy(&x, src + i, 4);
    dst[i] = (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((x >> 16) | 0x40)
                                             : (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
}

static void bf16_to_f32(const uint16_t *src, float *dst, long n) {
  for (long i = 0; i < n; i++) {
    const uint32_t x = (uint32_t)src[i] << 16;
    memcpy(dst + i, &x, 4);
  }
}

/* fp32 <-> fp16 where the CPU converts in hardware (F16C, round to nearest
 * even); returns 0 when this build has no such instructions. */
static int f32_to_f16(const float *src, uint16_t *dst, long n) {
#if defined(__F16C__)
  long i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
  return 1;
#else
  (void)src; (void)dst; (void)n;
  return 0;
#endif
}

static int f16_to_f32(const uint16_t *src, float *dst, long n) {
#if defined(__F16C__)
  long i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < n; i++) dst[i] = _cvtsh_ss(src[i]);
  return 1;
#else
  (void)src; (void)dst; (void)n;
  return 0;
#endif
}

/* Philox words for the block's groups of four first (independent counters
 * in plain scalars, which the vectoriser widens), then the mask and scale
 * as a flat loop. `first` is a multiple of 4. */
static void dropout(const float *x, float *y, long n, uint64_t first,
                    const esmtb_dropout_args *a) {
  uint32_t w[CPU_BLOCK + 4];
  const uint64_t g0 = first >> 2;
  const long groups = (n + 3) / 4;
  const uint32_t k0 = (uint32_t)a->seed, k1 = (uint32_t)(a->seed >> 32);
  const uint32_t s0 = (uint32_t)a->stream, s1 = (uint32_t)(a->stream >> 32);
#pragma omp simd
  for (long j = 0; j < groups; j++) {
    const uint64_t g = g0 + (uint64_t)j;
    uint32_t c0 = (uint32_t)g, c1 = (uint32_t)(g >> 32), c2 = s0, c3 = s1;
    esmt_philox4x32_10(&c0, &c1, &c2, &c3, k0, k1);
    w[4 * j] = c0;
    w[4 * j + 1] = c1;
    w[4 * j + 2] = c2;
    w[4 * j + 3] = c3;
  }
  const uint32_t thr = a->threshold;
  const float scale = a->scale;
  /* the kept values' bits under an all-ones mask: a select without a
   * branch, which the vectoriser takes */
  float v[CPU_BLOCK];
  for (long i = 0; i < n; i++) {
    uint32_t bits;
    const float s = scale * x[i];
    memcpy(&bits, &s, sizeof bits);
    bits &= 0u - (uint32_t)(w[i] >= thr);
    memcpy(&v[i], &bits, sizeof bits);
  }
  if (a->accumulate) /* y is read only here: otherwise it may hold anything */
    for (long i = 0; i < n; i++) y[i] += v[i];
  else
    memcpy(y, v, (size_t)n * sizeof *y);
}

const cpu_isa_elementwise ISA_SYMBOL(cpu_isa_elementwise) = {
    gelu,  gelu_backward, add,        layernorm_row, layernorm_back_row, adamw,
    sumsq, f32_to_bf16,   bf16_to_f32, f32_to_f16,   f16_to_f32,         dropout,
};
