/* SPDX-License-Identifier: MIT */
/* The MLM batch loader over memory-mapped shards: this file makes the
 * batches the order names into tokens (crops, masks, padding, packed
 * segments), prefetches them and keeps the position; the order itself,
 * the ranks' rounds and the cursor are batch_order.c's.
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "batch_order.h"
#include "cluster_index.h"
#include "dataset_manifest.h"
#include "shard_set.h"

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
  esmt_batch_order ord;      /* the global batch order and its current window */
  /* position of the next round: the window's batches all ranks have taken */
  uint64_t epoch, window;
  int batch;
  uint64_t handed_epoch;     /* of the batch handed out last: the stats' epoch */
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

/* One sequence into tok/lab (row_len() tokens): crop, add cls/eos where
 * the window reaches the ends, mask. The caller pads around it. */
static esmt_status fill_seq(esmt_loader *L, uint64_t epoch, uint64_t id, int32_t *tok,
                            int32_t *lab, uint64_t *real) {
  uint32_t len;
  const uint8_t *res;
  esmt_status st = esmt_shard_set_record(&L->set, id, &res, &len);
  if (st) return st;
  esmt_order_rng r = esmt_order_rng_for(L->o.seed, L->o.fixed_masking ? 0 : epoch, id, 0x3A5C);
  const uint64_t full = (uint64_t)len + 2; /* the virtual row: cls + residues + eos */
  const uint64_t keep = full < (uint64_t)L->o.max_len ? full : (uint64_t)L->o.max_len;
  const uint64_t start = full > keep ? esmt_order_rng_next(&r) % (full - keep + 1) : 0;
  for (uint64_t k = 0; k < keep; k++) {
    uint64_t v = start + k;
    int32_t id_tok = v == 0 ? ESMT_TOKEN_CLS : v == full - 1 ? ESMT_TOKEN_EOS : res[v - 1];
    tok[k] = id_tok;
    lab[k] = ESMT_LABEL_IGNORE;
    if (v == 0 || v == full - 1) continue; /* specials are never selected */
    if (esmt_order_rng_unit(&r) >= L->o.mask_prob) continue;
    lab[k] = id_tok;
    double u = esmt_order_rng_unit(&r);
    if (u < L->o.mask_token_frac) tok[k] = ESMT_TOKEN_MASK;
    else if (u < L->o.mask_token_frac + L->o.random_token_frac)
      tok[k] = 4 + (int32_t)(esmt_order_rng_next(&r) % 20);
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
  const int r0 = L->ord.bstart[j], rows = L->ord.bcount[j];
  int T = 0, nseg = 0;
  for (int r = r0; r < r0 + rows; r++) {
    if ((int)L->ord.rfill[r] > T) T = (int)L->ord.rfill[r];
    nseg += L->ord.rcount[r];
  }
  esmt_status st = grow(o, (size_t)rows * (size_t)T, (size_t)nseg);
  if (st) return st;
  int s = 0;
  for (int r = 0; r < rows; r++) {
    const int row = r0 + r;
    size_t at = (size_t)r * (size_t)T;
    for (int k = 0; k < L->ord.rcount[row]; k++) {
      const int i = L->ord.items[L->ord.rstart[row] + k];
      if ((st = fill_seq(L, e, L->ord.samples[i], o->tok + at, o->lab + at, real))) return st;
      o->seg_start[s] = (int32_t)at;
      o->seg_len[s++] = (int32_t)L->ord.lengths[i];
      at += L->ord.lengths[i];
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

/* Make this rank's batch of the next round into o, growing it as needed. */
static esmt_status produce(esmt_loader *L, out_buf *o, esmt_batch *b, uint64_t *real_out,
                           uint64_t *padded_out) {
  esmt_batch_pos round = {L->epoch, L->window, L->batch}, mine;
  int wrapped = 0;
  esmt_status st = esmt_batch_order_locate(&L->ord, &round, &mine, &wrapped);
  if (st) return st;
  const uint64_t e = mine.epoch;
  int j = L->ord.order[mine.batch];
  L->handed_epoch = e;
  uint64_t real = 0;
  if (L->o.pack) {
    st = produce_packed(L, e, j, o, b, &real);
    if (st) return st;
  } else {
    int rows = L->ord.bcount[j];
    int T = (int)L->ord.lengths[L->ord.bstart[j] + rows - 1]; /* the longest: sorted */
    st = grow(o, (size_t)rows * (size_t)T, 0);
    if (st) return st;
    for (int r = 0; r < rows; r++) {
      int32_t *tok = o->tok + (size_t)r * T, *lab = o->lab + (size_t)r * T;
      pad(tok, lab, (size_t)T);
      if ((st = fill_seq(L, e, L->ord.samples[L->ord.bstart[j] + r], tok, lab, &real))) return st;
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
  if ((st = esmt_batch_order_next_round(&L->ord, &round, mine, wrapped))) return st;
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
  L->clusters.fd = -1;
  st = L->dir ? esmt_shard_set_open(o->dir, (int)o->split, &L->set)
              : esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  if (!st && o->sampling == ESMT_SAMPLING_CLUSTER) st = open_clusters(L);
  if (!st && esmt_batch_order_init(&L->ord, &L->o, &L->set, &L->clusters,
                                   L->clusters.fd >= 0 ? L->clusters.clusters : L->set.records))
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
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
  esmt_batch_order_free(&L->ord);
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
  esmt_batch_pos p;
  if (L->pf && L->pf->started) { /* what the caller has taken, not what is prepared */
    pthread_mutex_lock(&L->pf->mu);
    p = (esmt_batch_pos){L->pf->epoch, L->pf->window, L->pf->batch};
    pthread_mutex_unlock(&L->pf->mu);
  } else { /* (while it runs, the prefetch thread writes L's own position) */
    p = (esmt_batch_pos){L->epoch, L->window, L->batch};
  }
  return esmt_batch_order_save(&L->ord, p, buf, cap);
}

esmt_status esmt_loader_restore_cursor(esmt_loader *L, const char *json) {
  ESMT_CHECK_ARG(L && json, "esmt_loader_restore_cursor", "loader and json must not be NULL");
  prefetch_stop(L); /* its thread builds windows too */
  esmt_batch_pos p;
  esmt_status st = esmt_batch_order_restore(&L->ord, json, &p);
  if (st) return st;
  L->epoch = p.epoch;
  L->window = p.window;
  L->batch = p.batch;
  L->handed_epoch = p.epoch;
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
