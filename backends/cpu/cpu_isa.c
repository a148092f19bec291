/* SPDX-License-Identifier: MIT */
/* Run-time choice of the kernel variant (see isa_kernels.h). */
#include <stdlib.h>
#include <string.h>

#include "isa_kernels.h"

#define DECLARE(isa)                                                   \
  extern const cpu_isa_attention cpu_isa_attention_##isa;             \
  extern const cpu_isa_elementwise cpu_isa_elementwise_##isa;         \
  static const cpu_isa_table k_##isa = {#isa, &cpu_isa_attention_##isa, \
                                        &cpu_isa_elementwise_##isa};
DECLARE(generic)
/* The wider variants exist unless the build left them out (ESMT_CPU_ISAS). */
#ifdef ESMT_CPU_HAVE_AVX2
DECLARE(avx2)
static const cpu_isa_table *const p_avx2 = &k_avx2;
#else
static const cpu_isa_table *const p_avx2 = NULL;
#endif
#ifdef ESMT_CPU_HAVE_AVX512
DECLARE(avx512)
static const cpu_isa_table *const p_avx512 = &k_avx512;
#else
static const cpu_isa_table *const p_avx512 = NULL;
#endif

const cpu_isa_table *cpu_isa(void) {
  static const cpu_isa_table *chosen; /* a benign race: every thread picks the same */
  if (chosen) return chosen;
  const cpu_isa_table *best = &k_generic;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (p_avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = p_avx2;
  if (p_avx512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    best = p_avx512;
#endif
  const char *cap = getenv("ESMT_CPU_ISA");
  if (cap && strcmp(cap, "generic") == 0) best = &k_generic;
  if (cap && strcmp(cap, "avx2") == 0 && best == p_avx512 && p_avx2) best = p_avx2;
  chosen = best;
  return chosen;
}
