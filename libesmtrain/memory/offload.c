/* SPDX-License-Identifier: MIT */
/* Optimizer offload: host buffers, the gradient copy schedule, the host
 * AdamW and the weight push. The schedule is described in offload.h. */
#include "esmtrain/backend.h"
#include "offload.h"

#include "dtype.h"
#include "param_layer.h"
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

static esmt_offload_shape shape_of(const esmt_param_env *e) {
  return (esmt_offload_shape){e->total, e->n_norm, e->d, e->optimizer, (int)e->esize};
}

int esmt_offload_is_master(const esmt_param_memory *p, const void *buf) {
  if (!p->offload || !buf) return 0;
  const char *b = buf;
  const uint64_t bytes = p->env.total * sizeof(float);
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

  const uint64_t P = e->total, bytes = P * sizeof(float);
  const int es = (int)e->esize;
  const esmt_offload_shape shape = shape_of(e);
  const uint64_t need = esmt_offload_host_bytes(&shape);
  const int nstate = esmt_optimizer_state_count(e->optimizer);
  esmt_logger_log(&e->ctx->logger, ESMT_LOG_INFO,
                  "offload: optimizer on the host (%s %s): %.1f MiB of host RAM (fp32 master "
                  "weights, %s, fp32 gradients%s), pinned %s %.1f MiB; the device "
                  "keeps the %s weights and fp32 gradients",
                  o->hops->name, esmt_optimizer_name(e->optimizer), MIB(need),
                  nstate > 1 ? "its two moments" : "its moment", es == 4 ? "" : ", the compute-weight staging copy",
                  o->pinned_limit ? "up to offload.pinned_memory_limit" : "all (no cap):",
                  MIB(o->pinned_limit ? o->pinned_limit : need), esmt_dtype_name(e->dtype));
  /* Pinned first where the DMA engine reads or writes: the gradients (D2H)
   * and the upload source (the staging image in half, the master in fp32);
   * the moments are only touched by the host AdamW, so under a cap they are
   * the first to go pageable. */
  esmt_status st = esmt_offload_host_alloc(p, bytes, "host gradients", (void **)&o->grads);
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
  esmt_offload *o = p->offload;
  const uint64_t P = e->total, bytes = P * sizeof(float);
  const int es = (int)e->esize;
  if (es == 4) {
    st = esmt_param_dev_alloc(e, bytes, (void **)&p->compute32, "fp32 compute weights");
  } else {
    st = esmt_param_dev_alloc(e, o->staging_bytes, &p->compute_lowp,
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
  float *dst = (float *)(void *)((char *)o->staging +
                                 ALIGN256(p->env.total * (uint64_t)p->env.esize));
  for (int i = 0; i < p->env.n_norm; i++)
    memcpy(dst + (uint64_t)i * p->env.d, p->master + p->env.norm_offs[i], (size_t)p->env.d * sizeof(float));
  return dst;
}

esmt_status esmt_offload_stage(esmt_param_memory *p, uint64_t offset, uint64_t count) {
  esmt_offload *o = p->offload;
  esmtb_convert_args c = {sizeof c, count, p->master + offset, ESMTB_F32,
                          (char *)o->staging + offset * p->env.esize, p->env.dtype};
  esmtb_status bs = o->hops->convert(o->hdev, &c, NULL);
  return bs ? esmt_fail_prefix((esmt_status)bs, "offload: converting the weights: ") : ESMT_OK;
}

esmt_status esmt_offload_push_weights(esmt_param_memory *p, uint64_t offset, uint64_t count) {
  esmt_offload *o = p->offload;
  esmt_status st;
  if (!p->compute_lowp) {
    st = h2d(p, p->compute32 + offset, p->master + offset, count * sizeof(float));
  } else {
    if ((st = esmt_offload_stage(p, offset, count))) return st;
    const float *norms = esmt_offload_gather_norms(p);
    st = h2d(p, (char *)p->compute_lowp + offset * p->env.esize, (char *)o->staging + offset * p->env.esize,
             count * p->env.esize);
    if (!st) st = h2d(p, p->norm_dev, norms, (uint64_t)p->env.n_norm * p->env.d * sizeof(float));
  }
  esmtb_status ss = st ? 0 : p->env.ops->stream_sync(p->env.dev, p->env.stream);
  if (ss) st = esmt_fail_prefix((esmt_status)ss, "offload: weight upload: ");
  return st;
}

esmt_status esmt_offload_arm(esmt_param_memory *p) {
  esmt_offload *o = p->offload;
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
  esmtb_status bs = p->env.ops->copy_async(p->env.dev, o->grads, p->grads, p->env.total * sizeof(float),
                                       ESMTB_COPY_D2H, p->env.stream);
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
  esmtb_sumsq_args s = {sizeof s, p->env.total, o->grads, sum};
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
  if (!p->compute_lowp) {
    st = h2d(p, p->compute32, p->master, p->env.total * sizeof(float));
  } else {
    esmt_offload_gather_norms(p);
    st = h2d(p, p->compute_lowp, o->staging, o->staging_bytes);
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
