/* SPDX-License-Identifier: MIT */
/* Host emulation of CUDA's 16-bit float types: __half (IEEE binary16) and
 * __nv_bfloat16, stored as their bit patterns, converted to and from float
 * with round-to-nearest-even as the device's cvt.rn does. */
#ifndef CUEMU_HALF_H
#define CUEMU_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t cuemu_f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float cuemu_bf2f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t cuemu_f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  const int exp = (int)((x >> 23) & 0xffu);
  if (exp == 255) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    const uint32_t m = mant | 0x800000u;
    const int shift = 14 - e;
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}
/* Exact, by bit assembly (the emulated MMAs convert every operand: an
 * ldexpf here was most of the emulated attention tests' time). */
static inline float cuemu_h2f(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 0x3ffu;
  uint32_t u;
  if (e == 0) {
    const float f = (float)m * 5.9604644775390625e-8f; /* m * 2^-24: subnormal or zero */
    memcpy(&u, &f, 4);
  } else if (e == 31) {
    u = 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u); /* inf, or a quiet NaN */
  } else {
    u = ((e + 112u) << 23) | (m << 13); /* rebias 15 -> 127 */
  }
  u |= sign;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#ifdef __cplusplus
struct __half {
  uint16_t x;
  __half() = default;
  __half(float f) : x(cuemu_f2h(f)) {}
  operator float() const { return cuemu_h2f(x); }
};
struct __nv_bfloat16 {
  uint16_t x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : x(cuemu_f2bf(f)) {}
  operator float() const { return cuemu_bf2f(x); }
};
struct __half2 {
  __half x, y;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
typedef __half half;

static inline float __half2float(__half h) { return cuemu_h2f(h.x); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __float2half(float f) { return __half(f); }
static inline float __bfloat162float(__nv_bfloat16 h) { return cuemu_bf2f(h.x); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
#endif

#endif
