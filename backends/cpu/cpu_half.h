/* SPDX-License-Identifier: MIT */
/* Half-precision activations (F16, BF16) on the CPU: every op does its
 * math in fp32, so half data is widened into per-thread fp32 scratch a row
 * (or block) at a time, the fp32 kernel runs on it, and half results are
 * rounded back (nearest even; fp16 overflow gives inf). For F32 the
 * helpers hand out the data itself, so the fp32 path is unchanged. */
#ifndef ESMTRAIN_CPU_HALF_H
#define ESMTRAIN_CPU_HALF_H

#include <stddef.h>
#include <string.h>

#include "cpu_ops.h"

/* Elements per stack block in the elementwise ops. */
#define CPU_BLOCK 512

/* 1 for F32, F16 and BF16, the dtypes activations may have. */
static inline int cpu_act_dtype(esmtb_dtype dt) {
  return dt == ESMTB_F32 || dt == ESMTB_F16 || dt == ESMTB_BF16;
}
static inline size_t cpu_dtype_size(esmtb_dtype dt) { return dt == ESMTB_F32 ? 4 : 2; }

/* Refuse anything but an activation dtype. */
#define CPU_REQUIRE_ACT(dt, op)                                                       \
  do {                                                                                \
    if (!cpu_act_dtype(dt))                                                           \
      return cpu_fail(ESMTB_ERR_UNSUPPORTED, "cpu backend: %s supports dtypes f32, f16 and bf16, not %d", op, \
                      (int)(dt));                                                     \
  } while (0)

/* dst[i] = element first + i of src (dtype dt) as fp32, for i < n. */
CPU_HIDDEN void cpu_half_load(const void *src, esmtb_dtype dt, size_t first, float *dst, long n);
/* Element first + i of dst (dtype dt) = src[i] rounded, for i < n. */
CPU_HIDDEN void cpu_half_store(const float *src, void *dst, esmtb_dtype dt, size_t first, long n);

/* fp32 view of elements [first, first + n) of p: p itself for F32, else
 * `scratch` (n floats) holding them widened. */
static inline const float *cpu_in(const void *p, esmtb_dtype dt, size_t first, long n,
                                  float *scratch) {
  if (dt == ESMTB_F32) return (const float *)p + first;
  cpu_half_load(p, dt, first, scratch, n);
  return scratch;
}

/* Where an op writes fp32 results for elements [first, ...) of p: p itself
 * for F32, else scratch, which cpu_out_done() then rounds into p. */
static inline float *cpu_out(void *p, esmtb_dtype dt, size_t first, float *scratch) {
  return dt == ESMTB_F32 ? (float *)p + first : scratch;
}
static inline void cpu_out_done(void *p, esmtb_dtype dt, size_t first, const float *scratch,
                                long n) {
  if (dt != ESMTB_F32) cpu_half_store(scratch, p, dt, first, n);
}

/* dst = elements [first, first + n) of p as fp32 (an inline copy for F32). */
static inline void cpu_load(const void *p, esmtb_dtype dt, size_t first, float *dst, long n) {
  if (dt == ESMTB_F32) memcpy(dst, (const float *)p + first, (size_t)n * sizeof *dst);
  else cpu_half_load(p, dt, first, dst, n);
}

/* Loops that convert short pieces inside (column blocks) are written as
 * CPU_FORCE_INLINE functions of the dtype and called through CPU_BY_DTYPE,
 * so that the F32 copy has no conversion call in it and stays as fast as
 * before half dtypes existed. */
#define CPU_FORCE_INLINE static inline __attribute__((always_inline))
#define CPU_BY_DTYPE(dt, f, ...) \
  ((dt) == ESMTB_F32 ? f(ESMTB_F32, __VA_ARGS__) : f((dt), __VA_ARGS__))

/* Sets elements [first, first + n) of p to +0. */
static inline void cpu_zero(void *p, esmtb_dtype dt, size_t first, size_t n) {
  const size_t es = cpu_dtype_size(dt);
  memset((char *)p + first * es, 0, n * es);
}

/* Per-thread fp32 scratch: `threads` slices of `per` floats, each 64-byte
 * aligned (free() it). NULL when out of memory. */
CPU_HIDDEN float *cpu_scratch_alloc(int threads, size_t per);
static inline float *cpu_scratch_slice(float *base, size_t per, int thread) {
  return base + (size_t)thread * ((per + 15) / 16 * 16);
}

#endif
