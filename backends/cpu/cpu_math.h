/* Branch-free fp32 math the compiler can vectorise (libm's expf/erff are
 * scalar calls). Accuracy: expf within ~2 ulp over its range, erff within
 * ~1.2e-7 absolute (Numerical Recipes' erfc fit), ample for fp32 training
 * and far inside the fixtures' 1e-4 tolerance. */
#ifndef ESMTRAIN_CPU_MATH_H
#define ESMTRAIN_CPU_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float cpu_expf(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  /* Round to nearest with the 1.5 * 2^23 trick: no libm call, so the loop
   * vectorises on every ISA (floorf is a call without SSE4.1). */
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  /* Cody-Waite split of ln 2 keeps r exact enough. */
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

static inline float cpu_erff(float x) {
  float z = fabsf(x);
  float t = 1.0f / (1.0f + 0.5f * z);
  float poly = -0.82215223f + t * 0.17087277f;
  poly = 1.48851587f + t * poly;
  poly = -1.13520398f + t * poly;
  poly = 0.27886807f + t * poly;
  poly = -0.18628806f + t * poly;
  poly = 0.09678418f + t * poly;
  poly = 0.37409196f + t * poly;
  poly = 1.00002368f + t * poly;
  float erfc = t * cpu_expf(-z * z - 1.26551223f + t * poly);
  float e = 1.0f - erfc;
  return x < 0.0f ? -e : e;
}

/* GELU, exact erf form: 0.5 x (1 + erf(x / sqrt 2)). */
static inline float cpu_gelu(float x) { return 0.5f * x * (1.0f + cpu_erff(x * 0.70710678118654752f)); }

/* d/dx GELU = Phi(x) + x phi(x). */
static inline float cpu_gelu_grad(float x) {
  float cdf = 0.5f * (1.0f + cpu_erff(x * 0.70710678118654752f));
  float pdf = 0.39894228040143268f * cpu_expf(-0.5f * x * x);
  return cdf + x * pdf;
}

/* Static split of [0, n) into `parts` contiguous chunks: chunk `i`. The
 * split depends only on (n, parts), which keeps reductions deterministic. */
static inline void cpu_chunk(size_t n, int parts, int i, size_t *begin, size_t *end) {
  size_t base = n / (size_t)parts, rem = n % (size_t)parts;
  *begin = (size_t)i * base + ((size_t)i < rem ? (size_t)i : rem);
  *end = *begin + base + ((size_t)i < rem ? 1 : 0);
}

#endif
