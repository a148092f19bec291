/* SPDX-License-Identifier: MIT */
/* fp32 <-> F16/BF16 for the ops (cpu_half.h): the per-ISA vector kernels,
 * and a portable scalar fp16 path for variants without F16C. */
#include "cpu_half.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "isa_kernels.h"

static float f16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023, bits;
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f; /* subnormal: m * 2^-24 */
    return sign ? -v : v;
  }
  bits = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* Round to nearest even; overflow saturates to infinity like a cast. */
static uint16_t float_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* >= 65520 rounds to inf */
  if (absx < 0x38800000u) { /* subnormal half */
    float v;
    memcpy(&v, &absx, 4);
    return (uint16_t)(sign | (uint32_t)lrintf(v * 16777216.0f));
  }
  uint32_t mant = absx & 0x7fffff, exp = (absx >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

void cpu_half_load(const void *src, esmtb_dtype dt, size_t first, float *dst, long n) {
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
  if (dt == ESMTB_F32) {
    memcpy(dst, (const float *)src + first, (size_t)n * sizeof *dst);
    return;
  }
  const uint16_t *s = (const uint16_t *)src + first;
  if (dt == ESMTB_BF16) {
    k->bf16_to_f32(s, dst, n);
    return;
  }
  if (k->f16_to_f32(s, dst, n)) return;
  for (long i = 0; i < n; i++) dst[i] = f16_to_float(s[i]);
}

void cpu_half_store(const float *src, void *dst, esmtb_dtype dt, size_t first, long n) {
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
  if (dt == ESMTB_F32) {
    memcpy((float *)dst + first, src, (size_t)n * sizeof *src);
    return;
  }
  uint16_t *d = (uint16_t *)dst + first;
  if (dt == ESMTB_BF16) {
    k->f32_to_bf16(src, d, n);
    return;
  }
  if (k->f32_to_f16(src, d, n)) return;
  for (long i = 0; i < n; i++) d[i] = float_to_f16(src[i]);
}

float *cpu_scratch_alloc(int threads, size_t per) {
  const size_t slice = (per + 15) / 16 * 16;
  const size_t bytes = (size_t)(threads > 0 ? threads : 1) * (slice ? slice : 16) * sizeof(float);
  return aligned_alloc(64, bytes);
}
