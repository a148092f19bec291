/* SPDX-License-Identifier: MIT */
/* ZeRO-3's gathered weights: the schedule is described in weight_gather.h. */
#include "weight_gather.h"

#include <stdlib.h>
#include <string.h>

#include "grad_shard.h"
#include "param_layer.h"

int esmt_test_zero3_drop_loaded_wait;
int esmt_test_zero3_drop_ends_wait;

uint64_t esmt_weight_gather_bytes(const uint64_t *b, int n_parts, int esize) {
  const uint64_t ends = (b[1] - b[0]) + (b[n_parts] - b[n_parts - 1]);
  return (ends + 2 * esmt_param_largest_layer(b, n_parts)) * (uint64_t)esize;
}

uint64_t esmt_weight_gather_elems(const uint64_t *b, int n_parts, int micro_batches) {
  const uint64_t ends = (b[1] - b[0]) + (b[n_parts] - b[n_parts - 1]);
  const uint64_t k = micro_batches > 0 ? (uint64_t)micro_batches : 1;
  uint64_t all = 0, later = 0; /* the middle parts; those but the two at a turn */
  for (int i = 1; i + 1 < n_parts; i++) {
    all += b[i + 1] - b[i];
    if (i >= 3) later += b[i + 1] - b[i]; /* backward: the top two are in the slots */
  }
  /* (equal layers: which two stay does not change the count) */
  return ends + all + (2 * k - 1) * later;
}

static esmt_status bfail(esmtb_status bs, const char *what) {
  return bs ? esmt_fail_prefix((esmt_status)bs, "ZeRO-3 weights: %s: ", what) : ESMT_OK;
}

/* Where the kernels find the weights: the end parts, and the slot the
 * compute stream reads. */
static void set_views(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  const esmt_weight_gather *w = p->wgather;
  esmt_param_view *v = &p->weights;
  *v = (esmt_param_view){0};
  v->esize = e->esize;
  v->win[v->n].lo = 0, v->win[v->n].hi = w->first_n, v->win[v->n++].ptr = w->ends;
  v->win[v->n].lo = w->last_lo, v->win[v->n].hi = e->total;
  v->win[v->n++].ptr = w->ends + w->first_n * e->esize;
  if (w->cur >= 0) {
    const int k = w->part[w->cur];
    v->win[v->n].lo = esmt_param_part_lo(e, k);
    v->win[v->n].hi = esmt_param_part_lo(e, k) + esmt_param_part_n(e, k);
    v->win[v->n++].ptr = w->slot[w->cur];
  }
}

/* The compute weights of the shard, at flat element o. */
static char *shard_at(const esmt_param_memory *p, uint64_t o) {
  if (p->compute_lowp) return (char *)p->compute_lowp + (o - p->compute_lo) * p->env.esize;
  if (p->compute32) return (char *)(p->compute32 + (o - p->compute_lo)); /* offload: its own */
  return (char *)(p->master + (o - p->master_lo));
}

/* The flat elements [lo, lo + n) into buf: this rank's piece copied on the
 * compute stream (after every read of buf's previous contents queued
 * there), then the all-gather; `loaded` recorded where it completes. */
static esmt_status gather_into(esmt_param_memory *p, char *buf, uint64_t lo, uint64_t n,
                               esmtb_event *loaded) {
  const esmt_param_env *e = &p->env;
  esmt_weight_gather *w = p->wgather;
  if (!w->gather)
    return esmt_fail(ESMT_ERR_STATE, "ZeRO-3 weights: the data-parallel group that gathers "
                     "them is gone");
  const uint64_t a = lo > w->lo ? lo : w->lo, b = lo + n < w->hi ? lo + n : w->hi;
  esmtb_status bs = 0;
  if (a < b)
    bs = e->ops->copy_async(e->dev, buf + (a - lo) * e->esize, shard_at(p, a),
                            (b - a) * e->esize, ESMTB_COPY_D2D, e->stream);
  esmt_status st = bfail(bs, "this rank's piece");
  esmtb_stream *on = NULL;
  if (!st) st = w->gather(w->user, buf, lo, n, &on);
  if (!st) st = bfail(e->ops->event_record(e->dev, loaded, on), "recording the gather");
  if (st) return st;
  w->gathers++;
  w->gathered_elems += n;
  return ESMT_OK;
}

static esmt_status fill(esmt_param_memory *p, int i, int k) {
  esmt_weight_gather *w = p->wgather;
  w->part[i] = -1;
  esmt_status st = gather_into(p, w->slot[i], esmt_param_part_lo(&p->env, k),
                               esmt_param_part_n(&p->env, k), w->loaded[i]);
  if (!st) w->part[i] = k;
  return st;
}

/* Part k (a middle part) into the slot the compute stream does not read,
 * unless a slot has it already. */
static esmt_status prefetch(esmt_param_memory *p, int k) {
  esmt_weight_gather *w = p->wgather;
  if (k < 1 || k > p->env.n_parts - 2 || w->part[0] == k || w->part[1] == k) return ESMT_OK;
  return fill(p, w->cur >= 0 ? 1 - w->cur : (w->part[0] < 0 ? 0 : 1), k);
}

esmt_status esmt_weight_gather_needed(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  const esmt_param_env *e = &p->env;
  esmt_weight_gather *w = p->wgather;
  const int k = esmt_param_part_at(e, lo);
  if (k < 0 || hi != lo + esmt_param_part_n(e, k))
    return esmt_fail(ESMT_ERR_INTERNAL, "ZeRO-3 weights: [%llu, %llu) asked for, not a part",
                     (unsigned long long)lo, (unsigned long long)hi);
  const int n = e->n_parts;
  if (esmt_param_part_is_end(e, k)) { /* resident; as stream.c: the head turns the pass, the embedding starts one */
    const int after_head = w->last_part == n - 1;
    if (k == n - 1 || !after_head) w->dir = k == n - 1 ? -1 : 1;
    w->last_part = k;
    if (k == 0 && after_head) return ESMT_OK;
    return prefetch(p, k == 0 ? 1 : n - 2);
  }
  esmt_status st = ESMT_OK;
  if (!(w->cur >= 0 && w->part[w->cur] == k)) { /* (else: recompute, then its backward) */
    int i = w->part[0] == k ? 0 : w->part[1] == k ? 1 : -1;
    if (i < 0) { /* not prefetched */
      i = w->cur >= 0 ? 1 - w->cur : 0;
      if ((st = fill(p, i, k))) return st;
    } else {
      w->prefetch_hits++;
    }
    if (!esmt_test_zero3_drop_loaded_wait &&
        (st = bfail(e->ops->stream_wait_event(e->dev, e->stream, w->loaded[i]), "waiting")))
      return st;
    if (w->last_part >= 1 && w->last_part < n - 1) w->dir = k > w->last_part ? 1 : -1;
    w->cur = i;
    set_views(p);
  }
  w->last_part = k;
  return prefetch(p, k + w->dir);
}

static void forget_slots(esmt_param_memory *p) {
  esmt_weight_gather *w = p->wgather;
  w->part[0] = w->part[1] = -1;
  w->cur = -1;
  w->last_part = -1;
  w->dir = 1;
  set_views(p);
}

esmt_status esmt_weight_gather_write_ends(esmt_param_memory *p, const float *host,
                                          uint64_t off, uint64_t n) {
  const esmt_param_env *e = &p->env;
  esmt_weight_gather *w = p->wgather;
  forget_slots(p);
  const uint64_t hi = off + n;
  esmt_status st = ESMT_OK;
  if (off < w->first_n) /* the embedding part: ends[0, first_n) */
    st = esmt_param_upload_converted(p, w->ends + off * e->esize, host,
                                     (hi < w->first_n ? hi : w->first_n) - off);
  const uint64_t a = off > w->last_lo ? off : w->last_lo;
  if (!st && a < hi) /* the head part: ends[first_n, first_n + last_n) */
    st = esmt_param_upload_converted(p, w->ends + (w->first_n + a - w->last_lo) * e->esize,
                                     host + (a - off), hi - a);
  return st;
}

esmt_status esmt_weight_gather_refresh(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  esmt_weight_gather *w = p->wgather;
  forget_slots(p);
  const int wait = !esmt_test_zero3_drop_ends_wait;
  esmt_status st = gather_into(p, w->ends, 0, w->first_n, w->ends_loaded);
  if (!st && wait)
    st = bfail(e->ops->stream_wait_event(e->dev, e->stream, w->ends_loaded), "waiting");
  if (!st) st = gather_into(p, w->ends + w->first_n * e->esize, w->last_lo, w->last_n,
                            w->ends_loaded);
  if (!st && wait)
    st = bfail(e->ops->stream_wait_event(e->dev, e->stream, w->ends_loaded), "waiting");
  return st;
}

void esmt_weight_gather_release(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  esmt_weight_gather *w = p->wgather;
  if (!w) return;
  if (e->dev) {
    e->ops->stream_sync(e->dev, e->stream);
    esmtb_event *ev[] = {w->loaded[0], w->loaded[1], w->ends_loaded};
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
      if (ev[i]) e->ops->event_destroy(e->dev, ev[i]);
    void *dev[] = {w->ends, w->slot[0], w->slot[1]};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
      if (dev[i]) e->ops->free(e->dev, ESMTB_MEM_DEVICE, dev[i]);
  }
  free(w);
  p->wgather = NULL;
}

/* Half: the compute copy cut down to the shard (the master is already). */
static esmt_status shard_half_copy(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  const esmt_param_env *e = &p->env;
  void *shard = NULL;
  esmt_status st = esmt_param_dev_alloc(e, (hi > lo ? hi - lo : 1) * e->esize, &shard,
                                        "half-precision weight shard");
  esmtb_status bs = 0;
  if (!st && hi > lo && p->compute_lowp) /* (at setup: written later) */
    bs = e->ops->copy_async(e->dev, shard, (char *)p->compute_lowp + lo * e->esize,
                            (hi - lo) * e->esize, ESMTB_COPY_D2D, e->stream);
  if (!st && !bs) bs = e->ops->stream_sync(e->dev, e->stream);
  if (st || bs) {
    if (shard) e->ops->free(e->dev, ESMTB_MEM_DEVICE, shard);
    return st ? st : bfail(bs, "the half shard");
  }
  if (p->compute_lowp) e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->compute_lowp);
  p->compute_lowp = shard;
  p->compute_lo = lo;
  return ESMT_OK;
}

esmt_status esmt_param_shard_weights(esmt_param_memory *p, uint64_t lo, uint64_t hi,
                                     esmt_weight_gather_fn gather, void *user) {
  const esmt_param_env *e = &p->env;
  if (p->wgather) { /* set up already: the gather joins */
    p->wgather->gather = gather;
    p->wgather->user = user;
    return ESMT_OK;
  }
  if (!p->gshard || e->n_parts < 2)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "ZeRO-3 weights: need ZeRO-2's gradient slots and "
                     "the model's parts");
  esmt_weight_gather *w = calloc(1, sizeof *w);
  if (!w) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "ZeRO-3 weights: out of memory");
  const uint64_t *b = e->part_bounds;
  w->lo = lo;
  w->hi = hi;
  w->gather = gather;
  w->user = user;
  w->first_n = b[1];
  w->last_lo = b[e->n_parts - 1];
  w->last_n = e->total - w->last_lo;
  w->slot_n = esmt_param_largest_layer(b, e->n_parts);
  w->part[0] = w->part[1] = w->cur = w->last_part = -1;
  w->dir = 1;
  p->wgather = w; /* (esmt_param_shard_master takes the fp32 master with it) */
  esmt_status st = esmt_param_dev_alloc(e, (w->first_n + w->last_n) * e->esize,
                                        (void **)&w->ends, "ZeRO-3 end parts");
  for (int i = 0; !st && i < 2; i++)
    st = esmt_param_dev_alloc(e, (w->slot_n ? w->slot_n : 1) * e->esize, (void **)&w->slot[i],
                              "ZeRO-3 weight slot");
  esmtb_status bs = 0;
  for (int i = 0; !st && !bs && i < 2; i++) bs = e->ops->event_create(e->dev, &w->loaded[i]);
  if (!st && !bs) bs = e->ops->event_create(e->dev, &w->ends_loaded);
  if (!st) st = bfail(bs, "events");
  if (!st) st = esmt_param_shard_master(p, lo, hi);
  if (!st && e->dtype != ESMTB_F32) st = shard_half_copy(p, lo, hi);
  if (st) {
    esmt_weight_gather_release(p);
    return st;
  }
  set_views(p);
  return ESMT_OK;
}
