/* SPDX-License-Identifier: MIT */
/* Work splitting shared by the ops. (The vector math the kernels use is in
 * cpu_vec.h.) */
#ifndef ESMTRAIN_CPU_MATH_H
#define ESMTRAIN_CPU_MATH_H

#include <stddef.h>

/* Static split of [0, n) into `parts` contiguous chunks: chunk `i`. The
 * split depends only on (n, parts), which keeps reductions deterministic. */
static inline void cpu_chunk(size_t n, int parts, int i, size_t *begin, size_t *end) {
  size_t base = n / (size_t)parts, rem = n % (size_t)parts;
  *begin = (size_t)i * base + ((size_t)i < rem ? (size_t)i : rem);
  *end = *begin + base + ((size_t)i < rem ? 1 : 0);
}

#endif
