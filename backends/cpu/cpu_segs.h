/* SPDX-License-Identifier: MIT */
/* Packed rows (ABI 1.3, esmtb_segments): argument checks and the
 * token -> segment map shared by the embedding and attention ops. */
#ifndef ESMTRAIN_CPU_SEGS_H
#define ESMTRAIN_CPU_SEGS_H

#include <stddef.h>
#include <string.h>

#include "cpu_ops.h"

/* Copy an args struct of `size` bytes (its struct_size) into `dst` of
 * `cap` bytes, zero-filling fields past what the caller knows: an older
 * caller's args then read as nseg == 0 (right-padded rows). */
static inline void cpu_args_copy(void *dst, size_t cap, const void *src, uint32_t size) {
  memset(dst, 0, cap);
  memcpy(dst, src, size < cap ? size : cap);
}

/* Segments inside [0, B*T), each inside one row, ascending, disjoint,
 * len >= 1, and max_len >= every len; else an error naming the segment. */
CPU_HIDDEN esmtb_status cpu_segs_check(const esmtb_segments *s, int B, int T, const char *op);

/* owner[r] = the segment of flattened token r, or -1 (padding), for
 * r < B*T; NULL when out of memory. Free with free(). */
CPU_HIDDEN int32_t *cpu_segs_owner(const esmtb_segments *s, int B, int T);

#endif
