/* SPDX-License-Identifier: MIT */
/* How ZeRO cuts the flat parameter buffer over the ranks, and the traffic
 * each stage implies: one rule for the ranks (dist/dp_zero.c) and the
 * planner's per-rank figures (plan/). */
#ifndef ESMTRAIN_PARAM_SHARD_H
#define ESMTRAIN_PARAM_SHARD_H

#include <stdint.h>

#include "internal.h"

#define ESMT_ZERO_ALIGN 64 /* elements (256 bytes) per unit of a shard */

/* Split `total` elements into `world` shards: off[0..world], off[0] = 0,
 * off[world] = total, whole ESMT_ZERO_ALIGN units, as even as they allow
 * (the first units % world shards get one unit more). */
ESMT_HIDDEN void esmt_zero_split(uint64_t total, int world, uint64_t *off);
/* The largest shard of that split (rank 0's): what a rank must hold. */
ESMT_HIDDEN uint64_t esmt_zero_shard_max(uint64_t total, int world);

/* Bytes per update (P fp32 parameters, W ranks, k micro-batches per rank)
 * that each collective carries at ZeRO stage `level` (buffer sizes: stage
 * 0 all-reduces the gradients once; stage 1 reduce-scatters them once and
 * all-gathers the updated weights, `gathered` bytes each; stage 2
 * reduce-scatters every micro-batch's), and what one rank sends on a ring
 * for them: (W-1)/W of each half, an all-reduce being two halves. */
typedef struct esmt_zero_volume {
  uint64_t allreduced, reduce_scattered, allgathered, sent_per_rank;
} esmt_zero_volume;
ESMT_HIDDEN void esmt_zero_comm_volume(int level, uint64_t params, int world, int micro_batches,
                                       int gathered, esmt_zero_volume *v);
/* Whether stage `level` on `world` ranks with `esize`-byte compute weights
 * shards the fp32 master (stage 2 with a half copy, more than one rank),
 * and the bytes per parameter the update's all-gather carries then: the
 * half copy's (esize), else the fp32 master's (4). */
ESMT_HIDDEN int esmt_zero_shards_master(int level, int world, int esize);
/* Stage 3 (the model's parts part_bounds[0..n_parts], `esize`-byte
 * compute weights): stage 2's reduce-scatters, and the all-gathers of the
 * weights per part (memory/weight_gather.h: esmt_weight_gather_elems). */
ESMT_HIDDEN void esmt_zero3_comm_volume(const uint64_t *part_bounds, int n_parts, int world,
                                        int micro_batches, int esize, esmt_zero_volume *v);
ESMT_HIDDEN int esmt_zero_gathered_bytes(int level, int world, int esize);

#endif
