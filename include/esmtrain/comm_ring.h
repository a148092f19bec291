/* SPDX-License-Identifier: MIT */
/* The summation order every communicator shares, so that the TCP ring and
 * every communication plugin give the same bits (esmtrain/comm_plugin.h).
 * Header-only: a plugin includes it without linking the core.
 *
 * A buffer of `count` elements is cut into W blocks: block k is
 * [off[k], off[k+1]) with caller's offsets (ZeRO shards), or the balanced
 * split esmt_comm_block_start gives. The ring reduce-scatter with a given
 * shift starts block k at rank (k + shift) mod W and adds the next ranks'
 * values one by one in ring order:
 *     sum = (((x_first + x_first+1) + x_first+2) + ... + x_first+W-1)
 * and leaves the finished sum at the last rank of that order, the block's
 * owner (k + shift - 1) mod W. shift 0 is all-reduce (the all-gather half
 * then copies each block from its owner); shift 1 is ZeRO-1, where rank r
 * owns block r. */
#ifndef ESMTRAIN_COMM_RING_H
#define ESMTRAIN_COMM_RING_H

#include <stddef.h>
#include <stdint.h>

/* Element where balanced block j of count over W blocks starts. */
static inline size_t esmt_comm_block_start(size_t count, int world, int j) {
  size_t base = count / (size_t)world, rem = count % (size_t)world;
  return (size_t)j * base + ((size_t)j < rem ? (size_t)j : rem);
}

/* Block k's element range [*lo, *hi): off (W + 1 offsets) or balanced. */
static inline void esmt_comm_block(const uint64_t *off, size_t count, int world, int k,
                                   size_t *lo, size_t *hi) {
  *lo = off ? (size_t)off[k] : esmt_comm_block_start(count, world, k);
  *hi = off ? (size_t)off[k + 1] : esmt_comm_block_start(count, world, k + 1);
}

/* The rank whose value block k's sum starts with, and the block's owner. */
static inline int esmt_comm_block_first(int world, int k, int shift) {
  return ((k + shift) % world + world) % world;
}
static inline int esmt_comm_block_owner(int world, int k, int shift) {
  return ((k + shift - 1) % world + world) % world;
}

/* dst[i] = dst[i] + src[i] for dtype 1 (f32), 2 (f64), 3 (i64, wrapping). */
static inline void esmt_comm_reduce_into(void *dst, const void *src, size_t n, int dtype) {
  if (dtype == 1) {
    float *d = (float *)dst;
    const float *s = (const float *)src;
    for (size_t i = 0; i < n; i++) d[i] += s[i];
  } else if (dtype == 2) {
    double *d = (double *)dst;
    const double *s = (const double *)src;
    for (size_t i = 0; i < n; i++) d[i] += s[i];
  } else {
    uint64_t *d = (uint64_t *)dst; /* unsigned: wrap-around is defined */
    const uint64_t *s = (const uint64_t *)src;
    for (size_t i = 0; i < n; i++) d[i] += s[i];
  }
}

#endif
