/* SPDX-License-Identifier: MIT */
/* Portable fp32 vectors (GCC vector extensions) for the per-ISA kernels:
 * the width follows the instruction set the file is compiled for (16
 * lanes with AVX-512, 8 with AVX2, 4 otherwise). Only for isa_*.c. */
#ifndef ESMTRAIN_CPU_VEC_H
#define ESMTRAIN_CPU_VEC_H

#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#define VW 16
#elif defined(__AVX2__)
#define VW 8
#else
#define VW 4
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

typedef float vf __attribute__((vector_size(VW * 4)));
typedef uint32_t vu __attribute__((vector_size(VW * 4)));

#define VINLINE static inline __attribute__((always_inline))

/* memcpy keeps unaligned access defined; it compiles to one vector move. */
VINLINE vf vload(const float *p) {
  vf v;
  memcpy(&v, p, sizeof v);
  return v;
}
VINLINE void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }
/* x - 0 is x for every x (also -0), so this folds to a plain broadcast;
 * 0 + x would not (it turns -0 into +0) and costs an add. */
/* Keep v in a register: stops the compiler from folding one load into
 * several instructions as memory operands (each would load again, and
 * 512-bit loads are limited to two per cycle). */
#if VW == 16
#define VKEEP(v) __asm__("" : "+v"(v))
#elif defined(__SSE__)
#define VKEEP(v) __asm__("" : "+x"(v))
#else
#define VKEEP(v) ((void)0)
#endif

VINLINE vf vset1(float x) { return x - (vf){0}; }

/* max(a, b); a NaN in b is passed through (MAXPS returns its second
 * operand when either is NaN); the kernels put data in b. */
VINLINE vf vmax(vf a, vf b) {
#if VW == 16
  return (vf)_mm512_max_ps((__m512)a, (__m512)b);
#elif VW == 8
  return (vf)_mm256_max_ps((__m256)a, (__m256)b);
#elif defined(__SSE__)
  return (vf)_mm_max_ps((__m128)a, (__m128)b);
#else
  vu gt = (vu)(b > a) | (vu)(b != b);
  return (vf)((gt & (vu)b) | (~gt & (vu)a));
#endif
}

VINLINE float vhsum(vf v) {
  float s[VW], acc = 0.0f;
  memcpy(s, &v, sizeof s);
  for (int i = 0; i < VW; i++) acc += s[i];
  return acc;
}

VINLINE float vhmax(vf v) {
  float s[VW], m;
  memcpy(s, &v, sizeof s);
  m = s[0];
  for (int i = 1; i < VW; i++) m = s[i] > m ? s[i] : m;
  return m;
}

/* 2^x for x <= 128: round-to-nearest split x = n + f (|f| <= 1/2), a
 * degree-5 fit of 2^f (relative error 1.6e-7), then scaling by 2^n.
 * Very negative x (down to -1e30, the kernels' mask value) gives 0; NaN
 * stays NaN; -inf is not allowed (it would make NaN). */
VINLINE vf vexp2(vf x) {
#if VW == 16
  /* AVX-512 rounds and scales in one instruction each (vscalefps flushes
   * underflow to 0 by itself). */
  const vf n = (vf)_mm512_roundscale_ps((__m512)x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const vf f = x - n;
#else
  x = vmax(vset1(-127.0f), x);
  const vf magic = vset1(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
  const vf t = x + magic;
  const vf f = x - (t - magic);
#endif
  vf p = vset1(1.339086331e-3f);
  p = p * f + 9.676031768e-3f;
  p = p * f + 5.550356954e-02f;
  p = p * f + 2.402210683e-01f;
  p = p * f + 6.931471825e-01f;
  p = p * f + 1.000000119e+00f;
#if VW == 16
  return (vf)_mm512_scalef_ps((__m512)p, (__m512)n);
#else
  /* The low bits of t hold n + 2^22; shifting (n + 127) into the exponent
   * field drops the rest (n = -127 gives exactly 0). */
  const vu e = ((vu)t + 127u) << 23;
  return p * (vf)e;
#endif
}

/* Lane select: m ? a : b for m all-ones / all-zeros per lane. */
VINLINE vf vselect(vu m, vf a, vf b) { return (vf)((m & (vu)a) | (~m & (vu)b)); }

/* 1 / x to about 23 bits: the hardware estimate and one Newton step (a
 * division is several times slower). */
VINLINE vf vrcp(vf x) {
#if VW == 16
  vf r = (vf)_mm512_rcp14_ps((__m512)x);
#elif VW == 8
  vf r = (vf)_mm256_rcp_ps((__m256)x);
#else
  return 1.0f / x;
#endif
#if VW >= 8
  return r * (2.0f - x * r);
#endif
}

/* e^x for x in [-87, 88] (clamped): x = n ln2 + r with ln 2 split in two
 * (Cody-Waite) so r is exact enough, a degree-6 polynomial for e^r, and
 * 2^n put into the exponent. Relative error about 2e-7. */
VINLINE vf vexp(vf x) {
  x = vmax(vset1(-87.0f), x);
  x = -vmax(vset1(-88.0f), -x);
#if VW == 16
  const vf n = (vf)_mm512_roundscale_ps((__m512)(x * 1.44269504088896341f),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
  const vf n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
#endif
  const vf r = x - n * 0.693359375f + n * 2.12194440e-4f;
  vf p = vset1(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
#if VW == 16
  return (vf)_mm512_scalef_ps((__m512)p, (__m512)n);
#else
  typedef int32_t vi_ __attribute__((vector_size(VW * 4)));
  const vu e = (vu)((__builtin_convertvector(n, vi_) + 127) << 23);
  return p * (vf)e;
#endif
}

/* The normal CDF Phi(x) = (1 + erf(x / sqrt 2)) / 2 through erfc(|z|)
 * (Numerical Recipes' fit, relative error 1.2e-7, so the lower tail stays
 * accurate), as in exact-erf GELU. */
VINLINE vf vnormal_cdf(vf x) {
  const vf z = (vf)((vu)x & 0x7fffffffu) * 0.70710678118654752f;
  const vf t = vrcp(1.0f + 0.5f * z);
  vf p = t * 0.17087277f - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  const vf half_erfc = 0.5f * t * vexp(p * t - 1.26551223f - z * z);
  return vselect((vu)(x >= 0.0f), 1.0f - half_erfc, half_erfc);
}

/* GELU (exact erf form) and its derivative Phi(x) + x phi(x). */
VINLINE vf vgelu(vf x) { return x * vnormal_cdf(x); }
VINLINE vf vgelu_grad(vf x) {
  return vnormal_cdf(x) + x * (0.39894228040143268f * vexp(-0.5f * x * x));
}

/* log2(x) for finite x > 0 (normal numbers): x = 2^e m with m in
 * [sqrt(1/2), sqrt(2)), log2(m) = 2/ln2 atanh(s), s = (m-1)/(m+1), |s| <
 * 0.172, by its odd series to s^9 (relative error below 1e-7). */
VINLINE vf vlog2(vf x) {
  const vu bits = (vu)x;
  vu e = (bits >> 23) - 127u;
  vf m = (vf)((bits & 0x007fffffu) | 0x3f800000u); /* [1, 2) */
  const vu big = (vu)(m > 1.41421356f);            /* all ones where m > sqrt 2 */
  m = (vf)(((vu)(m * 0.5f) & big) | ((vu)m & ~big));
  e += big & 1u;
  const vf s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  vf p = s2 * (1.0f / 9) + 1.0f / 7;
  p = p * s2 + 1.0f / 5;
  p = p * s2 + 1.0f / 3;
  p = p * s2 + 1.0f;
  typedef int32_t vi_ __attribute__((vector_size(VW * 4)));
  return __builtin_convertvector((vi_)e, vf) + s * p * 2.88539008177792681f; /* 2 / ln 2 */
}

/* Lane-sum of VW vectors at once: out[i] = sum of lanes of v[i]. Pairwise
 * even/odd folding halves the vector count per level (3 ops per fold), far
 * cheaper than VW separate horizontal sums. */
#if VW == 16
#define VEVEN 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define VODD 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
#elif VW == 8
#define VEVEN 0, 2, 4, 6, 8, 10, 12, 14
#define VODD 1, 3, 5, 7, 9, 11, 13, 15
#else
#define VEVEN 0, 2, 4, 6
#define VODD 1, 3, 5, 7
#endif
VINLINE vf vfold(vf a, vf b) {
  return __builtin_shufflevector(a, b, VEVEN) + __builtin_shufflevector(a, b, VODD);
}
VINLINE void vsum_lanes(vf *v, float *out) {
  for (int n = VW; n > 1; n /= 2)
    for (int i = 0; i < n / 2; i++) v[i] = vfold(v[2 * i], v[2 * i + 1]);
  vstore(out, v[0]);
}

/* In-register transpose of VW x VW (v[i] = row i -> v[i] = column i):
 * log2(VW) rounds of pairing row k with row k + VW/2 and interleaving. */
#if VW == 16
#define VZIPLO 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define VZIPHI 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31
#elif VW == 8
#define VZIPLO 0, 8, 1, 9, 2, 10, 3, 11
#define VZIPHI 4, 12, 5, 13, 6, 14, 7, 15
#else
#define VZIPLO 0, 4, 1, 5
#define VZIPHI 2, 6, 3, 7
#endif
VINLINE void vtranspose(vf *v) {
  for (int n = 1; n < VW; n *= 2) {
    vf o[VW];
    for (int k = 0; k < VW / 2; k++) {
      o[2 * k] = __builtin_shufflevector(v[k], v[k + VW / 2], VZIPLO);
      o[2 * k + 1] = __builtin_shufflevector(v[k], v[k + VW / 2], VZIPHI);
    }
    for (int k = 0; k < VW; k++) v[k] = o[k];
  }
}

/* dst[c*dld + r] = src[r*sld + c] for r < rows, c < cols (both <= VW).
 * Each of the cols destination rows gets a full vector: zeros past rows. */
VINLINE void vtranspose_in(const float *src, size_t sld, int rows, int cols, float *dst,
                           size_t dld) {
  vf v[VW];
  if (rows == VW && cols == VW) {
    for (int r = 0; r < VW; r++) v[r] = vload(src + r * sld);
  } else { /* partial tile: stage it, zero filled */
    float t[VW * VW] = {0};
    for (int r = 0; r < rows; r++) memcpy(t + r * VW, src + r * sld, (size_t)cols * sizeof(float));
    for (int r = 0; r < VW; r++) v[r] = vload(t + r * VW);
  }
  vtranspose(v);
  for (int c = 0; c < cols; c++) vstore(dst + c * dld, v[c]);
}

/* dst[r*dld + c] = src[c*sld + r] for r < rows, c < cols (both <= VW);
 * writes nothing else. */
VINLINE void vtranspose_out(const float *src, size_t sld, int rows, int cols, float *dst,
                            size_t dld) {
  vf v[VW];
  for (int c = 0; c < VW; c++) v[c] = c < cols ? vload(src + c * sld) : vset1(0.0f);
  vtranspose(v);
  if (rows == VW && cols == VW) {
    for (int r = 0; r < VW; r++) vstore(dst + r * dld, v[r]);
  } else {
    float t[VW];
    for (int r = 0; r < rows; r++) {
      vstore(t, v[r]);
      memcpy(dst + r * dld, t, (size_t)cols * sizeof(float));
    }
  }
}

#endif
