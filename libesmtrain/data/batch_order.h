/* SPDX-License-Identifier: MIT */
/* The MLM loader's global batch order (batch_order.c): the windows of each
 * epoch's permuted records (or clusters) cut into batches, one stream that
 * does not depend on the world size, the ranks' share of each round, and
 * the world-free cursor that resumes the stream at another world size. The
 * loader (mlm_loader.c) turns the batch a position names into tokens. */
#ifndef ESMTRAIN_BATCH_ORDER_H
#define ESMTRAIN_BATCH_ORDER_H

#include <stdint.h>

#include "esmtrain/esmtrain.h"
#include "cluster_index.h"
#include "shard_set.h"

/* The loader's random numbers: everything random - permutation, crops,
 * masks - is a function of (seed, epoch, record), so a cursor restores the
 * exact stream. Inline: the masking draws one per residue. */
static inline uint64_t esmt_order_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

typedef struct esmt_order_rng { uint64_t s; } esmt_order_rng;
static inline uint64_t esmt_order_rng_next(esmt_order_rng *r) {
  return esmt_order_mix(r->s += 0x9E3779B97F4A7C15ull);
}
static inline double esmt_order_rng_unit(esmt_order_rng *r) {
  return (double)(esmt_order_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}
static inline esmt_order_rng esmt_order_rng_for(uint64_t seed, uint64_t a, uint64_t b,
                                                uint64_t c) {
  const uint64_t ab = a * 0x9E3779B97F4A7C15ull ^ esmt_order_mix(b + 0x632BE59BD9B4E019ull);
  esmt_order_rng r = {esmt_order_mix(seed ^ esmt_order_mix(ab ^ esmt_order_mix(c)))};
  return r;
}

/* A place in the global stream: batch `batch` of window `window` of epoch
 * `epoch` (in the window's shuffled order). */
typedef struct esmt_batch_pos {
  uint64_t epoch, window;
  int batch;
} esmt_batch_pos;

typedef struct esmt_batch_order {
  const esmt_loader_options *o;       /* the loader's (tokens_per_batch 0 made unlimited) */
  const esmt_shard_set *set;
  const esmt_cluster_index *clusters; /* cluster sampling: the split's index (fd -1: off) */
  uint64_t epoch_items;      /* what an epoch visits: records, or clusters */
  uint64_t window_size;      /* samples per window */
  /* the window built last */
  uint64_t *samples;         /* record ids, sorted by length */
  uint32_t *lengths;         /* row length (tokens incl. cls/eos, cropped) */
  int *bstart, *bcount, *order, nbatches;
  /* packed: batch j is rows [bstart, bstart + bcount); row r holds the
   * samples items[rstart[r] ..] (rcount of them), rfill tokens */
  int *items, *rstart, *rcount;
  uint32_t *rfill;
  int64_t built_epoch, built_window;
} esmt_batch_order;

/* Size the windows for the options and allocate them; 0, or -1 when out
 * of memory (esmt_batch_order_free then frees what was allocated). */
ESMT_HIDDEN int esmt_batch_order_init(esmt_batch_order *b, const esmt_loader_options *o,
                                      const esmt_shard_set *set,
                                      const esmt_cluster_index *clusters, uint64_t epoch_items);
ESMT_HIDDEN void esmt_batch_order_free(esmt_batch_order *b);

/* This rank's batch of the round at *round: *round moved onto a batch (an
 * ESMT_ERR_STATE error past the last epoch), *mine `rank` batches on or,
 * past the end of the last epoch, as many from that epoch's start
 * (*wrapped set). *mine's window is then the one built: batch
 * b->order[mine->batch] of it. */
ESMT_HIDDEN esmt_status esmt_batch_order_locate(esmt_batch_order *b, esmt_batch_pos *round,
                                                esmt_batch_pos *mine, int *wrapped);
/* The round after the one *round and `mine` (from esmt_batch_order_locate)
 * name: world batches on, or the end of the data. */
ESMT_HIDDEN esmt_status esmt_batch_order_next_round(esmt_batch_order *b, esmt_batch_pos *round,
                                                    esmt_batch_pos mine, int wrapped);

/* The world-free cursor of position p, as JSON text. */
ESMT_HIDDEN esmt_status esmt_batch_order_save(const esmt_batch_order *b, esmt_batch_pos p,
                                              char *buf, size_t cap);
/* The position a cursor names, every field checked against this dataset,
 * seed and options; builds the window it names. */
ESMT_HIDDEN esmt_status esmt_batch_order_restore(esmt_batch_order *b, const char *json,
                                                 esmt_batch_pos *p);

#endif
