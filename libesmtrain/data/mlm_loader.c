/* SPDX-License-Identifier: MIT */
/* The MLM batch loader over memory-mapped shards.
 *
 * Order: epoch e visits records through a keyed pseudo-random permutation
 * (a Feistel network with cycle walking: O(1) memory however large the
 * dataset). Consecutive windows of the permuted order are sorted by
 * length and cut into batches under the token budget (length bucketing),
 * and a window's batches are handed out in a shuffled order. The windows'
 * batches, one after another across windows and epochs, make one global
 * stream that does not depend on the world size; the ranks take it in
 * rounds: round k gives rank r the stream's batch k * world + r. So N
 * ranks together see the batches one process would (data parallelism
 * equals gradient accumulation), and the position of the next round is
 * the same on every rank and at every world size: a cursor of (epoch,
 * window, batch), batch counting the window's batches all ranks have
 * taken, resumes the same global order with another number of ranks.
 * Only the last round of the last epoch (data.epochs > 0) can run short
 * of batches; its ranks without one take the last epoch's first batches
 * again, so every rank gets the same number of batches and no rank waits
 * at a collective for one that ran out (as PyTorch's DistributedSampler
 * pads). Everything random - permutation, crops, masks - is a function of
 * (seed, epoch, record), so the cursor restores the exact stream.
 *
 * Packing (options.pack): a window's samples are instead placed first-fit
 * decreasing into rows of max_len tokens, each sample keeping its own
 * cls/eos (and crop), and consecutive rows make batches of B rows; the
 * batch then carries the segments (esmt_batch.num_segments). Batch order,
 * the rounds and cursors work on these batches exactly as above.
 *
 * Cluster sampling (options.sampling, a dataset ingested with clusters):
 * the permutation runs over clusters instead of records, and position i
 * of epoch e becomes one member of cluster permute(i), drawn uniformly by
 * (seed, epoch, cluster). Windows, batches, packing, the rank split and
 * cursors are unchanged; an epoch is one pass over the clusters. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "cluster_index.h"
#include "dataset_manifest.h"
#include "shard_set.h"

#define WINDOW_BATCHES 32   /* batches' worth of samples sorted together */

/* One batch's host arrays, grown as needed. */
typedef struct out_buf {
  int32_t *tok, *lab;        /* [cap] */
  int32_t *seg_start, *seg_len; /* [seg_cap] (packed) */
  size_t cap, seg_cap;
} out_buf;

struct esmt_loader {
  esmt_loader_options o;
  char *dir;
  esmt_shard_set set;
  esmt_cluster_index clusters; /* cluster sampling: the split's index (fd -1: off) */
  uint64_t epoch_items;      /* what an epoch visits: records, or clusters */
  uint64_t window_size;      /* samples per window */
  /* position of the next round: the window's batches all ranks have taken */
  uint64_t epoch, window;
  int batch;
  uint64_t handed_epoch;     /* of the batch handed out last: the stats' epoch */
  /* the current window */
  uint64_t *samples;         /* record ids, sorted by length */
  uint32_t *lengths;         /* row length (tokens incl. cls/eos, cropped) */
  int *bstart, *bcount, *order, nbatches;
  /* packed: batch j is rows [bstart, bstart + bcount); row r holds the
   * samples items[rstart[r] ..] (rcount of them), rfill tokens */
  int *items, *rstart, *rcount;
  uint32_t *rfill;
  int64_t built_epoch, built_window;
  /* output of the synchronous path */
  out_buf out;
  esmt_loader_stats stats;
  /* background prefetch (prefetch > 0): a ring of prepared batches */
  struct prefetch *pf;
};

/* One prepared batch and the position after it (for cursors). */
typedef struct slot {
  out_buf out;
  esmt_batch batch;
  esmt_status status;
  char message[512];
  uint64_t epoch, window;
  int next_batch;
  uint64_t batch_epoch;     /* the batch's own epoch */
  uint64_t real, padded;
} slot;

struct prefetch {
  pthread_t thread;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t can_fill, can_take;
  slot *slots;
  int depth, head, count, stop, running;
  int held;                 /* the slot handed to the caller, -1 if none */
  uint64_t epoch, window;   /* position after the last batch handed out */
  int batch;
  uint64_t handed_epoch;    /* that batch's epoch */
};

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

typedef struct rng { uint64_t s; } rng;
static uint64_t rng_next(rng *r) { return mix(r->s += 0x9E3779B97F4A7C15ull); }
static double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }
static rng rng_for(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  rng r = {mix(seed ^ mix(a * 0x9E3779B97F4A7C15ull ^ mix(b + 0x632BE59BD9B4E019ull) ^ mix(c)))};
  return r;
}

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
      uint64_t f = mix(r ^ mix(seed ^ (epoch << 8) ^ (uint64_t)round)) & mask;
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
static esmt_status sample_at(const esmt_loader *L, uint64_t pos, uint64_t e, uint64_t *id) {
  const uint64_t item = L->o.shuffle ? permute(pos, L->epoch_items, L->o.seed, e) : pos;
  if (L->clusters.fd < 0) {
    *id = item;
    return ESMT_OK;
  }
  uint64_t first = 0, size = 0;
  esmt_status st = esmt_cluster_index_size(&L->clusters, item, &first, &size);
  if (st) return st;
  rng r = rng_for(L->o.seed, e, item, 0x636c7573746572ull /* "cluster" */);
  return esmt_cluster_index_member(&L->clusters, first + rng_next(&r) % size, id);
}

static uint32_t row_len(const esmt_loader *L, uint32_t residues) {
  uint64_t full = (uint64_t)residues + 2;
  return (uint32_t)(full < (uint64_t)L->o.max_len ? full : (uint64_t)L->o.max_len);
}

static void unpacked_batches(esmt_loader *L, int m);
static void pack_rows(esmt_loader *L, int m);
static void shuffle_batches(esmt_loader *L, uint64_t e, uint64_t w);

/* Build window w of epoch e: sort its samples by length, cut batches. */
static esmt_status build_window(esmt_loader *L, uint64_t e, uint64_t w) {
  if (L->built_epoch == (int64_t)e && L->built_window == (int64_t)w) return ESMT_OK;
  const uint64_t n = L->epoch_items, W = L->window_size;
  uint64_t begin = w * W, end = begin + W < n ? begin + W : n;
  int m = (int)(end - begin);
  for (int i = 0; i < m; i++) {
    uint64_t id = 0;
    esmt_status st = sample_at(L, begin + (uint64_t)i, e, &id);
    if (st) return st;
    uint32_t len;
    const uint8_t *res;
    st = esmt_shard_set_record(&L->set, id, &res, &len); /* index only: no page touched */
    if (st) return st;
    L->samples[i] = id;
    L->lengths[i] = row_len(L, len);
  }
  /* insertion sort by length (stable; windows are small) */
  for (int i = 1; i < m; i++) {
    uint64_t s = L->samples[i];
    uint32_t l = L->lengths[i];
    int j = i - 1;
    while (j >= 0 && L->lengths[j] > l) {
      L->samples[j + 1] = L->samples[j];
      L->lengths[j + 1] = L->lengths[j];
      j--;
    }
    L->samples[j + 1] = s;
    L->lengths[j + 1] = l;
  }
  if (L->o.pack) {
    pack_rows(L, m);
  } else {
    unpacked_batches(L, m);
  }
  shuffle_batches(L, e, w);
  L->built_epoch = (int64_t)e;
  L->built_window = (int64_t)w;
  return ESMT_OK;
}

/* greedy batches: rows x longest <= budget (and <= batch_rows) */
static void unpacked_batches(esmt_loader *L, int m) {
  L->nbatches = 0;
  for (int i = 0; i < m;) {
    int start = i, rows = 0;
    while (i < m) {
      uint64_t longest = L->lengths[i];
      int cap_rows = L->o.batch_rows > 0 ? L->o.batch_rows : 1 << 30;
      if (rows > 0 && ((uint64_t)(rows + 1) * longest > L->o.tokens_per_batch || rows >= cap_rows))
        break;
      rows++;
      i++;
    }
    L->bstart[L->nbatches] = start;
    L->bcount[L->nbatches] = rows;
    L->nbatches++;
  }
}

/* Rows per packed batch. */
static int packed_rows(const esmt_loader *L) {
  if (L->o.batch_rows > 0) return L->o.batch_rows;
  uint64_t rows = L->o.tokens_per_batch / (uint64_t)L->o.max_len;
  return rows < 1 ? 1 : rows > (1u << 30) ? 1 << 30 : (int)rows;
}

/* First-fit decreasing of the m samples (sorted by length, ascending) into
 * rows of max_len tokens, then batches of packed_rows() consecutive rows. */
static void pack_rows(esmt_loader *L, int m) {
  int nrows = 0, open = 0; /* rows before `open` cannot take even the shortest sample */
  int *row_of = L->order; /* scratch until shuffle_batches */
  const uint32_t cap = (uint32_t)L->o.max_len;
  for (int i = m - 1; i >= 0; i--) {
    while (open < nrows && L->rfill[open] + L->lengths[0] > cap) open++;
    int r = open;
    while (r < nrows && L->rfill[r] + L->lengths[i] > cap) r++;
    if (r == nrows) L->rfill[nrows++] = 0;
    L->rfill[r] += L->lengths[i];
    row_of[i] = r;
  }
  /* items grouped by row, in placement order (longest first) */
  for (int r = 0; r < nrows; r++) L->rcount[r] = 0;
  for (int i = 0; i < m; i++) L->rcount[row_of[i]]++;
  for (int r = 0, at = 0; r < nrows; r++) {
    L->rstart[r] = at;
    at += L->rcount[r];
    L->rcount[r] = 0;
  }
  for (int i = m - 1; i >= 0; i--) {
    const int r = row_of[i];
    L->items[L->rstart[r] + L->rcount[r]++] = i;
  }
  const int B = packed_rows(L);
  L->nbatches = 0;
  for (int r = 0; r < nrows; r += B) {
    L->bstart[L->nbatches] = r;
    L->bcount[L->nbatches] = nrows - r < B ? nrows - r : B;
    L->nbatches++;
  }
}

/* The window's batches in a shuffled order: its part of the global stream. */
static void shuffle_batches(esmt_loader *L, uint64_t e, uint64_t w) {
  int *all = L->order;
  for (int j = 0; j < L->nbatches; j++) all[j] = j;
  if (L->o.shuffle) {
    rng r = rng_for(L->o.seed, e, w, 0xB47C);
    for (int j = L->nbatches - 1; j > 0; j--) {
      int k = (int)(rng_next(&r) % (uint64_t)(j + 1));
      int t = all[j]; all[j] = all[k]; all[k] = t;
    }
  }
}

static uint64_t windows_per_epoch(const esmt_loader *L) {
  return (L->epoch_items + L->window_size - 1) / L->window_size;
}

/* A place in the global stream: batch `batch` of window `window` of epoch
 * `epoch` (in the window's shuffled order). */
typedef struct stream_pos {
  uint64_t epoch, window;
  int batch;
} stream_pos;

/* Move p k batches along the stream, building the windows it crosses; p
 * then names an existing batch and its window is the one built, or, when
 * `lazy` and p lands just past a window's last batch, that window's end
 * (so the epoch a loader reports is still that of the batch it handed out
 * last, until the next one). At the end of the last epoch (data.epochs > 0)
 * *past_end is set and *left says how many of the k steps had no batch to
 * land on. */
static esmt_status stream_advance(esmt_loader *L, stream_pos *p, uint64_t k, int lazy,
                                  int *past_end, uint64_t *left) {
  *past_end = 0;
  for (;;) {
    if (L->o.epochs > 0 && p->epoch >= (uint64_t)L->o.epochs) {
      *past_end = 1;
      *left = k;
      return ESMT_OK;
    }
    esmt_status st = build_window(L, p->epoch, p->window);
    if (st) return st;
    const uint64_t rest = (uint64_t)(L->nbatches - p->batch);
    if (rest > k || (lazy && rest == k && k > 0)) {
      p->batch += (int)k;
      return ESMT_OK;
    }
    k -= rest;
    p->batch = 0;
    if (++p->window >= windows_per_epoch(L)) {
      p->window = 0;
      p->epoch++;
    }
  }
}

/* One sequence into tok/lab (row_len() tokens): crop, add cls/eos where
 * the window reaches the ends, mask. The caller pads around it. */
static esmt_status fill_seq(esmt_loader *L, uint64_t epoch, uint64_t id, int32_t *tok,
                            int32_t *lab, uint64_t *real) {
  uint32_t len;
  const uint8_t *res;
  esmt_status st = esmt_shard_set_record(&L->set, id, &res, &len);
  if (st) return st;
  rng r = rng_for(L->o.seed, L->o.fixed_masking ? 0 : epoch, id, 0x3A5C);
  const uint64_t full = (uint64_t)len + 2; /* the virtual row: cls + residues + eos */
  const uint64_t keep = full < (uint64_t)L->o.max_len ? full : (uint64_t)L->o.max_len;
  const uint64_t start = full > keep ? rng_next(&r) % (full - keep + 1) : 0;
  for (uint64_t k = 0; k < keep; k++) {
    uint64_t v = start + k;
    int32_t id_tok = v == 0 ? ESMT_TOKEN_CLS : v == full - 1 ? ESMT_TOKEN_EOS : res[v - 1];
    tok[k] = id_tok;
    lab[k] = ESMT_LABEL_IGNORE;
    if (v == 0 || v == full - 1) continue; /* specials are never selected */
    if (rng_unit(&r) >= L->o.mask_prob) continue;
    lab[k] = id_tok;
    double u = rng_unit(&r);
    if (u < L->o.mask_token_frac) tok[k] = ESMT_TOKEN_MASK;
    else if (u < L->o.mask_token_frac + L->o.random_token_frac)
      tok[k] = 4 + (int32_t)(rng_next(&r) % 20);
  }
  /* Unmap the pages just read (and the neighbours the kernel mapped with
   * them): the resident set holds no more than the row in hand, whatever
   * the dataset's size. */
  esmt_shard_set_release(&L->set, res, len);
  *real += keep;
  return ESMT_OK;
}

static void pad(int32_t *tok, int32_t *lab, size_t n) {
  for (size_t k = 0; k < n; k++) {
    tok[k] = ESMT_TOKEN_PAD;
    lab[k] = ESMT_LABEL_IGNORE;
  }
}

/* Room for n tokens and nseg segments in o. */
static esmt_status grow(out_buf *o, size_t n, size_t nseg) {
  if (n > o->cap) {
    int32_t *t = realloc(o->tok, n * sizeof *t);
    if (t) o->tok = t;
    int32_t *l = t ? realloc(o->lab, n * sizeof *l) : NULL;
    if (l) o->lab = l;
    if (!t || !l) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "loader: out of memory");
    o->cap = n;
  }
  if (nseg > o->seg_cap) {
    int32_t *s = realloc(o->seg_start, nseg * sizeof *s);
    if (s) o->seg_start = s;
    int32_t *l = s ? realloc(o->seg_len, nseg * sizeof *l) : NULL;
    if (l) o->seg_len = l;
    if (!s || !l) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "loader: out of memory");
    o->seg_cap = nseg;
  }
  return ESMT_OK;
}

/* Packed batch j of a window of epoch e: its rows, T = the fullest row, one
 * segment per sample. */
static esmt_status produce_packed(esmt_loader *L, uint64_t e, int j, out_buf *o, esmt_batch *b,
                                  uint64_t *real) {
  const int r0 = L->bstart[j], rows = L->bcount[j];
  int T = 0, nseg = 0;
  for (int r = r0; r < r0 + rows; r++) {
    if ((int)L->rfill[r] > T) T = (int)L->rfill[r];
    nseg += L->rcount[r];
  }
  esmt_status st = grow(o, (size_t)rows * (size_t)T, (size_t)nseg);
  if (st) return st;
  int s = 0;
  for (int r = 0; r < rows; r++) {
    const int row = r0 + r;
    size_t at = (size_t)r * (size_t)T;
    for (int k = 0; k < L->rcount[row]; k++) {
      const int i = L->items[L->rstart[row] + k];
      if ((st = fill_seq(L, e, L->samples[i], o->tok + at, o->lab + at, real))) return st;
      o->seg_start[s] = (int32_t)at;
      o->seg_len[s++] = (int32_t)L->lengths[i];
      at += L->lengths[i];
    }
    pad(o->tok + at, o->lab + at, (size_t)(r + 1) * (size_t)T - at);
  }
  b->batch = rows;
  b->seq_len = T;
  b->num_segments = nseg;
  b->seg_start = o->seg_start;
  b->seg_len = o->seg_len;
  return ESMT_OK;
}

/* Where this rank's batch of the round at `round` is: `rank` batches on,
 * or, past the end of the last epoch, as many from that epoch's start
 * (*wrapped set). */
static esmt_status rank_batch(esmt_loader *L, stream_pos round, stream_pos *mine, int *wrapped) {
  int past_end = 0;
  uint64_t left = (uint64_t)L->o.rank;
  *mine = round;
  esmt_status st = stream_advance(L, mine, left, 0, &past_end, &left);
  *wrapped = past_end;
  while (!st && past_end) { /* each pass lands on at least one batch: left shrinks */
    stream_pos first = {(uint64_t)L->o.epochs - 1, 0, 0};
    *mine = first;
    st = stream_advance(L, mine, left, 0, &past_end, &left);
  }
  return st;
}

/* Make this rank's batch of the next round into o, growing it as needed. */
static esmt_status produce(esmt_loader *L, out_buf *o, esmt_batch *b, uint64_t *real_out,
                           uint64_t *padded_out) {
  stream_pos round = {L->epoch, L->window, L->batch}, mine;
  int past_end = 0, wrapped = 0;
  uint64_t left = 0;
  esmt_status st = stream_advance(L, &round, 0, 0, &past_end, &left);
  if (st) return st;
  if (past_end) return esmt_fail(ESMT_ERR_STATE, "loader: all %d epochs are done", L->o.epochs);
  if ((st = rank_batch(L, round, &mine, &wrapped))) return st;
  const uint64_t e = mine.epoch;
  int j = L->order[mine.batch];
  L->handed_epoch = e;
  uint64_t real = 0;
  if (L->o.pack) {
    st = produce_packed(L, e, j, o, b, &real);
    if (st) return st;
  } else {
    int rows = L->bcount[j];
    int T = (int)L->lengths[L->bstart[j] + rows - 1]; /* the longest: sorted */
    st = grow(o, (size_t)rows * (size_t)T, 0);
    if (st) return st;
    for (int r = 0; r < rows; r++) {
      int32_t *tok = o->tok + (size_t)r * T, *lab = o->lab + (size_t)r * T;
      pad(tok, lab, (size_t)T);
      if ((st = fill_seq(L, e, L->samples[L->bstart[j] + r], tok, lab, &real))) return st;
    }
    b->batch = rows;
    b->seq_len = T;
    b->num_segments = 0;
    b->seg_start = b->seg_len = NULL;
  }
  b->tokens = o->tok;
  b->labels = o->lab;
  b->loss_normalizer = 0;
  *real_out = real;
  *padded_out = (uint64_t)b->batch * (uint64_t)b->seq_len;
  /* the next round: world batches on (the end of the data: the last epoch
   * done), counted from this rank's batch, whose window is the one built */
  uint64_t on = (uint64_t)L->o.world;
  if (!wrapped) {
    round = mine;
    on -= (uint64_t)L->o.rank;
  }
  if ((st = stream_advance(L, &round, on, 1, &past_end, &left))) return st;
  if (past_end) round = (stream_pos){(uint64_t)L->o.epochs, 0, 0};
  L->epoch = round.epoch;
  L->window = round.window;
  L->batch = round.batch;
  return ESMT_OK;
}

/* The prefetch thread: fill free slots in order until told to stop. */
static void *prefetch_main(void *arg) {
  esmt_loader *L = arg;
  struct prefetch *p = L->pf;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && p->count == p->depth) pthread_cond_wait(&p->can_fill, &p->mu);
    if (p->stop) break;
    slot *s = &p->slots[(p->head + p->count) % p->depth];
    pthread_mutex_unlock(&p->mu);
    esmt_batch b = ESMT_BATCH_INIT;
    s->status = produce(L, &s->out, &b, &s->real, &s->padded);
    if (s->status) snprintf(s->message, sizeof s->message, "%s", esmt_last_error());
    s->batch = b;
    s->epoch = L->epoch;
    s->window = L->window;
    s->next_batch = L->batch;
    s->batch_epoch = L->handed_epoch;
    pthread_mutex_lock(&p->mu);
    p->count++;
    pthread_cond_signal(&p->can_take);
    if (s->status) break; /* the end of the data, or an error: the caller sees it */
  }
  p->running = 0;
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Stop the thread; the loader's position becomes the caller's (what was
 * handed out), so prepared-but-unused batches are simply made again. */
static void prefetch_stop(esmt_loader *L) {
  struct prefetch *p = L->pf;
  if (!p || !p->started) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->can_fill);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  p->started = 0;
  p->stop = 0;
  L->epoch = p->epoch;
  L->window = p->window;
  L->batch = p->batch;
  L->handed_epoch = p->handed_epoch;
  p->head = p->count = 0;
  p->held = -1;
}

static esmt_status prefetch_start(esmt_loader *L) {
  struct prefetch *p = L->pf;
  p->epoch = L->epoch;
  p->window = L->window;
  p->batch = L->batch;
  p->handed_epoch = L->handed_epoch;
  p->head = p->count = 0;
  p->held = -1;
  p->running = 1;
  if (pthread_create(&p->thread, NULL, prefetch_main, L) != 0) {
    p->running = 0;
    return esmt_fail(ESMT_ERR_INTERNAL, "loader: cannot start the prefetch thread");
  }
  p->started = 1;
  return ESMT_OK;
}

esmt_status esmt_loader_next(esmt_loader *L, esmt_batch *caller) {
  const char *fn = "esmt_loader_next";
  ESMT_CHECK_ARG(L && caller, fn, "loader and batch must not be NULL");
  /* A caller built before packed rows has a shorter esmt_batch: it gets
   * the fields it knows, and cannot take packed batches. */
  esmt_status cs = esmt_check_struct(fn, "esmt_batch", caller->struct_size,
                                     offsetof(esmt_batch, num_segments));
  if (cs) return cs;
  if (L->o.pack && caller->struct_size < sizeof *caller)
    return esmt_fail(ESMT_ERR_ABI, "%s: packed batches need an esmt_batch with the segment "
                     "fields (struct_size %u < %zu)", fn, caller->struct_size, sizeof *caller);
  esmt_batch full = ESMT_BATCH_INIT, *b = &full;
  uint64_t real = 0, padded = 0;
  if (!L->pf) {
    esmt_status st = produce(L, &L->out, b, &real, &padded);
    if (st) return st;
  } else {
    struct prefetch *p = L->pf;
    if (!p->started) {
      esmt_status st = prefetch_start(L);
      if (st) return st;
    }
    pthread_mutex_lock(&p->mu);
    if (p->held >= 0) { /* the caller is done with the previous batch */
      p->head = (p->head + 1) % p->depth;
      p->count--;
      p->held = -1;
      pthread_cond_signal(&p->can_fill);
    }
    while (p->count == 0 && p->running) pthread_cond_wait(&p->can_take, &p->mu);
    if (p->count == 0) {
      pthread_mutex_unlock(&p->mu);
      return esmt_fail(ESMT_ERR_INTERNAL, "loader: the prefetch thread ended unexpectedly");
    }
    slot *s = &p->slots[p->head];
    if (s->status) { /* left in place: every later call reports it too */
      esmt_status st = s->status;
      pthread_mutex_unlock(&p->mu);
      return esmt_fail(st, "%s", s->message);
    }
    p->held = p->head;
    p->epoch = s->epoch;
    p->window = s->window;
    p->batch = s->next_batch;
    p->handed_epoch = s->batch_epoch;
    *b = s->batch;
    real = s->real;
    padded = s->padded;
    pthread_mutex_unlock(&p->mu);
  }
  L->stats.batches++;
  L->stats.real_tokens += real;
  L->stats.padded_tokens += padded;
  const uint32_t size = caller->struct_size;
  memcpy(caller, b, size < sizeof full ? size : sizeof full);
  caller->struct_size = size;
  return ESMT_OK;
}

/* Cluster sampling: the split's cluster index, checked whole. */
static esmt_status open_clusters(esmt_loader *L) {
  esmt_dataset_manifest m;
  esmt_status st = esmt_manifest_load(L->dir, &m);
  if (st) return st;
  const esmt_manifest_clusters *c = &m.clusters[L->o.split];
  if (!c->file)
    st = esmt_fail(ESMT_ERR_CONFIG, "data.sampling cluster: %s has no clusters for its %s split "
                   "(ingest it with --clusters FILE, e.g. MMseqs2's easy-cluster TSV; or use "
                   "data.sampling: sequence)", L->dir, esmt_split_name(L->o.split));
  else
    st = esmt_cluster_index_open(L->dir, c->file, L->o.split, m.dataset_id, L->set.records,
                                 c->clusters, c->crc32, &L->clusters);
  esmt_manifest_free(&m);
  if (!st) L->epoch_items = L->clusters.clusters;
  return st;
}

esmt_status esmt_loader_create(const esmt_loader_options *o, esmt_loader **out) {
  const char *fn = "esmt_loader_create";
  ESMT_CHECK_ARG(out, fn, "out is NULL");
  *out = NULL;
  ESMT_CHECK_ARG(o && o->dir, fn, "options and options->dir must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_loader_options", o->struct_size,
                                     offsetof(esmt_loader_options, pack));
  if (st) return st;
  esmt_loader_options oo = ESMT_LOADER_OPTIONS_INIT; /* pack = 0, sampling by sequence for an
                                                      * older caller */
  memcpy(&oo, o, o->struct_size < sizeof oo ? o->struct_size : sizeof oo);
  o = &oo;
  if (o->max_len < 3 || o->world < 1 || o->rank < 0 || o->rank >= o->world || o->batch_rows < 0 ||
      (o->batch_rows == 0 && o->tokens_per_batch < (uint64_t)o->max_len) || o->epochs < 0 ||
      !(o->mask_prob >= 0 && o->mask_prob <= 1) ||
      !(o->mask_token_frac >= 0 && o->random_token_frac >= 0 &&
        o->mask_token_frac + o->random_token_frac <= 1) ||
      (o->sampling != ESMT_SAMPLING_SEQUENCE && o->sampling != ESMT_SAMPLING_CLUSTER))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: need max_len >= 3, 0 <= rank < world, a token "
                     "budget of at least max_len (or batch_rows), mask fractions in [0, 1] and a "
                     "known sampling", fn);
  esmt_loader *L = calloc(1, sizeof *L);
  if (!L) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  L->o = *o;
  L->dir = strdup(o->dir);
  L->o.dir = L->dir;
  if (L->o.tokens_per_batch == 0) L->o.tokens_per_batch = UINT64_MAX;
  L->built_epoch = L->built_window = -1;
  L->clusters.fd = -1;
  st = L->dir ? esmt_shard_set_open(o->dir, (int)o->split, &L->set)
              : esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  L->epoch_items = L->set.records;
  if (!st && o->sampling == ESMT_SAMPLING_CLUSTER) st = open_clusters(L);
  if (!st) {
    uint64_t rows = o->batch_rows > 0 ? (uint64_t)o->batch_rows
                                      : (o->tokens_per_batch / (uint64_t)o->max_len + 1);
    L->window_size = rows * WINDOW_BATCHES;
    if (L->window_size > L->epoch_items) L->window_size = L->epoch_items;
    size_t W = (size_t)L->window_size;
    L->samples = malloc(W * sizeof *L->samples);
    L->lengths = malloc(W * sizeof *L->lengths);
    L->bstart = malloc(W * sizeof *L->bstart);
    L->bcount = malloc(W * sizeof *L->bcount);
    L->order = malloc(W * sizeof *L->order);
    if (o->pack) {
      L->items = malloc(W * sizeof *L->items);
      L->rstart = malloc(W * sizeof *L->rstart);
      L->rcount = malloc(W * sizeof *L->rcount);
      L->rfill = malloc(W * sizeof *L->rfill);
    }
    if (!L->samples || !L->lengths || !L->bstart || !L->bcount || !L->order ||
        (o->pack && (!L->items || !L->rstart || !L->rcount || !L->rfill)))
      st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  if (!st && o->prefetch > 0) {
    L->pf = calloc(1, sizeof *L->pf);
    if (L->pf) L->pf->slots = calloc((size_t)o->prefetch, sizeof *L->pf->slots);
    if (!L->pf || !L->pf->slots) {
      st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    } else {
      L->pf->depth = o->prefetch;
      L->pf->held = -1;
      pthread_mutex_init(&L->pf->mu, NULL);
      pthread_cond_init(&L->pf->can_fill, NULL);
      pthread_cond_init(&L->pf->can_take, NULL);
    }
  }
  if (st) {
    esmt_loader_destroy(L);
    return esmt_fail_prefix(st, "%s: ", fn);
  }
  L->stats.struct_size = sizeof L->stats;
  L->stats.records = L->set.records;
  *out = L;
  return ESMT_OK;
}

static void out_free(out_buf *o) {
  free(o->tok);
  free(o->lab);
  free(o->seg_start);
  free(o->seg_len);
}

void esmt_loader_destroy(esmt_loader *L) {
  if (!L) return;
  if (L->pf) {
    prefetch_stop(L);
    if (L->pf->slots) {
      for (int i = 0; i < L->pf->depth; i++) out_free(&L->pf->slots[i].out);
      pthread_mutex_destroy(&L->pf->mu);
      pthread_cond_destroy(&L->pf->can_fill);
      pthread_cond_destroy(&L->pf->can_take);
    }
    free(L->pf->slots);
    free(L->pf);
  }
  esmt_shard_set_close(&L->set);
  if (L->clusters.fd >= 0) esmt_cluster_index_close(&L->clusters);
  free(L->samples);
  free(L->lengths);
  free(L->bstart);
  free(L->bcount);
  free(L->order);
  free(L->items);
  free(L->rstart);
  free(L->rcount);
  free(L->rfill);
  out_free(&L->out);
  free(L->dir);
  free(L);
}

esmt_status esmt_loader_reset(esmt_loader *L) {
  ESMT_CHECK_ARG(L, "esmt_loader_reset", "loader is NULL");
  prefetch_stop(L);
  L->epoch = L->window = 0;
  L->batch = 0;
  L->handed_epoch = 0;
  return ESMT_OK;
}

esmt_status esmt_loader_save_cursor(esmt_loader *L, char *buf, size_t cap) {
  ESMT_CHECK_ARG(L && buf, "esmt_loader_save_cursor", "loader and buf must not be NULL");
  uint64_t epoch, window;
  int batch;
  if (L->pf && L->pf->started) { /* what the caller has taken, not what is prepared */
    pthread_mutex_lock(&L->pf->mu);
    epoch = L->pf->epoch;
    window = L->pf->window;
    batch = L->pf->batch;
    pthread_mutex_unlock(&L->pf->mu);
  } else { /* (while it runs, the prefetch thread writes L's own position) */
    epoch = L->epoch;
    window = L->window;
    batch = L->batch;
  }
  /* "pack" only when packing: unpacked cursors keep their old text; "global":
   * batch counts the window's batches all ranks have taken together */
  int n = snprintf(buf, cap, "{\"epoch\":%llu,\"window\":%llu,\"batch\":%d,\"global\":1,"
                   "\"seed\":%llu,\"records\":%llu%s%s}", (unsigned long long)epoch, (unsigned long long)window,
                   batch, (unsigned long long)L->o.seed, (unsigned long long)L->set.records,
                   L->o.pack ? ",\"pack\":1" : "",
                   L->clusters.fd >= 0 ? ",\"sampling\":\"cluster\"" : "");
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

esmt_status esmt_loader_restore_cursor(esmt_loader *L, const char *json) {
  const char *fn = "esmt_loader_restore_cursor";
  ESMT_CHECK_ARG(L && json, fn, "loader and json must not be NULL");
  json_t *cur = json_loads(json, JSON_REJECT_DUPLICATES, NULL);
  if (!json_is_object(cur)) {
    json_decref(cur);
    return esmt_fail(ESMT_ERR_FORMAT, "%s: not a loader cursor: %.80s", fn, json);
  }
  uint64_t epoch = 0, window = 0, batch = 0, seed = 0, records = 0;
  esmt_status st = cursor_field(cur, "seed", UINT64_MAX >> 1, "a seed", &seed);
  if (!st) st = cursor_field(cur, "records", UINT64_MAX >> 1, "a record count", &records);
  if (!st && (seed != L->o.seed || records != L->set.records))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: the cursor is for another dataset or seed (records "
                   "%llu vs %llu, seed %llu vs %llu)", fn, (unsigned long long)records,
                   (unsigned long long)L->set.records, (unsigned long long)seed,
                   (unsigned long long)L->o.seed);
  json_t *pack = json_object_get(cur, "pack"), *sampling = json_object_get(cur, "sampling");
  const int packed = json_is_integer(pack) && json_integer_value(pack) == 1;
  if (!st && packed != (L->o.pack != 0))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: the cursor is for %s batches but the loader makes %s "
                   "ones (data.pack changed since the checkpoint)", fn,
                   packed ? "packed" : "unpacked", L->o.pack ? "packed" : "unpacked");
  const int by_cluster = json_is_string(sampling) &&
                         !strcmp(json_string_value(sampling), "cluster");
  if (!st && by_cluster != (L->clusters.fd >= 0))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: the cursor is for sampling by %s but the loader "
                   "samples by %s (data.sampling changed since the checkpoint)", fn,
                   by_cluster ? "cluster" : "sequence", L->clusters.fd >= 0 ? "cluster" :
                   "sequence");
  /* the position: an epoch that can have been reached, a window inside the
   * epoch, a batch inside the window (== its count: the window is done) */
  char bound[160];
  if (L->o.epochs > 0)
    snprintf(bound, sizeof bound, "data.epochs is %d", L->o.epochs);
  else
    snprintf(bound, sizeof bound, "at most 2^31 - 1 passes");
  if (!st) st = cursor_field(cur, "epoch", L->o.epochs > 0 ? (uint64_t)L->o.epochs :
                             CURSOR_MAX_EPOCH, bound, &epoch);
  const uint64_t windows = windows_per_epoch(L);
  snprintf(bound, sizeof bound, "an epoch of %llu %s is %llu window(s)",
           (unsigned long long)L->epoch_items, L->clusters.fd >= 0 ? "clusters" : "records",
           (unsigned long long)windows);
  if (!st) st = cursor_field(cur, "window", windows - 1, bound, &window);
  prefetch_stop(L);
  if (!st) st = build_window(L, epoch, window);
  /* A cursor without "global" (written before the ranks shared one stream)
   * counts one rank's batches of a window split j -> rank j % world: the
   * ranks together had taken world times as many (the same world size is
   * exact; another one is not, as it was not then). */
  json_t *global = json_object_get(cur, "global");
  const int per_rank = !(json_is_integer(global) && json_integer_value(global) == 1);
  const uint64_t most = per_rank ? (uint64_t)((L->nbatches + L->o.world - 1) / L->o.world)
                                 : (uint64_t)L->nbatches;
  snprintf(bound, sizeof bound, "window %llu of epoch %llu has %d batch(es)%s",
           (unsigned long long)window, (unsigned long long)epoch, L->nbatches,
           per_rank ? ", split over the ranks" : "");
  if (!st) st = cursor_field(cur, "batch", most, bound, &batch);
  json_decref(cur);
  if (st) return st;
  if (per_rank) {
    batch *= (uint64_t)L->o.world;
    if (batch > (uint64_t)L->nbatches) batch = (uint64_t)L->nbatches;
  }
  L->epoch = epoch;
  L->window = window;
  L->batch = (int)batch;
  L->handed_epoch = epoch;
  return ESMT_OK;
}

esmt_status esmt_loader_stats_get(const esmt_loader *L, esmt_loader_stats *s) {
  ESMT_CHECK_ARG(L && s, "esmt_loader_stats_get", "loader and stats must not be NULL");
  esmt_status st = esmt_check_struct("esmt_loader_stats_get", "esmt_loader_stats", s->struct_size,
                                     sizeof *s);
  if (st) return st;
  *s = L->stats;
  /* the epoch of the batch handed out last: the next round's position may
   * already be in the next epoch while the caller holds a batch of this one */
  if (L->pf && L->pf->started) { /* the caller's; L's is the prefetch thread's */
    pthread_mutex_lock(&L->pf->mu);
    s->epoch = L->pf->handed_epoch;
    pthread_mutex_unlock(&L->pf->mu);
  } else {
    s->epoch = L->handed_epoch;
  }
  s->padding_fraction = s->padded_tokens ? 1.0 - (double)s->real_tokens / (double)s->padded_tokens : 0;
  return ESMT_OK;
}

static esmt_status src_next(void *u, esmt_batch *b) { return esmt_loader_next(u, b); }
static esmt_status src_reset(void *u) { return esmt_loader_reset(u); }
static esmt_status src_save(void *u, char *buf, size_t cap) { return esmt_loader_save_cursor(u, buf, cap); }
static esmt_status src_restore(void *u, const char *j) { return esmt_loader_restore_cursor(u, j); }
static esmt_status src_epoch(void *u, uint64_t *epoch) {
  esmt_loader_stats s = ESMT_LOADER_STATS_INIT;
  esmt_status st = esmt_loader_stats_get(u, &s);
  *epoch = s.epoch; /* the epoch of the next batch handed out */
  return st;
}

esmt_status esmt_loader_as_source(esmt_loader *L, esmt_batch_source *s) {
  ESMT_CHECK_ARG(L && s, "esmt_loader_as_source", "loader and source must not be NULL");
  esmt_batch_source src = {sizeof src, L, src_next, src_reset, src_save, src_restore, src_epoch};
  *s = src;
  return ESMT_OK;
}
