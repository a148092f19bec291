/* SPDX-License-Identifier: MIT */
/* The stream layer: the device side of streamed gradients and weights over
 * the offload layer's host side. The schedule is described in stream.h. */
#include "esmtrain/backend.h"
#include "stream.h"

#include <stdlib.h>
#include <string.h>

#include "param_layer.h"

#define MIB(b) ((double)(b) / 1048576.0)

int esmt_test_stream_drop_weight_wait;
int esmt_test_stream_drop_grad_wait;

/* ---- parts (param_memory.h names them) ---- */

static int part_at(const esmt_param_env *e, uint64_t lo) { return esmt_param_part_at(e, lo); }

esmt_stream_bytes esmt_stream_sizes(int level, const uint64_t *b, int n_parts, int esize,
                                    int n_norm, int d) {
  esmt_stream_bytes r = {0, 0, 0};
  const uint64_t total = b[n_parts], ends = (b[1] - b[0]) + (b[n_parts] - b[n_parts - 1]);
  uint64_t slot = 0;
  for (int k = 1; k + 1 < n_parts; k++)
    if (b[k + 1] - b[k] > slot) slot = b[k + 1] - b[k];
  const uint64_t norms = esize == 4 ? 0 : (uint64_t)n_norm * (uint64_t)d * 4;
  if (level >= ESMT_STREAM_GRADIENTS) {
    r.device_grads = (ends + 2 * slot) * 4;
    r.host_extra = 2 * slot * 4;
  } else {
    r.device_grads = total * 4;
  }
  if (level >= ESMT_STREAM_WEIGHTS) {
    r.device_weights = (ends + 2 * slot) * (uint64_t)esize + norms;
  } else {
    const esmt_offload_shape s = {total, n_norm, d, ESMT_OPTIMIZER_ADAMW, esize};
    r.device_weights = esmt_offload_compute_bytes(&s);
  }
  return r;
}

/* ---- views ---- */

static void set_views(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  esmt_stream *s = p->stream;
  esmt_param_view *g = &p->grad_view;
  *g = (esmt_param_view){0};
  g->esize = sizeof(float);
  g->win[g->n].lo = 0, g->win[g->n].hi = s->first_n, g->win[g->n++].ptr = (char *)s->g_ends;
  g->win[g->n].lo = s->last_lo, g->win[g->n].hi = e->total;
  g->win[g->n++].ptr = (char *)(s->g_ends + s->first_n);
  if (s->g_cur >= 0) {
    const int k = s->g_part[s->g_cur];
    g->win[g->n].lo = esmt_param_part_lo(e, k);
    g->win[g->n].hi = esmt_param_part_lo(e, k) + esmt_param_part_n(e, k);
    g->win[g->n++].ptr = (char *)s->g_slot[s->g_cur];
  }
  if (s->level < ESMT_STREAM_WEIGHTS) return; /* the weights are resident (offload's) */
  esmt_param_view *w = &p->weights;
  *w = (esmt_param_view){0};
  w->esize = e->esize;
  w->win[w->n].lo = 0, w->win[w->n].hi = s->first_n, w->win[w->n++].ptr = s->w_ends;
  w->win[w->n].lo = s->last_lo, w->win[w->n].hi = e->total;
  w->win[w->n++].ptr = s->w_ends + s->first_n * e->esize;
  if (s->w_cur >= 0) {
    const int k = s->w_part[s->w_cur];
    w->win[w->n].lo = esmt_param_part_lo(e, k);
    w->win[w->n].hi = esmt_param_part_lo(e, k) + esmt_param_part_n(e, k);
    w->win[w->n++].ptr = s->w_slot[s->w_cur];
  }
}

/* ---- small wrappers: one message per failing call ---- */

static esmt_status bfail(esmtb_status bs, const char *what) {
  return bs ? esmt_fail_prefix((esmt_status)bs, "stream: %s: ", what) : ESMT_OK;
}

static esmt_status record(esmt_param_memory *p, esmtb_event *ev, esmtb_stream *on) {
  return bfail(p->env.ops->event_record(p->env.dev, ev, on), "event record");
}

static esmt_status wait_on(esmt_param_memory *p, esmtb_stream *s, esmtb_event *ev) {
  return bfail(p->env.ops->stream_wait_event(p->env.dev, s, ev), "stream wait");
}

/* ---- gradients ---- */

/* The host gradients whole: every queued part added, the end parts pulled
 * from the device, parts with nothing since zero_grads zeroed. */
static esmt_status pull(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  esmt_stream *s = p->stream;
  esmt_status st = esmt_host_sums_wait(&s->sums, -1);
  if (st || s->host_ends_valid) return st;
  esmtb_status bs = e->ops->copy_async(e->dev, p->grads, s->g_ends, s->first_n * sizeof(float),
                                       ESMTB_COPY_D2H, e->stream);
  if (!bs) bs = e->ops->copy_async(e->dev, p->grads + s->last_lo, s->g_ends + s->first_n,
                                   s->last_n * sizeof(float), ESMTB_COPY_D2H, e->stream);
  if (!bs) bs = e->ops->stream_sync(e->dev, e->stream);
  if ((st = bfail(bs, "gradient download"))) return st;
  for (int k = 1; k + 1 < e->n_parts; k++)
    if (s->g_fresh[k])
      memset(p->grads + esmt_param_part_lo(e, k), 0,
             (size_t)esmt_param_part_n(e, k) * sizeof(float));
  s->host_ends_valid = 1;
  return ESMT_OK;
}

/* Backward begins (or the gradients were written): nothing of this pass
 * is final yet; the host's end parts are stale. */
static void st_grads_changed(esmt_param_memory *p) {
  esmt_stream *s = p->stream;
  s->g_final_from = p->env.total;
  s->g_cur = -1;
  s->host_ends_valid = 0;
  set_views(p);
}

static esmt_status st_grads_ready(esmt_param_memory *p, uint64_t from) {
  const esmt_param_env *e = &p->env;
  esmt_stream *s = p->stream;
  const int kf = part_at(e, from);
  if (kf < 0 || esmt_param_part_lo(e, kf) + esmt_param_part_n(e, kf) != s->g_final_from)
    return esmt_fail(ESMT_ERR_INTERNAL, "stream: gradients final from %llu, which is not the part "
                     "before %llu", (unsigned long long)from, (unsigned long long)s->g_final_from);
  esmt_status st = ESMT_OK;
  if (!esmt_param_part_is_end(e, kf)) { /* its slot goes down to the host while backward goes on */
    const int i = s->g_cur;
    st = esmt_host_sums_wait(&s->sums, i); /* the bounce buffer's last sum is done */
    if (!st) st = record(p, s->g_done[i], e->stream);
    if (!st) st = wait_on(p, p->offload->copy, s->g_done[i]);
    if (!st)
      st = bfail(e->ops->copy_async(e->dev, s->g_bounce[i], s->g_slot[i],
                                    esmt_param_part_n(e, kf) * sizeof(float), ESMTB_COPY_D2H,
                                    p->offload->copy), "gradient copy");
    if (!st) st = record(p, s->g_copied[i], p->offload->copy);
    const esmt_host_sum_job job = {s->g_copied[i], s->g_bounce[i],
                                   p->grads + esmt_param_part_lo(e, kf),
                                   esmt_param_part_n(e, kf), s->g_fresh[kf]};
    if (!st) st = esmt_host_sums_push(&s->sums, i, &job);
    if (st) return st;
    s->g_copying[i] = 1;
    s->g_fresh[kf] = 0;
    s->parts_streamed_down++;
  }
  s->g_final_from = from;
  const int kn = kf - 1; /* the part backward produces next */
  if (kn < 1) { /* the embedding (resident), or the pass is over */
    s->g_cur = -1;
    set_views(p);
    return ESMT_OK;
  }
  const int i = s->g_cur >= 0 ? 1 - s->g_cur : 0;
  /* the slot's previous part has left it before backward writes it again */
  if (s->g_copying[i] && !esmt_test_stream_drop_grad_wait &&
      (st = wait_on(p, e->stream, s->g_copied[i])))
    return st;
  s->g_copying[i] = 0;
  st = bfail(e->ops->memset_async(e->dev, s->g_slot[i], 0, esmt_param_part_n(e, kn) * sizeof(float),
                                  e->stream), "zeroing a gradient slot");
  if (st) return st;
  s->g_part[i] = kn;
  s->g_cur = i;
  set_views(p);
  return ESMT_OK;
}

static esmt_status st_zero_grads(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  esmt_stream *s = p->stream;
  /* copies in flight land and their sums end before the sums are forgotten */
  esmt_status st = esmt_host_sums_wait(&s->sums, -1);
  if (st) return st;
  memset(s->g_fresh, 1, (size_t)e->n_parts);
  st_grads_changed(p);
  return bfail(e->ops->memset_async(e->dev, s->g_ends, 0, (s->first_n + s->last_n) * sizeof(float),
                                    e->stream), "zeroing the gradients");
}

static esmt_status st_ok(esmt_param_memory *p) { (void)p; return ESMT_OK; }

static void st_cancel(esmt_param_memory *p) {
  /* a failed backward: its gradients are lost anyway; let the copies land */
  esmt_stream *s = p->stream;
  p->env.ops->stream_sync(p->env.dev, p->offload->copy);
  if (esmt_host_sums_wait(&s->sums, -1)) esmt_clear_error();
  st_grads_changed(p);
}

static esmt_status st_grad_sumsq(esmt_param_memory *p, float *sum) {
  esmt_status st = pull(p);
  return st ? st : esmt_offload_host_sumsq(p, sum);
}

/* ---- weights ---- */

/* Queue the upload of part k into slot i on the copy stream, after the
 * compute stream's last read of the slot's previous part. */
static esmt_status fill(esmt_param_memory *p, int i, int k) {
  const esmt_param_env *e = &p->env;
  esmt_stream *s = p->stream;
  esmtb_stream *copy = p->offload->copy;
  esmt_status st = s->w_free_set[i] ? wait_on(p, copy, s->w_free[i]) : ESMT_OK;
  const char *src = e->dtype == ESMTB_F32 ? (const char *)p->master : (const char *)p->offload->staging;
  if (!st)
    st = bfail(e->ops->copy_async(e->dev, s->w_slot[i], src + esmt_param_part_lo(e, k) * e->esize,
                                  esmt_param_part_n(e, k) * e->esize, ESMTB_COPY_H2D, copy),
               "weight upload");
  if (!st) st = record(p, s->w_loaded[i], copy);
  if (st) return st;
  s->w_part[i] = k;
  s->w_free_set[i] = 0;
  s->uploads++;
  return ESMT_OK;
}

/* Part k (a middle part) into the slot the compute stream does not read,
 * unless a slot has it already. */
static esmt_status prefetch(esmt_param_memory *p, int k) {
  esmt_stream *s = p->stream;
  if (k < 1 || k > p->env.n_parts - 2 || s->w_part[0] == k || s->w_part[1] == k) return ESMT_OK;
  return fill(p, s->w_cur >= 0 ? 1 - s->w_cur : (s->w_part[0] < 0 ? 0 : 1), k);
}

static esmt_status st_weights_needed(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  const esmt_param_env *e = &p->env;
  esmt_stream *s = p->stream;
  if (s->level < ESMT_STREAM_WEIGHTS) return ESMT_OK; /* resident */
  const int k = part_at(e, lo);
  if (k < 0 || hi != lo + esmt_param_part_n(e, k))
    return esmt_fail(ESMT_ERR_INTERNAL, "stream: weights [%llu, %llu) asked for, not a part",
                     (unsigned long long)lo, (unsigned long long)hi);
  const int n = e->n_parts;
  if (esmt_param_part_is_end(e, k)) {
    /* The head starts a backward (layers top-down next); the embedding
     * starts a forward (bottom-up), unless it is the head's tied decoder. */
    const int after_head = s->last_part == n - 1;
    if (k == n - 1 || !after_head) s->dir = k == n - 1 ? -1 : 1;
    s->last_part = k;
    if (k == 0 && after_head) return ESMT_OK;
    return prefetch(p, k == 0 ? 1 : n - 2);
  }
  esmt_status st = ESMT_OK;
  if (!(s->w_cur >= 0 && s->w_part[s->w_cur] == k)) { /* (else: recompute, then its backward) */
    if (s->w_cur >= 0) { /* every read of the current slot is queued */
      if ((st = record(p, s->w_free[s->w_cur], e->stream))) return st;
      s->w_free_set[s->w_cur] = 1;
    }
    int i = s->w_part[0] == k ? 0 : s->w_part[1] == k ? 1 : -1;
    if (i < 0) { /* not prefetched */
      i = s->w_cur >= 0 ? 1 - s->w_cur : 0;
      if ((st = fill(p, i, k))) return st;
    } else {
      s->prefetch_hits++;
    }
    if (!esmt_test_stream_drop_weight_wait && (st = wait_on(p, e->stream, s->w_loaded[i])))
      return st;
    if (s->last_part >= 1 && s->last_part < n - 1) s->dir = k > s->last_part ? 1 : -1;
    s->w_cur = i;
    set_views(p);
  }
  s->last_part = k;
  return prefetch(p, k + s->dir);
}

/* Weights changed on the host (a write, the optimizer): no upload may be
 * reading the host image while it changes, and the slots are stale. */
static esmt_status forget_slots(esmt_param_memory *p) {
  esmt_stream *s = p->stream;
  esmt_status st = ESMT_OK;
  if (s->w_cur >= 0) {
    st = record(p, s->w_free[s->w_cur], p->env.stream);
    s->w_free_set[s->w_cur] = 1;
  }
  if (!st) st = bfail(p->env.ops->stream_sync(p->env.dev, p->offload->copy), "weight upload");
  s->w_part[0] = s->w_part[1] = -1;
  s->w_cur = -1;
  s->last_part = -1;
  s->dir = 1;
  set_views(p);
  return st;
}

/* The end parts and (half) the LayerNorm w/b from the host image. */
static esmt_status upload_resident(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  esmt_stream *s = p->stream;
  const char *src = e->dtype == ESMTB_F32 ? (const char *)p->master : (const char *)p->offload->staging;
  esmtb_status bs = e->ops->copy_async(e->dev, s->w_ends, src, s->first_n * e->esize,
                                       ESMTB_COPY_H2D, e->stream);
  if (!bs) bs = e->ops->copy_async(e->dev, s->w_ends + s->first_n * e->esize,
                                   src + s->last_lo * e->esize, s->last_n * e->esize,
                                   ESMTB_COPY_H2D, e->stream);
  if (!bs && p->norm_dev)
    bs = e->ops->copy_async(e->dev, p->norm_dev, esmt_offload_gather_norms(p),
                            (uint64_t)e->n_norm * e->d * sizeof(float), ESMTB_COPY_H2D, e->stream);
  if (!bs) bs = e->ops->stream_sync(e->dev, e->stream);
  return bfail(bs, "weight upload");
}

static esmt_status st_sync_compute(esmt_param_memory *p, uint64_t off, uint64_t count) {
  if (p->stream->level < ESMT_STREAM_WEIGHTS) return esmt_offload_push_weights(p, off, count);
  esmt_status st = forget_slots(p);
  if (!st && p->env.dtype != ESMTB_F32) st = esmt_offload_stage(p, off, count);
  return st ? st : upload_resident(p);
}

static esmt_status st_step(esmt_param_memory *p, esmt_optim_step *os) {
  esmt_status st = pull(p);
  if (!st && p->stream->level >= ESMT_STREAM_WEIGHTS) st = forget_slots(p);
  if (!st) st = esmt_offload_host_step(p, os);
  if (st) return st;
  return p->stream->level >= ESMT_STREAM_WEIGHTS ? upload_resident(p) : esmt_offload_upload(p);
}

/* ---- copies, release ---- */

static int in_host_grads(const esmt_param_memory *p, const void *buf) {
  const char *b = buf, *g = (const char *)p->grads;
  return b >= g && b < g + p->env.total * sizeof(float);
}

static esmt_status st_copy(esmt_param_memory *p, void *host, void *buf, uint64_t bytes,
                           int to_buf) {
  if (in_host_grads(p, buf)) {
    esmt_stream *s = p->stream;
    esmt_status st = pull(p);
    if (st) return st;
    if (!to_buf) {
      memcpy(host, buf, (size_t)bytes);
      return ESMT_OK;
    }
    memcpy(buf, host, (size_t)bytes);
    memset(s->g_fresh, 0, (size_t)p->env.n_parts); /* pulled: every part is real */
    const esmt_param_env *e = &p->env; /* the end parts live on the device */
    esmtb_status bs = e->ops->copy_async(e->dev, s->g_ends, p->grads, s->first_n * sizeof(float),
                                         ESMTB_COPY_H2D, e->stream);
    if (!bs) bs = e->ops->copy_async(e->dev, s->g_ends + s->first_n, p->grads + s->last_lo,
                                     s->last_n * sizeof(float), ESMTB_COPY_H2D, e->stream);
    if (!bs) bs = e->ops->stream_sync(e->dev, e->stream);
    return bfail(bs, "gradient upload");
  }
  if (esmt_offload_is_master(p, buf)) { /* both in host memory */
    if (to_buf) memcpy(buf, host, (size_t)bytes);
    else memcpy(host, buf, (size_t)bytes);
    return ESMT_OK;
  }
  return esmt_device_layer.copy(p, host, buf, bytes, to_buf);
}

static void st_release(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  esmt_stream *s = p->stream;
  if (s) esmt_host_sums_stop(&s->sums); /* before the events and buffers it uses go */
  if (s && e->dev) {
    if (p->offload && p->offload->copy) e->ops->stream_sync(e->dev, p->offload->copy);
    esmtb_event *ev[] = {s->w_loaded[0], s->w_loaded[1], s->w_free[0], s->w_free[1],
                         s->g_done[0],   s->g_done[1],   s->g_copied[0], s->g_copied[1]};
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
      if (ev[i]) e->ops->event_destroy(e->dev, ev[i]);
    void *dev[] = {s->w_ends, s->w_slot[0], s->w_slot[1], s->g_ends, s->g_slot[0], s->g_slot[1],
                   s->level >= ESMT_STREAM_WEIGHTS ? p->norm_dev : NULL, p->compute32,
                   p->compute_lowp};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
      if (dev[i]) e->ops->free(e->dev, ESMTB_MEM_DEVICE, dev[i]);
  }
  if (s) free(s->g_fresh);
  free(s);
  p->stream = NULL;
  esmt_offload_destroy(p); /* the host side */
  memset(p, 0, sizeof *p);
}

const esmt_param_layer esmt_stream_layer = {
    "stream",       st_sync_compute, st_copy,    st_weights_needed, st_grads_changed,
    st_zero_grads,  st_grads_ready,  st_ok,      st_ok,             st_cancel,
    st_grad_sumsq,  st_step,         st_release,
};

/* ---- setup ---- */

static esmt_status dev_alloc(esmt_param_memory *p, uint64_t bytes, void **out, const char *what) {
  return esmt_param_dev_alloc(&p->env, bytes ? bytes : 1, out, what);
}

esmt_status esmt_stream_setup(esmt_param_memory *p, const esmt_offload_options *o) {
  const char *fn = "esmt_model_create: stream";
  const esmt_param_env *e = &p->env;
  if (o->streamed != ESMT_STREAM_GRADIENTS && o->streamed != ESMT_STREAM_WEIGHTS)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: unknown level %d", fn, o->streamed);
  if (!e->part_bounds || e->n_parts < 2)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: the model names no parts", fn);
  if (!e->ops->event_sync)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: backend %s cannot wait for an event", fn,
                     e->ops->name);
  esmt_status st = esmt_offload_setup_host(p, o); /* also checks streams and events */
  if (st) return st;
  if (!p->offload->hops->add)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: the cpu backend has no add op for the host's "
                     "gradient sums", fn);
  esmt_stream *s = calloc(1, sizeof *s);
  if (!s) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  p->stream = s;
  s->level = o->streamed;
  s->first_n = esmt_param_part_n(e, 0);
  s->last_lo = esmt_param_part_lo(e, e->n_parts - 1);
  s->last_n = esmt_param_part_n(e, e->n_parts - 1);
  for (int k = 1; k + 1 < e->n_parts; k++)
    if (esmt_param_part_n(e, k) > s->slot_n) s->slot_n = esmt_param_part_n(e, k);
  s->w_part[0] = s->w_part[1] = s->g_part[0] = s->g_part[1] = -1;
  s->w_cur = s->g_cur = s->last_part = -1;
  s->dir = 1;
  s->g_fresh = malloc((size_t)e->n_parts);
  if (!s->g_fresh) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  memset(s->g_fresh, 1, (size_t)e->n_parts);
  esmtb_event **ev[] = {&s->w_loaded[0], &s->w_loaded[1], &s->w_free[0], &s->w_free[1],
                        &s->g_done[0],   &s->g_done[1],   &s->g_copied[0], &s->g_copied[1]};
  for (size_t i = 0; i < sizeof ev / sizeof ev[0] && !st; i++)
    st = bfail(e->ops->event_create(e->dev, ev[i]), "event create");
  /* The gradients: the host's (offload's) are the whole; the device keeps
   * the end parts and two slots; two pinned bounce buffers. */
  p->grads = p->offload->grads;
  const uint64_t ends = s->first_n + s->last_n;
  if (!st) st = dev_alloc(p, ends * sizeof(float), (void **)&s->g_ends, "gradients of the end parts");
  for (int i = 0; i < 2 && !st; i++) {
    st = dev_alloc(p, s->slot_n * sizeof(float), (void **)&s->g_slot[i], "a layer's gradient slot");
    if (!st) st = esmt_offload_host_alloc(p, s->slot_n * sizeof(float), "gradient bounce buffer",
                                          (void **)&s->g_bounce[i]);
  }
  if (!st) st = bfail(e->ops->memset_async(e->dev, s->g_ends, 0, ends * sizeof(float), e->stream),
                      "zeroing the gradients");
  if (!st) st = esmt_host_sums_start(&s->sums, e->ops, e->dev, p->offload->hops, p->offload->hdev);
  /* The weights: resident (offload's device side), or the end parts, two
   * slots and, in half, the LayerNorm w/b. */
  if (!st && s->level < ESMT_STREAM_WEIGHTS) {
    st = esmt_offload_setup_device(p);
    if (!st) esmt_param_resident_views(p);
  } else if (!st) {
    st = dev_alloc(p, ends * e->esize, (void **)&s->w_ends, "compute weights of the end parts");
    for (int i = 0; i < 2 && !st; i++)
      st = dev_alloc(p, s->slot_n * e->esize, (void **)&s->w_slot[i], "a layer's weight slot");
    if (!st && e->dtype != ESMTB_F32)
      st = dev_alloc(p, (uint64_t)e->n_norm * e->d * sizeof(float), (void **)&p->norm_dev,
                     "LayerNorm weights");
  }
  if (st) return st;
  set_views(p);
  const esmt_stream_bytes b = esmt_stream_sizes(s->level, e->part_bounds, e->n_parts,
                                                (int)e->esize, e->n_norm, e->d);
  esmt_logger_log(&e->ctx->logger, ESMT_LOG_INFO,
                  "stream: %s leave the device part by part: %.1f MiB of device memory for "
                  "the compute weights, %.1f MiB for the gradients (two slots of %.1f MiB "
                  "and the embedding and head)",
                  s->level >= ESMT_STREAM_WEIGHTS ? "weights and gradients" : "gradients",
                  MIB(b.device_weights), MIB(b.device_grads), MIB(s->slot_n * sizeof(float)));
  return ESMT_OK;
}
