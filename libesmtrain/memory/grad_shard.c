/* SPDX-License-Identifier: MIT */
/* ZeRO-2's gradient layer: slots per part, a shard per rank. The schedule
 * is described in grad_shard.h. */
#include "grad_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offload.h"
#include "param_layer.h"
#include "weight_gather.h"

int esmt_test_zero_drop_slot_wait;
int esmt_test_zero_drop_shard_wait;

uint64_t esmt_grad_shard_bytes(const uint64_t *b, int n_parts, uint64_t shard_n) {
  const uint64_t ends = (b[1] - b[0]) + (b[n_parts] - b[n_parts - 1]);
  return (ends + 2 * esmt_param_largest_layer(b, n_parts) + shard_n) * sizeof(float);
}

static esmt_status bfail(esmtb_status bs, const char *what) {
  return bs ? esmt_fail_prefix((esmt_status)bs, "ZeRO-2 gradients: %s: ", what) : ESMT_OK;
}

/* Where part k's local gradients are on the device. */
static float *part_buf(const esmt_param_memory *p, int k, int slot) {
  const esmt_grad_shard *g = p->gshard;
  if (k == 0) return g->ends;
  if (k == p->env.n_parts - 1) return g->ends + g->first_n;
  return g->slot[slot];
}

static void set_view(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  const esmt_grad_shard *g = p->gshard;
  esmt_param_view *v = &p->grad_view;
  *v = (esmt_param_view){0};
  v->esize = sizeof(float);
  v->win[v->n].lo = 0, v->win[v->n].hi = g->first_n, v->win[v->n++].ptr = (char *)g->ends;
  v->win[v->n].lo = g->last_lo, v->win[v->n].hi = e->total;
  v->win[v->n++].ptr = (char *)(g->ends + g->first_n);
  if (g->cur >= 0) {
    const int k = g->part[g->cur];
    v->win[v->n].lo = esmt_param_part_lo(e, k);
    v->win[v->n].hi = esmt_param_part_lo(e, k) + esmt_param_part_n(e, k);
    v->win[v->n++].ptr = (char *)g->slot[g->cur];
  }
}

/* Part k is final in `buf`: reduce-scatter it, then this rank's piece into
 * the shard and, for an end part, the buffer cleared for the next backward,
 * all on the reducer's stream; `done` recorded after them. */
static esmt_status reduce_part(esmt_param_memory *p, int k, float *buf, esmtb_event *done) {
  const esmt_param_env *e = &p->env;
  esmt_grad_shard *g = p->gshard;
  if (!g->reduce)
    return esmt_fail(ESMT_ERR_STATE, "ZeRO-2 gradients: the data-parallel group that sums "
                     "them is gone");
  const uint64_t lo = esmt_param_part_lo(e, k), n = esmt_param_part_n(e, k);
  esmtb_stream *on = NULL;
  esmt_status st = g->reduce(g->user, buf, lo, n, &on);
  if (st) return st;
  const uint64_t a = lo > g->lo ? lo : g->lo, b = lo + n < g->hi ? lo + n : g->hi;
  esmtb_status bs = 0;
  if (a < b) {
    float *dst = p->grads + (a - g->lo);
    const float *src = buf + (a - lo);
    if (g->fresh[k]) {
      bs = e->ops->copy_async(e->dev, dst, src, (b - a) * sizeof(float), ESMTB_COPY_D2D, on);
    } else {
      esmtb_add_args ad = {sizeof ad, ESMTB_F32, (size_t)(b - a), dst, src, dst};
      bs = e->ops->add(e->dev, &ad, on);
    }
  }
  g->fresh[k] = 0;
  if (!bs && esmt_param_part_is_end(e, k))
    bs = e->ops->memset_async(e->dev, buf, 0, n * sizeof(float), on);
  if (!bs) bs = e->ops->event_record(e->dev, done, on);
  if (!bs) bs = e->ops->event_record(e->dev, g->tail, on);
  if ((st = bfail(bs, "adding the shard's piece"))) return st;
  g->tail_set = 1;
  g->parts_reduced++;
  return ESMT_OK;
}

/* Backward begins (or the gradients were written): nothing is final. */
static void gs_grads_changed(esmt_param_memory *p) {
  esmt_grad_shard *g = p->gshard;
  g->final_from = p->env.total;
  g->cur = -1;
  set_view(p);
  if (p->offload) esmt_offload_grads_changed(p); /* the host copy is pulled again */
}

static esmt_status gs_grads_ready(esmt_param_memory *p, uint64_t from) {
  const esmt_param_env *e = &p->env;
  esmt_grad_shard *g = p->gshard;
  const int kf = esmt_param_part_at(e, from);
  if (kf < 0 || esmt_param_part_lo(e, kf) + esmt_param_part_n(e, kf) != g->final_from)
    return esmt_fail(ESMT_ERR_INTERNAL, "ZeRO-2 gradients: final from %llu, which is not the "
                     "part before %llu", (unsigned long long)from,
                     (unsigned long long)g->final_from);
  esmt_status st;
  if (esmt_param_part_is_end(e, kf)) {
    st = reduce_part(p, kf, part_buf(p, kf, 0), g->tail);
  } else {
    st = reduce_part(p, kf, g->slot[g->cur], g->reduced[g->cur]);
    g->pending[g->cur] = 1;
  }
  if (st) return st;
  g->final_from = from;
  esmtb_status bs = 0;
  if (kf == 0) { /* the pass is over: the shard is read next */
    g->cur = -1;
    set_view(p);
    if (!esmt_test_zero_drop_shard_wait)
      bs = e->ops->stream_wait_event(e->dev, e->stream, g->tail);
    return bfail(bs, "waiting for the shard");
  }
  const int kn = kf - 1; /* the part backward produces next */
  if (kn < 1) {
    g->cur = -1;
    set_view(p);
    return ESMT_OK;
  }
  const int i = g->cur >= 0 ? 1 - g->cur : 0;
  /* the slot's previous part is reduced before backward writes it again */
  if (g->pending[i] && !esmt_test_zero_drop_slot_wait)
    bs = e->ops->stream_wait_event(e->dev, e->stream, g->reduced[i]);
  g->pending[i] = 0;
  if (!bs)
    bs = e->ops->memset_async(e->dev, g->slot[i], 0, esmt_param_part_n(e, kn) * sizeof(float),
                              e->stream);
  if ((st = bfail(bs, "zeroing a gradient slot"))) return st;
  g->part[i] = kn;
  g->cur = i;
  set_view(p);
  return ESMT_OK;
}

static esmt_status gs_zero_grads(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  esmt_grad_shard *g = p->gshard;
  gs_grads_changed(p);
  memset(g->fresh, 1, (size_t)e->n_parts);
  esmtb_status bs = 0;
  if (g->tail_set) bs = e->ops->stream_wait_event(e->dev, e->stream, g->tail);
  if (!bs) bs = e->ops->memset_async(e->dev, p->grads, 0, (g->hi - g->lo) * sizeof(float),
                                     e->stream);
  return bfail(bs, "zeroing the shard");
}

static esmt_status gs_ok(esmt_param_memory *p) { (void)p; return ESMT_OK; }

static void gs_cancel(esmt_param_memory *p) { gs_grads_changed(p); }

static esmt_status gs_grad_sumsq(esmt_param_memory *p, float *sum) {
  return esmt_param_grad_sumsq_range(p, p->gshard->lo, p->gshard->hi, sum);
}

static void gs_release(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  esmt_grad_shard *g = p->gshard;
  if (g && e->dev) {
    e->ops->stream_sync(e->dev, e->stream);
    esmtb_event *ev[] = {g->reduced[0], g->reduced[1], g->tail};
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
      if (ev[i]) e->ops->event_destroy(e->dev, ev[i]);
    void *dev[] = {g->ends, g->slot[0], g->slot[1]};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
      if (dev[i]) e->ops->free(e->dev, ESMTB_MEM_DEVICE, dev[i]);
  }
  esmt_weight_gather_release(p);
  esmt_offload_zero3_release_host(p); /* offloaded: the host side (offload.c) */
  if (p->norm_dev && e->dev) e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->norm_dev);
  p->norm_dev = NULL; /* a sharded master's (param_shard.c) */
  if (g) free(g->fresh);
  free(g);
  p->gshard = NULL;
  esmt_device_layer.release(p); /* the master, the shard (p->grads), moments, half copy */
}

/* Offloaded (ZeRO-3, offload_zero3.c): the master and the moments are the
 * offload layer's, in host memory. */
static const esmt_param_layer *master_layer(const esmt_param_memory *p) {
  return p->offload ? &esmt_offload_layer : &esmt_device_layer;
}
static esmt_status gs_sync_compute(esmt_param_memory *p, uint64_t off, uint64_t count) {
  return master_layer(p)->sync_compute(p, off, count);
}
static esmt_status gs_copy(esmt_param_memory *p, void *host, void *buf, uint64_t bytes,
                           int to_buf) {
  return master_layer(p)->copy(p, host, buf, bytes, to_buf);
}
static esmt_status gs_weights_needed(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  if (p->wgather) return esmt_weight_gather_needed(p, lo, hi); /* ZeRO-3 */
  return esmt_device_layer.weights_needed(p, lo, hi);
}
static esmt_status gs_step(esmt_param_memory *p, esmt_optim_step *s) {
  return master_layer(p)->step(p, s); /* offloaded: pull the shard, host step, upload it */
}

const esmt_param_layer esmt_grad_shard_layer = {
    "zero2-slots",  gs_sync_compute, gs_copy,  gs_weights_needed, gs_grads_changed,
    gs_zero_grads,  gs_grads_ready,  gs_ok,    gs_ok,             gs_cancel,
    gs_grad_sumsq,  gs_step,         gs_release,
};

static void free_partial(esmt_param_memory *p, esmt_grad_shard *g, float *shard) {
  const esmt_param_env *e = &p->env;
  esmtb_event *ev[] = {g->reduced[0], g->reduced[1], g->tail};
  for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
    if (ev[i]) e->ops->event_destroy(e->dev, ev[i]);
  void *dev[] = {g->ends, g->slot[0], g->slot[1], shard};
  for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
    if (dev[i]) e->ops->free(e->dev, ESMTB_MEM_DEVICE, dev[i]);
  free(g->fresh);
  free(g);
}

esmt_status esmt_param_shard_grads(esmt_param_memory *p, uint64_t lo, uint64_t hi,
                                   esmt_grad_reduce_fn reduce, void *user) {
  const char *fn = "ZeRO-2 gradients";
  const esmt_param_env *e = &p->env;
  if (p->gshard && p->gshard->lo == lo && p->gshard->hi == hi) { /* set up at creation */
    p->gshard->reduce = reduce;
    p->gshard->user = user;
    return ESMT_OK;
  }
  if (p->layer != &esmt_device_layer)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: the %s memory layer keeps its own gradients",
                     fn, p->layer->name);
  if (!e->part_bounds || e->n_parts < 2 || lo > hi || hi > e->total)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: no parts, or the shard [%llu, %llu) is "
                     "not within %llu elements", fn, (unsigned long long)lo,
                     (unsigned long long)hi, (unsigned long long)e->total);
  if (!e->ops->add || !e->ops->event_create)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: backend %s lacks add or events", fn,
                     e->ops->name);
  esmt_grad_shard *g = calloc(1, sizeof *g);
  if (!g) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  g->fresh = malloc((size_t)e->n_parts);
  if (!g->fresh) {
    free(g);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  memset(g->fresh, 1, (size_t)e->n_parts);
  g->lo = lo, g->hi = hi, g->reduce = reduce, g->user = user;
  g->first_n = esmt_param_part_n(e, 0);
  g->last_lo = esmt_param_part_lo(e, e->n_parts - 1);
  g->last_n = esmt_param_part_n(e, e->n_parts - 1);
  g->slot_n = esmt_param_largest_layer(e->part_bounds, e->n_parts);
  g->part[0] = g->part[1] = g->cur = -1;
  float *shard = NULL;
  const uint64_t ends = g->first_n + g->last_n;
  esmt_status st = ESMT_OK;
  esmtb_event **ev[] = {&g->reduced[0], &g->reduced[1], &g->tail};
  for (size_t i = 0; i < sizeof ev / sizeof ev[0] && !st; i++)
    st = bfail(e->ops->event_create(e->dev, ev[i]), "event create");
  /* the whole buffer goes first, so that the peak is never both */
  if (!st) st = bfail(e->ops->stream_sync(e->dev, e->stream), "stream sync");
  if (!st && p->grads) {
    e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->grads);
    p->grads = NULL;
  }
  if (!st) st = esmt_param_dev_alloc(e, (ends ? ends : 1) * sizeof(float), (void **)&g->ends,
                                     "gradients of the end parts");
  for (int i = 0; i < 2 && !st; i++)
    st = esmt_param_dev_alloc(e, (g->slot_n ? g->slot_n : 1) * sizeof(float),
                              (void **)&g->slot[i], "a layer's gradient slot");
  if (!st) st = esmt_param_dev_alloc(e, (hi > lo ? hi - lo : 1) * sizeof(float),
                                     (void **)&shard, "the shard's gradients");
  esmtb_status bs = 0;
  if (!st) bs = e->ops->memset_async(e->dev, g->ends, 0, ends * sizeof(float), e->stream);
  if (!st && !bs) bs = e->ops->memset_async(e->dev, shard, 0, (hi - lo) * sizeof(float),
                                            e->stream);
  if (!st) st = bfail(bs, "zeroing");
  if (st) {
    char own[1024];
    snprintf(own, sizeof own, "%s", esmt_last_error());
    free_partial(p, g, shard);
    if (!p->grads && reduce) { /* back to the whole buffer, if it still fits */
      esmt_status rs = esmt_param_dev_alloc(e, e->total * sizeof(float), (void **)&p->grads,
                                            "gradients");
      if (!rs) rs = bfail(e->ops->memset_async(e->dev, p->grads, 0, e->total * sizeof(float),
                                               e->stream), "zeroing");
      (void)rs;
      esmt_param_resident_views(p);
    }
    return esmt_fail(st, "%s: %s", fn, own);
  }
  p->grads = shard;
  p->grads_lo = lo;
  p->grads_hi = hi;
  p->gshard = g;
  p->layer = &esmt_grad_shard_layer;
  gs_grads_changed(p);
  return ESMT_OK;
}

void esmt_param_shard_grads_unhook(esmt_param_memory *p) {
  if (p && p->gshard) p->gshard->reduce = NULL, p->gshard->user = NULL;
}
