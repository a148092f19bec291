/* SPDX-License-Identifier: MIT */
/* See dtype.h. */
#include "esmtrain/backend.h"
#include "dtype.h"

#include <math.h>
#include <string.h>

size_t esmt_dtype_size(esmtb_dtype t) {
  return t == ESMTB_F16 || t == ESMTB_BF16 ? 2 : t == ESMTB_U8 ? 1 : 4;
}

const char *esmt_dtype_name(esmtb_dtype t) {
  switch (t) {
    case ESMTB_F32: return "fp32";
    case ESMTB_F16: return "fp16";
    case ESMTB_BF16: return "bf16";
    case ESMTB_I32: return "int32";
    case ESMTB_U8: return "uint8";
  }
  return "unknown";
}

float esmt_bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t esmt_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float esmt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
  if (e == 0) { /* zero or subnormal: mant * 2^-24, exact in fp32 */
    float v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  if (e == 31) x = sign | 0x7f800000u | (mant << 13);
  else x = sign | ((e - 15 + 127) << 23) | (mant << 13);
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t esmt_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
  if (ax < 0x38800000u) { /* below 2^-14: subnormal units of 2^-24, exact scaling */
    float v;
    memcpy(&v, &ax, sizeof v);
    return (uint16_t)(sign | (uint32_t)nearbyintf(v * 16777216.0f));
  }
  uint32_t h = ((((ax >> 23) - 127 + 15) << 10) | ((ax & 0x7fffffu) >> 13));
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry bumps the exponent */
  return (uint16_t)(sign | h);
}

void esmt_to_f32(esmtb_dtype dtype, const void *src, float *dst, uint64_t n) {
  if (dtype == ESMTB_F32) {
    memmove(dst, src, n * sizeof(float));
    return;
  }
  const uint16_t *h = src;
  for (uint64_t i = 0; i < n; i++)
    dst[i] = dtype == ESMTB_BF16 ? esmt_bf16_to_f32(h[i]) : esmt_f16_to_f32(h[i]);
}

