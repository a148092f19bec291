/* SPDX-License-Identifier: MIT */
/* The MLM loader's global batch order (the loader's design: mlm_loader.c).
 *
 * Epoch e visits records through a keyed pseudo-random permutation (a
 * Feistel network with cycle walking: O(1) memory however large the
 * dataset). Consecutive windows of the permuted order are sorted by length
 * and cut into batches under the token budget (length bucketing), or
 * packed first-fit decreasing into rows of max_len tokens; a window's
 * batches are handed out in a shuffled order. The windows' batches, one
 * after another across windows and epochs, make one global stream that
 * does not depend on the world size; round k gives rank r the stream's
 * batch k * world + r, so a cursor of (epoch, window, batch), batch
 * counting the window's batches all ranks have taken, resumes the same
 * order with another number of ranks. With cluster sampling the
 * permutation runs over clusters and position i of epoch e becomes one
 * member of cluster permute(i), drawn by (seed, epoch, cluster). */
#define _POSIX_C_SOURCE 200809L
#include "batch_order.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW_BATCHES 32   /* batches' worth of samples sorted together */

/* A bijection of [0, n) keyed by (seed, epoch). */
static uint64_t permute(uint64_t i, uint64_t n, uint64_t seed, uint64_t epoch) {
  if (n <= 1) return i;
  int bits = 2;
  while ((1ull << bits) < n) bits++;
  if (bits & 1) bits++;
  const int half = bits / 2;
  const uint64_t mask = (1ull << half) - 1;
  uint64_t x = i;
  do { /* cycle-walk until the image falls inside [0, n) */
    uint64_t l = x >> half, r = x & mask;
    for (int round = 0; round < 4; round++) {
      uint64_t f = esmt_order_mix(r ^ esmt_order_mix(seed ^ (epoch << 8) ^ (uint64_t)round)) & mask;
      uint64_t nl = r;
      r = l ^ f;
      l = nl;
    }
    x = (l << half) | r;
  } while (x >= n);
  return x;
}

/* The record at position pos of epoch e: the permuted record, or a member
 * of the permuted cluster drawn uniformly (a function of seed, epoch and
 * cluster, so resuming draws the same). */
static esmt_status sample_at(const esmt_batch_order *bo, uint64_t pos, uint64_t e, uint64_t *id) {
  const uint64_t item = bo->o->shuffle ? permute(pos, bo->epoch_items, bo->o->seed, e) : pos;
  if (bo->clusters->fd < 0) {
    *id = item;
    return ESMT_OK;
  }
  uint64_t first = 0, size = 0;
  esmt_status st = esmt_cluster_index_size(bo->clusters, item, &first, &size);
  if (st) return st;
  esmt_order_rng r = esmt_order_rng_for(bo->o->seed, e, item, 0x636c7573746572ull /* "cluster" */);
  return esmt_cluster_index_member(bo->clusters, first + esmt_order_rng_next(&r) % size, id);
}

static uint32_t row_len(const esmt_batch_order *bo, uint32_t residues) {
  uint64_t full = (uint64_t)residues + 2;
  return (uint32_t)(full < (uint64_t)bo->o->max_len ? full : (uint64_t)bo->o->max_len);
}

static void unpacked_batches(esmt_batch_order *bo, int m);
static void pack_rows(esmt_batch_order *bo, int m);
static void shuffle_batches(esmt_batch_order *bo, uint64_t e, uint64_t w);

/* Build window w of epoch e: sort its samples by length, cut batches. */
static esmt_status build_window(esmt_batch_order *bo, uint64_t e, uint64_t w) {
  if (bo->built_epoch == (int64_t)e && bo->built_window == (int64_t)w) return ESMT_OK;
  const uint64_t n = bo->epoch_items, W = bo->window_size;
  uint64_t begin = w * W, end = begin + W < n ? begin + W : n;
  int m = (int)(end - begin);
  for (int i = 0; i < m; i++) {
    uint64_t id = 0;
    esmt_status st = sample_at(bo, begin + (uint64_t)i, e, &id);
    if (st) return st;
    uint32_t len;
    const uint8_t *res;
    st = esmt_shard_set_record(bo->set, id, &res, &len); /* index only: no page touched */
    if (st) return st;
    bo->samples[i] = id;
    bo->lengths[i] = row_len(bo, len);
  }
  /* insertion sort by length (stable; windows are small) */
  for (int i = 1; i < m; i++) {
    uint64_t s = bo->samples[i];
    uint32_t l = bo->lengths[i];
    int j = i - 1;
    while (j >= 0 && bo->lengths[j] > l) {
      bo->samples[j + 1] = bo->samples[j];
      bo->lengths[j + 1] = bo->lengths[j];
      j--;
    }
    bo->samples[j + 1] = s;
    bo->lengths[j + 1] = l;
  }
  if (bo->o->pack) {
    pack_rows(bo, m);
  } else {
    unpacked_batches(bo, m);
  }
  shuffle_batches(bo, e, w);
  bo->built_epoch = (int64_t)e;
  bo->built_window = (int64_t)w;
  return ESMT_OK;
}

/* greedy batches: rows x longest <= budget (and <= batch_rows) */
static void unpacked_batches(esmt_batch_order *bo, int m) {
  bo->nbatches = 0;
  for (int i = 0; i < m;) {
    int start = i, rows = 0;
    while (i < m) {
      uint64_t longest = bo->lengths[i];
      int cap_rows = bo->o->batch_rows > 0 ? bo->o->batch_rows : 1 << 30;
      if (rows > 0 &&
          ((uint64_t)(rows + 1) * longest > bo->o->tokens_per_batch || rows >= cap_rows))
        break;
      rows++;
      i++;
    }
    bo->bstart[bo->nbatches] = start;
    bo->bcount[bo->nbatches] = rows;
    bo->nbatches++;
  }
}

/* Rows per packed batch. */
static int packed_rows(const esmt_batch_order *bo) {
  if (bo->o->batch_rows > 0) return bo->o->batch_rows;
  uint64_t rows = bo->o->tokens_per_batch / (uint64_t)bo->o->max_len;
  return rows < 1 ? 1 : rows > (1u << 30) ? 1 << 30 : (int)rows;
}

/* First-fit decreasing of the m samples (sorted by length, ascending) into
 * rows of max_len tokens, then batches of packed_rows() consecutive rows. */
static void pack_rows(esmt_batch_order *bo, int m) {
  int nrows = 0, open = 0; /* rows before `open` cannot take even the shortest sample */
  int *row_of = bo->order; /* scratch until shuffle_batches */
  const uint32_t cap = (uint32_t)bo->o->max_len;
  for (int i = m - 1; i >= 0; i--) {
    while (open < nrows && bo->rfill[open] + bo->lengths[0] > cap) open++;
    int r = open;
    while (r < nrows && bo->rfill[r] + bo->lengths[i] > cap) r++;
    if (r == nrows) bo->rfill[nrows++] = 0;
    bo->rfill[r] += bo->lengths[i];
    row_of[i] = r;
  }
  /* items grouped by row, in placement order (longest first) */
  for (int r = 0; r < nrows; r++) bo->rcount[r] = 0;
  for (int i = 0; i < m; i++) bo->rcount[row_of[i]]++;
  for (int r = 0, at = 0; r < nrows; r++) {
    bo->rstart[r] = at;
    at += bo->rcount[r];
    bo->rcount[r] = 0;
  }
  for (int i = m - 1; i >= 0; i--) {
    const int r = row_of[i];
    bo->items[bo->rstart[r] + bo->rcount[r]++] = i;
  }
  const int B = packed_rows(bo);
  bo->nbatches = 0;
  for (int r = 0; r < nrows; r += B) {
    bo->bstart[bo->nbatches] = r;
    bo->bcount[bo->nbatches] = nrows - r < B ? nrows - r : B;
    bo->nbatches++;
  }
}

/* The window's batches in a shuffled order: its part of the global stream. */
static void shuffle_batches(esmt_batch_order *bo, uint64_t e, uint64_t w) {
  int *all = bo->order;
  for (int j = 0; j < bo->nbatches; j++) all[j] = j;
  if (bo->o->shuffle) {
    esmt_order_rng r = esmt_order_rng_for(bo->o->seed, e, w, 0xB47C);
    for (int j = bo->nbatches - 1; j > 0; j--) {
      int k = (int)(esmt_order_rng_next(&r) % (uint64_t)(j + 1));
      int t = all[j]; all[j] = all[k]; all[k] = t;
    }
  }
}

static uint64_t windows_per_epoch(const esmt_batch_order *bo) {
  return (bo->epoch_items + bo->window_size - 1) / bo->window_size;
}

int esmt_batch_order_init(esmt_batch_order *bo, const esmt_loader_options *o,
                          const esmt_shard_set *set, const esmt_cluster_index *clusters,
                          uint64_t epoch_items) {
  bo->o = o;
  bo->set = set;
  bo->clusters = clusters;
  bo->epoch_items = epoch_items;
  bo->built_epoch = bo->built_window = -1;
  uint64_t rows = o->batch_rows > 0 ? (uint64_t)o->batch_rows
                                    : (o->tokens_per_batch / (uint64_t)o->max_len + 1);
  bo->window_size = rows * WINDOW_BATCHES;
  if (bo->window_size > epoch_items) bo->window_size = epoch_items;
  size_t W = (size_t)bo->window_size;
  bo->samples = malloc(W * sizeof *bo->samples);
  bo->lengths = malloc(W * sizeof *bo->lengths);
  bo->bstart = malloc(W * sizeof *bo->bstart);
  bo->bcount = malloc(W * sizeof *bo->bcount);
  bo->order = malloc(W * sizeof *bo->order);
  if (o->pack) {
    bo->items = malloc(W * sizeof *bo->items);
    bo->rstart = malloc(W * sizeof *bo->rstart);
    bo->rcount = malloc(W * sizeof *bo->rcount);
    bo->rfill = malloc(W * sizeof *bo->rfill);
  }
  if (!bo->samples || !bo->lengths || !bo->bstart || !bo->bcount || !bo->order ||
      (o->pack && (!bo->items || !bo->rstart || !bo->rcount || !bo->rfill)))
    return -1;
  return 0;
}

void esmt_batch_order_free(esmt_batch_order *bo) {
  free(bo->samples);
  free(bo->lengths);
  free(bo->bstart);
  free(bo->bcount);
  free(bo->order);
  free(bo->items);
  free(bo->rstart);
  free(bo->rcount);
  free(bo->rfill);
}

/* Move p k batches along the stream, building the windows it crosses; p
 * then names an existing batch and its window is the one built, or, when
 * `lazy` and p lands just past a window's last batch, that window's end
 * (so the epoch a loader reports is still that of the batch it handed out
 * last, until the next one). At the end of the last epoch (data.epochs > 0)
 * *past_end is set and *left says how many of the k steps had no batch to
 * land on. */
static esmt_status stream_advance(esmt_batch_order *bo, esmt_batch_pos *p, uint64_t k, int lazy,
                                  int *past_end, uint64_t *left) {
  *past_end = 0;
  for (;;) {
    if (bo->o->epochs > 0 && p->epoch >= (uint64_t)bo->o->epochs) {
      *past_end = 1;
      *left = k;
      return ESMT_OK;
    }
    esmt_status st = build_window(bo, p->epoch, p->window);
    if (st) return st;
    const uint64_t rest = (uint64_t)(bo->nbatches - p->batch);
    if (rest > k || (lazy && rest == k && k > 0)) {
      p->batch += (int)k;
      return ESMT_OK;
    }
    k -= rest;
    p->batch = 0;
    if (++p->window >= windows_per_epoch(bo)) {
      p->window = 0;
      p->epoch++;
    }
  }
}

/* Where this rank's batch of the round at `round` is: `rank` batches on,
 * or, past the end of the last epoch, as many from that epoch's start
 * (*wrapped set). */
static esmt_status rank_batch(esmt_batch_order *bo, esmt_batch_pos round, esmt_batch_pos *mine,
                              int *wrapped) {
  int past_end = 0;
  uint64_t left = (uint64_t)bo->o->rank;
  *mine = round;
  esmt_status st = stream_advance(bo, mine, left, 0, &past_end, &left);
  *wrapped = past_end;
  while (!st && past_end) { /* each pass lands on at least one batch: left shrinks */
    esmt_batch_pos first = {(uint64_t)bo->o->epochs - 1, 0, 0};
    *mine = first;
    st = stream_advance(bo, mine, left, 0, &past_end, &left);
  }
  return st;
}

esmt_status esmt_batch_order_locate(esmt_batch_order *bo, esmt_batch_pos *round,
                                    esmt_batch_pos *mine, int *wrapped) {
  int past_end = 0;
  uint64_t left = 0;
  esmt_status st = stream_advance(bo, round, 0, 0, &past_end, &left);
  if (st) return st;
  if (past_end) return esmt_fail(ESMT_ERR_STATE, "loader: all %d epochs are done", bo->o->epochs);
  return rank_batch(bo, *round, mine, wrapped);
}

esmt_status esmt_batch_order_next_round(esmt_batch_order *bo, esmt_batch_pos *round,
                                        esmt_batch_pos mine, int wrapped) {
  /* world batches on (the end of the data: the last epoch done), counted
   * from this rank's batch, whose window is the one built */
  int past_end = 0;
  uint64_t left = 0, on = (uint64_t)bo->o->world;
  if (!wrapped) {
    *round = mine;
    on -= (uint64_t)bo->o->rank;
  }
  esmt_status st = stream_advance(bo, round, on, 1, &past_end, &left);
  if (st) return st;
  if (past_end) *round = (esmt_batch_pos){(uint64_t)bo->o->epochs, 0, 0};
  return ESMT_OK;
}

esmt_status esmt_batch_order_save(const esmt_batch_order *bo, esmt_batch_pos p, char *buf,
                                  size_t cap) {
  /* "pack" only when packing: unpacked cursors keep their old text; "global":
   * batch counts the window's batches all ranks have taken together */
  int n = snprintf(buf, cap, "{\"epoch\":%llu,\"window\":%llu,\"batch\":%d,\"global\":1,"
                   "\"seed\":%llu,\"records\":%llu%s%s}", (unsigned long long)p.epoch,
                   (unsigned long long)p.window, p.batch, (unsigned long long)bo->o->seed,
                   (unsigned long long)bo->set->records, bo->o->pack ? ",\"pack\":1" : "",
                   bo->clusters->fd >= 0 ? ",\"sampling\":\"cluster\"" : "");
  if (n < 0 || (size_t)n >= cap)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_loader_save_cursor: buffer too small");
  return ESMT_OK;
}

/* The most epochs a cursor may have passed when data.epochs is 0 (no end):
 * 2^31 passes over even one record are far beyond any run; a larger count
 * is a damaged checkpoint. */
#define CURSOR_MAX_EPOCH ((uint64_t)INT32_MAX)

/* Cursor field `key` of `cur` as an integer in [0, max]; else refused
 * naming the field, its value and the bound (`bound` says what it is). */
static esmt_status cursor_field(json_t *cur, const char *key, uint64_t max, const char *bound,
                                uint64_t *out) {
  const char *fn = "esmt_loader_restore_cursor";
  json_t *v = json_object_get(cur, key);
  if (!json_is_integer(v))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: the cursor's %s is %s: the checkpoint is damaged",
                     fn, key, v ? "not an integer" : "missing");
  const json_int_t x = json_integer_value(v);
  if (x < 0 || (uint64_t)x > max)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: the cursor's %s is %lld, out of range 0..%llu (%s): "
                     "the checkpoint is damaged or not of this dataset", fn, key, (long long)x,
                     (unsigned long long)max, bound);
  *out = (uint64_t)x;
  return ESMT_OK;
}

esmt_status esmt_batch_order_restore(esmt_batch_order *bo, const char *json, esmt_batch_pos *p) {
  const char *fn = "esmt_loader_restore_cursor";
  json_t *cur = json_loads(json, JSON_REJECT_DUPLICATES, NULL);
  if (!json_is_object(cur)) {
    json_decref(cur);
    return esmt_fail(ESMT_ERR_FORMAT, "%s: not a loader cursor: %.80s", fn, json);
  }
  uint64_t epoch = 0, window = 0, batch = 0, seed = 0, records = 0;
  esmt_status st = cursor_field(cur, "seed", UINT64_MAX >> 1, "a seed", &seed);
  if (!st) st = cursor_field(cur, "records", UINT64_MAX >> 1, "a record count", &records);
  if (!st && (seed != bo->o->seed || records != bo->set->records))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: the cursor is for another dataset or seed (records "
                   "%llu vs %llu, seed %llu vs %llu)", fn, (unsigned long long)records,
                   (unsigned long long)bo->set->records, (unsigned long long)seed,
                   (unsigned long long)bo->o->seed);
  json_t *pack = json_object_get(cur, "pack"), *sampling = json_object_get(cur, "sampling");
  const int packed = json_is_integer(pack) && json_integer_value(pack) == 1;
  if (!st && packed != (bo->o->pack != 0))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: the cursor is for %s batches but the loader makes %s "
                   "ones (data.pack changed since the checkpoint)", fn,
                   packed ? "packed" : "unpacked", bo->o->pack ? "packed" : "unpacked");
  const int by_cluster = json_is_string(sampling) &&
                         !strcmp(json_string_value(sampling), "cluster");
  if (!st && by_cluster != (bo->clusters->fd >= 0))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: the cursor is for sampling by %s but the loader "
                   "samples by %s (data.sampling changed since the checkpoint)", fn,
                   by_cluster ? "cluster" : "sequence", bo->clusters->fd >= 0 ? "cluster" :
                   "sequence");
  /* the position: an epoch that can have been reached, a window inside the
   * epoch, a batch inside the window (== its count: the window is done) */
  char bound[160];
  if (bo->o->epochs > 0)
    snprintf(bound, sizeof bound, "data.epochs is %d", bo->o->epochs);
  else
    snprintf(bound, sizeof bound, "at most 2^31 - 1 passes");
  if (!st) st = cursor_field(cur, "epoch", bo->o->epochs > 0 ? (uint64_t)bo->o->epochs :
                             CURSOR_MAX_EPOCH, bound, &epoch);
  const uint64_t windows = windows_per_epoch(bo);
  snprintf(bound, sizeof bound, "an epoch of %llu %s is %llu window(s)",
           (unsigned long long)bo->epoch_items, bo->clusters->fd >= 0 ? "clusters" : "records",
           (unsigned long long)windows);
  if (!st) st = cursor_field(cur, "window", windows - 1, bound, &window);
  if (!st) st = build_window(bo, epoch, window);
  /* A cursor without "global" (written before the ranks shared one stream)
   * counts one rank's batches of a window split j -> rank j % world: the
   * ranks together had taken world times as many (the same world size is
   * exact; another one is not, as it was not then). */
  json_t *global = json_object_get(cur, "global");
  const int per_rank = !(json_is_integer(global) && json_integer_value(global) == 1);
  const uint64_t most = per_rank ? (uint64_t)((bo->nbatches + bo->o->world - 1) / bo->o->world)
                                 : (uint64_t)bo->nbatches;
  snprintf(bound, sizeof bound, "window %llu of epoch %llu has %d batch(es)%s",
           (unsigned long long)window, (unsigned long long)epoch, bo->nbatches,
           per_rank ? ", split over the ranks" : "");
  if (!st) st = cursor_field(cur, "batch", most, bound, &batch);
  json_decref(cur);
  if (st) return st;
  if (per_rank) {
    batch *= (uint64_t)bo->o->world;
    if (batch > (uint64_t)bo->nbatches) batch = (uint64_t)bo->nbatches;
  }
  p->epoch = epoch;
  p->window = window;
  p->batch = (int)batch;
  return ESMT_OK;
}
