/* SPDX-License-Identifier: MIT */
/* Optimizer offload: host buffers, the gradient copy schedule, the host
 * AdamW and the weight push. The schedule is described in offload.h. */
#include "esmtrain/backend.h"
#include "offload.h"

#include "dtype.h"
#include "param_layer.h"
#include "param_shard.h"
#include "registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB(b) ((double)(b) / 1048576.0)
#define ALIGN256(x) (((x) + 255u) & ~(uint64_t)255u)

uint64_t esmt_offload_compute_bytes(const esmt_offload_shape *s) {
  if (s->esize == 4) return s->params * 4;
  return ALIGN256(s->params * (uint64_t)s->esize) + (uint64_t)s->n_norm * (uint64_t)s->d * 4;
}

uint64_t esmt_offload_host_bytes(const esmt_offload_shape *s) {
  /* master weights, gradients, the optimizer's state (AdamW m and v, Lion
   * m); the staging image in half */
  return s->params * 8 + esmt_optimizer_state_bytes(s->optimizer, s->params) +
         (s->esize == 4 ? 0 : esmt_offload_compute_bytes(s));
}

uint64_t esmt_offload_host_bytes_sharded(const esmt_offload_shape *s, int zero_level,
                                         int world) {
  esmt_offload_shape shard = *s;
  if (zero_level >= 1 && world > 1) shard.params = esmt_zero_shard_max(s->params, world);
  return esmt_offload_host_bytes(&shard);
}

int esmt_offload_sharded(const esmt_param_memory *p) {
  return p->offload && (p->offload->lo != 0 || p->offload->hi != p->env.total);
}

/* The host buffers' shape: `params` elements (the whole buffer or a shard). */
static esmt_offload_shape shape_of(const esmt_param_env *e, uint64_t params) {
  return (esmt_offload_shape){params, e->n_norm, e->d, e->optimizer, (int)e->esize};
}

/* The elements of [*a, *b) the host holds: 0 when none. */
static int clip_held(const esmt_offload *o, uint64_t *a, uint64_t *b) {
  if (*a < o->lo) *a = o->lo;
  if (*b > o->hi) *b = o->hi;
  return *a < *b;
}

/* The LayerNorm elements of the held range: norm_dev[*nlo, *nhi). */
static void held_norms(const esmt_param_memory *p, uint64_t *nlo, uint64_t *nhi) {
  const uint64_t cut[2] = {p->offload->lo, p->offload->hi};
  uint64_t n[2];
  esmt_param_norm_split(p, cut, 1, n);
  *nlo = n[0];
  *nhi = n[1];
}

/* ZeRO with offload: the rank's shard [*lo, *hi) of the options' split. */
static esmt_status shard_of(const esmt_param_env *e, const esmt_offload_options *opt,
                            uint64_t *lo, uint64_t *hi) {
  *lo = 0;
  *hi = e->total;
  if (opt->zero_level < 1 || opt->zero_world <= 1 || opt->streamed != ESMT_STREAM_NONE)
    return ESMT_OK;
  if (opt->zero_rank < 0 || opt->zero_rank >= opt->zero_world)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_model_create: offload: ZeRO rank %d of %d",
                     opt->zero_rank, opt->zero_world);
  /* the ranks gather norm_dev by rank: its tensors must be in flat order */
  for (int i = 1; e->dtype != ESMTB_F32 && i < e->n_norm; i++)
    if (e->norm_offs[i] < e->norm_offs[i - 1] + (uint64_t)e->d)
      return esmt_fail(ESMT_ERR_UNSUPPORTED, "esmt_model_create: offload with ZeRO: the "
                       "LayerNorm tensors are not in flat order");
  uint64_t *off = calloc((size_t)opt->zero_world + 1, sizeof *off);
  if (!off) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_model_create: out of memory");
  esmt_zero_split(e->total, opt->zero_world, off);
  *lo = off[opt->zero_rank];
  *hi = off[opt->zero_rank + 1];
  free(off);
  return ESMT_OK;
}

int esmt_offload_is_master(const esmt_param_memory *p, const void *buf) {
  if (!p->offload || !buf) return 0;
  const char *b = buf;
  const uint64_t bytes = (p->offload->hi - p->offload->lo) * sizeof(float);
  const float *mb[3] = {p->master, p->moment1, p->moment2};
  for (int i = 0; i < 3; i++)
    if (mb[i] && b >= (const char *)mb[i] && b < (const char *)mb[i] + bytes) return 1;
  return 0;
}

esmt_status esmt_offload_host_alloc(esmt_param_memory *pm, uint64_t bytes, const char *what,
                                    void **out) {
  const esmt_param_env *e = &pm->env;
  esmt_offload *o = pm->offload;
  const esmt_logger *lg = &e->ctx->logger;
  void *p = NULL;
  int pinned = 0;
  if (!o->pinned_limit || o->pinned_bytes + bytes <= o->pinned_limit) {
    esmtb_status bs = e->ops->alloc(e->dev, ESMTB_MEM_PINNED_HOST, bytes, &p);
    if (!bs && p) {
      pinned = 1;
    } else {
      p = NULL;
      esmt_logger_log(lg, ESMT_LOG_WARN,
                      "offload: pinned allocation of %s (%.1f MiB) failed (%s); using pageable "
                      "host memory (slower copies)", what, MIB(bytes), esmt_last_error());
    }
  } else {
    esmt_logger_log(lg, ESMT_LOG_WARN,
                    "offload: %s (%.1f MiB) in pageable host memory: offload.pinned_memory_limit "
                    "%.1f MiB would be exceeded (%.1f MiB pinned so far); its copies are slower",
                    what, MIB(bytes), MIB(o->pinned_limit), MIB(o->pinned_bytes));
  }
  if (!p) {
    p = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
    if (!p)
      return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "offload: out of host memory for %s (%.1f MiB)",
                       what, MIB(bytes));
  }
  o->bufs[o->nbufs].ptr = p;
  o->bufs[o->nbufs].bytes = bytes;
  o->bufs[o->nbufs].pinned = pinned;
  o->nbufs++;
  if (pinned) o->pinned_bytes += bytes;
  else o->pageable_bytes += bytes;
  memset(p, 0, (size_t)bytes);
  *out = p;
  return ESMT_OK;
}

static const esmt_backend_entry *host_backend(const esmt_context *ctx) {
  for (int i = 0; i < ctx->registry.count; i++) {
    const esmt_backend_entry *e = &ctx->registry.entries[i];
    if (e->loaded && e->probe.available && strcmp(e->name, "cpu") == 0) return e;
  }
  return NULL;
}

esmt_status esmt_offload_setup_host(esmt_param_memory *p, const esmt_offload_options *opt) {
  const char *fn = "esmt_model_create: offload";
  const esmt_param_env *e = &p->env;
  esmt_offload *o = calloc(1, sizeof *o);
  if (!o) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  p->offload = o;
  o->pinned_limit = opt->pinned_limit;
  const esmt_backend_entry *he = host_backend(e->ctx);
  if (!he)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: the host optimizer is the cpu backend (cpu.so), "
                     "which was not loaded from %s", fn,
                     e->ctx->registry.searched[0] ? e->ctx->registry.searched : "the backend path");
  o->hops = he->ops;
  if (!o->hops->open || !o->hops->adamw || !o->hops->sumsq || !o->hops->convert)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: the cpu backend lacks adamw, sumsq or convert", fn);
  if (e->optimizer == ESMT_OPTIMIZER_LION && !esmt_ops_has_lion(o->hops))
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: the cpu backend (ABI %u.%u) has no Lion op "
                     "(the \"optimizer\" group's lion): use optimizer.kind adamw", fn,
                     (unsigned)o->hops->abi_major, (unsigned)o->hops->abi_minor);
  if (!e->ops->stream_create || !e->ops->event_create || !e->ops->event_record ||
      !e->ops->stream_wait_event)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: backend %s has no streams/events", fn, e->ops->name);
  esmtb_open_options oo = {sizeof oo, 0, e->ctx->num_threads, 0};
  esmtb_status bs = o->hops->open(&oo, &o->hdev);
  if (!bs) bs = e->ops->stream_create(e->dev, &o->copy);
  if (!bs) bs = e->ops->event_create(e->dev, &o->ready);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "%s: ", fn);
  esmt_status st = shard_of(e, opt, &o->lo, &o->hi);
  if (st) return st;
  o->zero_level = opt->streamed == ESMT_STREAM_NONE && opt->zero_level > 0 ? opt->zero_level : 0;
  /* the master and the moments of the held range (ZeRO: the rank's shard) */
  p->master_lo = p->opt_lo = o->lo;
  p->master_hi = p->opt_hi = o->hi;

  const uint64_t P = o->hi - o->lo, bytes = (P ? P : 1) * sizeof(float);
  const int es = (int)e->esize;
  const esmt_offload_shape shape = shape_of(e, P);
  const uint64_t need = esmt_offload_host_bytes(&shape);
  const int nstate = esmt_optimizer_state_count(e->optimizer);
  char held[160] = "";
  if (P != e->total)
    snprintf(held, sizeof held, " for this rank's ZeRO-%d shard [%llu, %llu) of %llu",
             opt->zero_level, (unsigned long long)o->lo, (unsigned long long)o->hi,
             (unsigned long long)e->total);
  esmt_logger_log(&e->ctx->logger, ESMT_LOG_INFO,
                  "offload: optimizer on the host (%s %s): %.1f MiB of host RAM%s (fp32 master "
                  "weights, %s, fp32 gradients%s), pinned %s %.1f MiB; the device "
                  "keeps the %s weights and fp32 gradients",
                  o->hops->name, esmt_optimizer_name(e->optimizer), MIB(need), held,
                  nstate > 1 ? "its two moments" : "its moment", es == 4 ? "" : ", the compute-weight staging copy",
                  o->pinned_limit ? "up to offload.pinned_memory_limit" : "all (no cap):",
                  MIB(o->pinned_limit ? o->pinned_limit : need), esmt_dtype_name(e->dtype));
  /* Pinned first where the DMA engine reads or writes: the gradients (D2H)
   * and the upload source (the staging image in half, the master in fp32);
   * the moments are only touched by the host AdamW, so under a cap they are
   * the first to go pageable. */
  st = esmt_offload_host_alloc(p, bytes, "host gradients", (void **)&o->grads);
  if (!st && es != 4) {
    o->staging_bytes = esmt_offload_compute_bytes(&shape);
    st = esmt_offload_host_alloc(p, o->staging_bytes, "compute-weight staging", &o->staging);
  }
  if (!st) st = esmt_offload_host_alloc(p, bytes, "fp32 master weights", (void **)&p->master);
  if (!st) st = esmt_offload_host_alloc(p, bytes, "optimizer first moments", (void **)&p->moment1);
  if (!st && nstate > 1) st = esmt_offload_host_alloc(p, bytes, "AdamW second moments", (void **)&p->moment2);
  return st;
}

esmt_status esmt_offload_setup(esmt_param_memory *p, const esmt_offload_options *opt) {
  esmt_status st = esmt_offload_setup_host(p, opt);
  return st ? st : esmt_offload_setup_device(p);
}

esmt_status esmt_offload_setup_device(esmt_param_memory *p) {
  esmt_status st;
  const esmt_param_env *e = &p->env;
  const uint64_t P = e->total, bytes = P * sizeof(float);
  const int es = (int)e->esize;
  const esmt_offload_shape whole = shape_of(e, P); /* the compute copy is whole on every rank */
  if (es == 4) {
    st = esmt_param_dev_alloc(e, bytes, (void **)&p->compute32, "fp32 compute weights");
  } else {
    st = esmt_param_dev_alloc(e, esmt_offload_compute_bytes(&whole), &p->compute_lowp,
                              "half-precision weights and norms");
    if (!st) p->norm_dev = (float *)(void *)((char *)p->compute_lowp + ALIGN256(P * (uint64_t)es));
  }
  return st;
}

void esmt_offload_destroy(esmt_param_memory *p) {
  esmt_offload *o = p->offload;
  if (!o) return;
  if (p->env.dev) {
    if (o->copy) {
      p->env.ops->stream_sync(p->env.dev, o->copy);
      p->env.ops->stream_destroy(p->env.dev, o->copy);
    }
    if (o->ready) p->env.ops->event_destroy(p->env.dev, o->ready);
  }
  for (int i = 0; i < o->nbufs; i++) {
    if (o->bufs[i].pinned) p->env.ops->free(p->env.dev, ESMTB_MEM_PINNED_HOST, o->bufs[i].ptr);
    else free(o->bufs[i].ptr);
  }
  if (o->hdev) o->hops->close(o->hdev);
  p->master = p->moment1 = p->moment2 = NULL;
  free(o);
  p->offload = NULL;
}

static esmt_status h2d(esmt_param_memory *p, void *dst, const void *src, uint64_t bytes) {
  esmtb_status cs = p->env.ops->copy_async(p->env.dev, dst, src, bytes, ESMTB_COPY_H2D, p->env.stream);
  return cs ? esmt_fail_prefix((esmt_status)cs, "offload: weight upload: ") : ESMT_OK;
}

float *esmt_offload_gather_norms(esmt_param_memory *p) {
  esmt_offload *o = p->offload;
  const esmt_param_env *e = &p->env;
  float *dst = (float *)(void *)((char *)o->staging + ALIGN256((o->hi - o->lo) * (uint64_t)e->esize));
  for (int i = 0; i < e->n_norm; i++) { /* what the host holds of each (a shard: a part) */
    uint64_t a = e->norm_offs[i], b = a + (uint64_t)e->d;
    if (clip_held(o, &a, &b))
      memcpy(dst + (uint64_t)i * e->d + (a - e->norm_offs[i]), p->master + (a - o->lo),
             (size_t)(b - a) * sizeof(float));
  }
  return dst;
}

esmt_status esmt_offload_stage(esmt_param_memory *p, uint64_t offset, uint64_t count) {
  esmt_offload *o = p->offload;
  uint64_t a = offset, b = offset + count;
  if (!clip_held(o, &a, &b)) return ESMT_OK;
  esmtb_convert_args c = {sizeof c, b - a, p->master + (a - o->lo), ESMTB_F32,
                          (char *)o->staging + (a - o->lo) * p->env.esize, p->env.dtype};
  esmtb_status bs = o->hops->convert(o->hdev, &c, NULL);
  return bs ? esmt_fail_prefix((esmt_status)bs, "offload: converting the weights: ") : ESMT_OK;
}

/* The held LayerNorm elements from the staging image to norm_dev. */
static esmt_status push_norms(esmt_param_memory *p, const float *norms) {
  uint64_t nlo, nhi;
  held_norms(p, &nlo, &nhi);
  return nhi > nlo ? h2d(p, p->norm_dev + nlo, norms + nlo, (nhi - nlo) * sizeof(float)) : ESMT_OK;
}

esmt_status esmt_offload_push_weights(esmt_param_memory *p, uint64_t offset, uint64_t count) {
  esmt_offload *o = p->offload;
  esmt_status st = ESMT_OK;
  uint64_t a = offset, b = offset + count; /* a shard pushes what it holds; the ranks gather */
  if (!clip_held(o, &a, &b)) return ESMT_OK;
  const size_t es = p->env.esize;
  if (!p->compute_lowp) {
    st = h2d(p, p->compute32 + (a - p->compute_lo), p->master + (a - o->lo),
             (b - a) * sizeof(float));
  } else {
    if ((st = esmt_offload_stage(p, a, b - a))) return st;
    const float *norms = esmt_offload_gather_norms(p);
    st = h2d(p, (char *)p->compute_lowp + (a - p->compute_lo) * es,
             (char *)o->staging + (a - o->lo) * es,
             (b - a) * es);
    if (!st) st = push_norms(p, norms);
  }
  esmtb_status ss = st ? 0 : p->env.ops->stream_sync(p->env.dev, p->env.stream);
  if (ss) st = esmt_fail_prefix((esmt_status)ss, "offload: weight upload: ");
  return st;
}

esmt_status esmt_offload_arm(esmt_param_memory *p) {
  esmt_offload *o = p->offload;
  /* a shard pulls its gradients once they are reduced (data parallel) */
  if (esmt_offload_sharded(p)) return ESMT_OK;
  /* The copy stream may still hold nothing: every update ends in finish. */
  o->armed = 1;
  o->pending_end = p->env.total;
  o->host_grads_valid = 0;
  return ESMT_OK;
}

esmt_status esmt_offload_grads_ready(esmt_param_memory *p, uint64_t from) {
  esmt_offload *o = p->offload;
  if (!o->armed || from >= o->pending_end) return ESMT_OK;
  /* Bucket [from, pending_end): ordered after the compute stream's work so
   * far by the event, copied while the compute stream goes on. */
  esmtb_status bs = p->env.ops->event_record(p->env.dev, o->ready, p->env.stream);
  if (!bs) bs = p->env.ops->stream_wait_event(p->env.dev, o->copy, o->ready);
  if (!bs)
    bs = p->env.ops->copy_async(p->env.dev, o->grads + from, p->grads + from,
                            (o->pending_end - from) * sizeof(float), ESMTB_COPY_D2H, o->copy);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "offload: gradient copy: ");
  o->pending_end = from;
  o->buckets_streamed++;
  return ESMT_OK;
}

esmt_status esmt_offload_finish(esmt_param_memory *p) {
  esmt_offload *o = p->offload;
  if (!o->armed) return ESMT_OK;
  o->armed = 0;
  esmtb_status bs = p->env.ops->stream_sync(p->env.dev, o->copy);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "offload: gradient copy: ");
  o->host_grads_valid = o->pending_end == 0; /* else pulled in one copy later */
  return ESMT_OK;
}

void esmt_offload_cancel(esmt_param_memory *p) {
  esmt_offload *o = p->offload;
  if (o->armed) p->env.ops->stream_sync(p->env.dev, o->copy);
  o->armed = 0;
  o->host_grads_valid = 0;
}

void esmt_offload_grads_changed(esmt_param_memory *p) {
  if (!p->offload->armed) p->offload->host_grads_valid = 0;
}

esmt_status esmt_offload_pull_grads(esmt_param_memory *p) {
  esmt_offload *o = p->offload;
  if (o->host_grads_valid) return ESMT_OK;
  esmtb_status bs = p->env.ops->copy_async(p->env.dev, o->grads, p->grads + (o->lo - p->grads_lo),
                                           (o->hi - o->lo) * sizeof(float), ESMTB_COPY_D2H,
                                           p->env.stream);
  if (!bs) bs = p->env.ops->stream_sync(p->env.dev, p->env.stream);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "offload: gradient download: ");
  o->host_grads_valid = 1;
  o->full_pulls++;
  return ESMT_OK;
}

esmt_status esmt_offload_grad_sumsq(esmt_param_memory *p, float *sum) {
  esmt_status st = esmt_offload_pull_grads(p);
  return st ? st : esmt_offload_host_sumsq(p, sum);
}

esmt_status esmt_offload_host_sumsq(esmt_param_memory *p, float *sum) {
  esmt_offload *o = p->offload;
  *sum = 0.0f;
  esmtb_sumsq_args s = {sizeof s, o->hi - o->lo, o->grads, sum};
  esmtb_status bs = o->hops->sumsq(o->hdev, &s, NULL);
  return bs ? esmt_fail_prefix((esmt_status)bs, "offload: host gradient norm: ") : ESMT_OK;
}

esmt_status esmt_offload_step(esmt_param_memory *p, esmt_optim_step *s) {
  esmt_status st = esmt_offload_pull_grads(p);
  if (!st) st = esmt_offload_host_step(p, s);
  return st ? st : esmt_offload_upload(p);
}

esmt_status esmt_offload_upload(esmt_param_memory *p) {
  esmt_offload *o = p->offload;
  esmt_status st;
  const uint64_t n = o->hi - o->lo;
  if (!p->compute_lowp) {
    st = h2d(p, p->compute32 + (o->lo - p->compute_lo), p->master, n * sizeof(float));
  } else if (!esmt_offload_sharded(p)) { /* the image is the device buffer's: one copy */
    esmt_offload_gather_norms(p);
    st = h2d(p, p->compute_lowp, o->staging, o->staging_bytes);
  } else { /* the shard's half weights and LayerNorm elements (the ranks gather the rest) */
    const float *norms = esmt_offload_gather_norms(p);
    st = h2d(p, (char *)p->compute_lowp + (o->lo - p->compute_lo) * p->env.esize, o->staging,
             n * p->env.esize);
    if (!st) st = push_norms(p, norms);
  }
  esmtb_status ss = st ? 0 : p->env.ops->stream_sync(p->env.dev, p->env.stream);
  return ss ? esmt_fail_prefix((esmt_status)ss, "offload: weight upload: ") : st;
}

esmt_status esmt_offload_host_step(esmt_param_memory *p, esmt_optim_step *s) {
  esmt_offload *o = p->offload;
  void *low = p->env.dtype != ESMTB_F32 ? o->staging : NULL; /* the compute dtype, uploaded */
  esmtb_status bs;
  const int lion = s->kind == ESMT_OPTIMIZER_LION;
  if (lion) {
    esmtb_lion_args *al = &s->lion;
    al->params = p->master;
    al->grads = o->grads;
    al->m = p->moment1;
    al->params_lowp = low;
    al->lowp_dtype = p->env.dtype;
    bs = o->hops->lion(o->hdev, al, NULL); /* present: checked at setup */
  } else {
    esmtb_adamw_args *aw = &s->adamw;
    aw->params = p->master;
    aw->grads = o->grads;
    aw->m = p->moment1;
    aw->v = p->moment2;
    aw->params_lowp = low;
    aw->lowp_dtype = p->env.dtype;
    bs = o->hops->adamw(o->hdev, aw, NULL);
  }
  return bs ? esmt_fail_prefix((esmt_status)bs, "offload: host %s: ", lion ? "Lion" : "AdamW")
            : ESMT_OK;
}

/* The offload layer over the device one: host master and moments, device
 * compute weights and gradients. */
static esmt_status off_copy(esmt_param_memory *p, void *host, void *buf, uint64_t bytes, int to_buf) {
  if (!esmt_offload_is_master(p, buf)) return esmt_device_layer.copy(p, host, buf, bytes, to_buf);
  if (to_buf) memcpy(buf, host, (size_t)bytes); /* both in host memory */
  else memcpy(host, buf, (size_t)bytes);
  return ESMT_OK;
}

/* The compute weights stay on the device under optimizer offload. */
static esmt_status off_weights_needed(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  return esmt_device_layer.weights_needed(p, lo, hi);
}

static void off_release(esmt_param_memory *p) {
  /* the device side: compute weights (fp32, or half + norms) and gradients */
  void *dev[] = {p->compute32 != p->master ? p->compute32 : NULL, p->compute_lowp, p->grads};
  for (size_t i = 0; p->env.dev && i < sizeof dev / sizeof dev[0]; i++)
    if (dev[i]) p->env.ops->free(p->env.dev, ESMTB_MEM_DEVICE, dev[i]);
  esmt_offload_destroy(p); /* the host side */
  memset(p, 0, sizeof *p);
}

const esmt_param_layer esmt_offload_layer = {
    "offload",
    esmt_offload_push_weights,
    off_copy,
    off_weights_needed,
    esmt_offload_grads_changed,
    esmt_param_zero_device_grads,
    esmt_offload_grads_ready,
    esmt_offload_arm,
    esmt_offload_finish,
    esmt_offload_cancel,
    esmt_offload_grad_sumsq,
    esmt_offload_step,
    off_release,
};

/* ZeRO-3 offloaded (offload_zero3.c): what its layer (grad_shard.c) hands
 * back on release, the host side and the fp32 compute shard. */
void esmt_offload_zero3_release_host(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  if (!p->offload) return;
  if (p->compute32 && e->dev) e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->compute32);
  p->compute32 = NULL;
  esmt_offload_destroy(p); /* the host buffers; master and moments become NULL */
}
