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
DECLARE(avx2)
DECLARE(avx512)

const cpu_isa_table *cpu_isa(void) {
  static const cpu_isa_table *chosen; /* a benign race: every thread picks the same */
  if (chosen) return chosen;
  const cpu_isa_table *best = &k_generic;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = &k_avx2;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    best = &k_avx512;
#endif
  const char *cap = getenv("ESMT_CPU_ISA");
  if (cap && strcmp(cap, "generic") == 0) best = &k_generic;
  if (cap && strcmp(cap, "avx2") == 0 && best == &k_avx512) best = &k_avx2;
  chosen = best;
  return chosen;
}
