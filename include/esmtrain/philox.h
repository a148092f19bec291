/* SPDX-License-Identifier: MIT */
/* The counter-based generator behind the backends' dropout op
 * (esmtb_dropout_args, esmtrain/backend.h), so that every backend draws
 * the same mask from the same key: Philox4x32-10 (Salmon et al., "Parallel
 * random numbers: as easy as 1, 2, 3", SC 2011; Random123's philox4x32).
 * Header-only, C and CUDA: a plugin includes it without linking the core.
 *
 * Element i of a tensor takes word i mod 4 of
 *     philox4x32_10(counter = {g, g >> 32, stream, stream >> 32},
 *                   key = {seed, seed >> 32}),  g = i / 4,
 * and is dropped when that word is below esmt_dropout_threshold(p). The
 * mask is a function of (seed, stream, i) alone: nothing is stored, and a
 * backward pass redraws the forward's mask. */
#ifndef ESMTRAIN_PHILOX_H
#define ESMTRAIN_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__)
#  define ESMT_PHILOX_FN static inline __host__ __device__
#else
#  define ESMT_PHILOX_FN static inline
#endif

/* One Philox round on the counter (x0, x1, x2, x3) with key (k0, k1). */
ESMT_PHILOX_FN void esmt_philox_round(uint32_t *x0, uint32_t *x1, uint32_t *x2, uint32_t *x3,
                                      uint32_t k0, uint32_t k1) {
  const uint64_t p0 = (uint64_t)0xD2511F53u * *x0, p1 = (uint64_t)0xCD9E8D57u * *x2;
  const uint32_t c1 = *x1, c3 = *x3;
  *x0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
  *x1 = (uint32_t)p1;
  *x2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
  *x3 = (uint32_t)p0;
}

/* Philox4x32-10: the counter (x0, x1, x2, x3) becomes its four random
 * words. The rounds are written out, on scalars, so that a loop over
 * counters vectorises. */
ESMT_PHILOX_FN void esmt_philox4x32_10(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3,
                                       uint32_t k0, uint32_t k1) {
  const uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  uint32_t x0 = *c0, x1 = *c1, x2 = *c2, x3 = *c3;
  esmt_philox_round(&x0, &x1, &x2, &x3, k0, k1);
  esmt_philox_round(&x0, &x1, &x2, &x3, k0 + 1 * w0, k1 + 1 * w1);
  esmt_philox_round(&x0, &x1, &x2, &x3, k0 + 2 * w0, k1 + 2 * w1);
  esmt_philox_round(&x0, &x1, &x2, &x3, k0 + 3 * w0, k1 + 3 * w1);
  esmt_philox_round(&x0, &x1, &x2, &x3, k0 + 4 * w0, k1 + 4 * w1);
  esmt_philox_round(&x0, &x1, &x2, &x3, k0 + 5 * w0, k1 + 5 * w1);
  esmt_philox_round(&x0, &x1, &x2, &x3, k0 + 6 * w0, k1 + 6 * w1);
  esmt_philox_round(&x0, &x1, &x2, &x3, k0 + 7 * w0, k1 + 7 * w1);
  esmt_philox_round(&x0, &x1, &x2, &x3, k0 + 8 * w0, k1 + 8 * w1);
  esmt_philox_round(&x0, &x1, &x2, &x3, k0 + 9 * w0, k1 + 9 * w1);
  *c0 = x0;
  *c1 = x1;
  *c2 = x2;
  *c3 = x3;
}

/* The four words of elements 4g .. 4g+3 (the layout above). */
ESMT_PHILOX_FN void esmt_philox_words(uint64_t seed, uint64_t stream, uint64_t g, uint32_t w[4]) {
  w[0] = (uint32_t)g;
  w[1] = (uint32_t)(g >> 32);
  w[2] = (uint32_t)stream;
  w[3] = (uint32_t)(stream >> 32);
  esmt_philox4x32_10(&w[0], &w[1], &w[2], &w[3], (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* Words below this value drop: p in units of 2^-32 (0 keeps everything). */
ESMT_PHILOX_FN uint32_t esmt_dropout_threshold(double p) {
  if (!(p > 0.0)) return 0;
  if (p >= 1.0) return 0xFFFFFFFFu;
  return (uint32_t)(p * 4294967296.0);
}

/* Whether element i is kept. */
ESMT_PHILOX_FN int esmt_dropout_keep(uint64_t seed, uint64_t stream, uint64_t i,
                                     uint32_t threshold) {
  uint32_t w[4];
  esmt_philox_words(seed, stream, i >> 2, w);
  return w[i & 3] >= threshold;
}

#endif /* ESMTRAIN_PHILOX_H */
