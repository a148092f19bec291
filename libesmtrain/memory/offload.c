/* Optimizer offload: host buffers, the gradient copy schedule, the host
 * AdamW and the weight push. The schedule is described in offload.h. */
#include "offload.h"

#include "optimizer.h"
#include "param_layer.h"
#include "registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB(b) ((double)(b) / 1048576.0)
#define ALIGN256(x) (((x) + 255u) & ~(uint64_t)255u)

int esmt_norm_tensor_count(const esmt_model_config *cfg) { return 4 * cfg->num_layers + 4; }

uint64_t esmt_offload_compute_bytes(const esmt_model_config *cfg, int esize) {
  uint64_t P = 0;
  esmt_model_config_param_count(cfg, &P);
  if (esize == 4) return P * 4;
  return ALIGN256(P * (uint64_t)esize) +
         (uint64_t)esmt_norm_tensor_count(cfg) * (uint64_t)cfg->hidden_size * 4;
}

uint64_t esmt_offload_host_bytes(const esmt_model_config *cfg, int esize) {
  uint64_t P = 0;
  esmt_model_config_param_count(cfg, &P);
  /* master weights, gradients, the optimizer's state (AdamW m and v, Lion
   * m); the staging image in half */
  return P * 8 + esmt_optimizer_state_bytes(cfg->optimizer, P) +
         (esize == 4 ? 0 : esmt_offload_compute_bytes(cfg, esize));
}

int esmt_offload_is_master(const esmt_model *m, const void *buf) {
  if (!m->mem.offload || !buf) return 0;
  const char *b = buf;
  const uint64_t bytes = m->layout.total * sizeof(float);
  const float *mb[3] = {m->mem.master, m->mem.moment1, m->mem.moment2};
  for (int i = 0; i < 3; i++)
    if (mb[i] && b >= (const char *)mb[i] && b < (const char *)mb[i] + bytes) return 1;
  return 0;
}

/* One host buffer: pinned while under the cap, pageable past it. */
static esmt_status host_alloc(esmt_model *m, uint64_t bytes, const char *what, void **out) {
  esmt_offload *o = m->mem.offload;
  const esmt_logger *lg = &m->ctx->logger;
  void *p = NULL;
  int pinned = 0;
  if (!o->pinned_limit || o->pinned_bytes + bytes <= o->pinned_limit) {
    esmtb_status bs = m->ops->alloc(m->dev, ESMTB_MEM_PINNED_HOST, bytes, &p);
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

esmt_status esmt_offload_setup(esmt_model *m, const esmt_offload_options *opt) {
  const char *fn = "esmt_model_create: offload";
  esmt_offload *o = calloc(1, sizeof *o);
  if (!o) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  m->mem.offload = o;
  o->pinned_limit = opt->pinned_limit;
  const esmt_backend_entry *he = host_backend(m->ctx);
  if (!he)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: the host optimizer is the cpu backend (cpu.so), "
                     "which was not loaded from %s", fn,
                     m->ctx->registry.searched[0] ? m->ctx->registry.searched : "the backend path");
  o->hops = he->ops;
  if (!o->hops->open || !o->hops->adamw || !o->hops->sumsq || !o->hops->convert)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: the cpu backend lacks adamw, sumsq or convert", fn);
  if (m->cfg.optimizer == ESMT_OPTIMIZER_LION && !esmt_ops_has_lion(o->hops))
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: the cpu backend (ABI %u.%u) has no Lion op "
                     "(ABI 1.4): use optimizer.kind adamw", fn, (unsigned)o->hops->abi_major,
                     (unsigned)o->hops->abi_minor);
  if (!m->ops->stream_create || !m->ops->event_create || !m->ops->event_record ||
      !m->ops->stream_wait_event)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: backend %s has no streams/events", fn, m->ops->name);
  esmtb_open_options oo = {sizeof oo, 0, m->ctx->num_threads, 0};
  esmtb_status bs = o->hops->open(&oo, &o->hdev);
  if (!bs) bs = m->ops->stream_create(m->dev, &o->copy);
  if (!bs) bs = m->ops->event_create(m->dev, &o->ready);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "%s: ", fn);

  /* LayerNorm w/b: where the kernels find them in F16/BF16. */
  m->mem.n_norm = esmt_norm_tensor_count(&m->cfg);
  m->mem.norm_offs = malloc((size_t)m->mem.n_norm * sizeof *m->mem.norm_offs);
  if (!m->mem.norm_offs) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  const esmt_layout *ly = &m->layout;
  int k = 0;
  for (int l = 0; l < m->L; l++) {
    m->mem.norm_offs[k++] = ly->layers[l].ln1_w;
    m->mem.norm_offs[k++] = ly->layers[l].ln1_b;
    m->mem.norm_offs[k++] = ly->layers[l].ln2_w;
    m->mem.norm_offs[k++] = ly->layers[l].ln2_b;
  }
  m->mem.norm_offs[k++] = ly->lnf_w;
  m->mem.norm_offs[k++] = ly->lnf_b;
  m->mem.norm_offs[k++] = ly->head_ln_w;
  m->mem.norm_offs[k++] = ly->head_ln_b;

  const uint64_t P = ly->total, bytes = P * sizeof(float);
  const int es = (int)m->esize;
  const uint64_t need = esmt_offload_host_bytes(&m->cfg, es);
  const int nstate = esmt_optimizer_state_count(m->cfg.optimizer);
  esmt_logger_log(&m->ctx->logger, ESMT_LOG_INFO,
                  "offload: optimizer on the host (%s %s): %.1f MiB of host RAM (fp32 master "
                  "weights, %s, fp32 gradients%s), pinned %s %.1f MiB; the device "
                  "keeps the %s weights and fp32 gradients",
                  o->hops->name, esmt_optimizer_name(m->cfg.optimizer), MIB(need),
                  nstate > 1 ? "its two moments" : "its moment", es == 4 ? "" : ", the compute-weight staging copy",
                  o->pinned_limit ? "up to offload.pinned_memory_limit" : "all (no cap):",
                  MIB(o->pinned_limit ? o->pinned_limit : need), esmt_dtype_name(m->dtype));
  /* Pinned first where the DMA engine reads or writes: the gradients (D2H)
   * and the upload source (the staging image in half, the master in fp32);
   * the moments are only touched by the host AdamW, so under a cap they are
   * the first to go pageable. */
  esmt_status st = host_alloc(m, bytes, "host gradients", (void **)&o->grads);
  if (!st && es != 4) {
    o->staging_bytes = esmt_offload_compute_bytes(&m->cfg, es);
    st = host_alloc(m, o->staging_bytes, "compute-weight staging", &o->staging);
  }
  if (!st) st = host_alloc(m, bytes, "fp32 master weights", (void **)&m->mem.master);
  if (!st) st = host_alloc(m, bytes, "optimizer first moments", (void **)&m->mem.moment1);
  if (!st && nstate > 1) st = host_alloc(m, bytes, "AdamW second moments", (void **)&m->mem.moment2);
  if (st) return st;
  if (es == 4) {
    st = esmt_param_dev_alloc(m, bytes, (void **)&m->mem.compute32, "fp32 compute weights");
  } else {
    st = esmt_param_dev_alloc(m, o->staging_bytes, &m->mem.compute_lowp, "half-precision weights and norms");
    if (!st) m->mem.norm_dev = (float *)(void *)((char *)m->mem.compute_lowp + ALIGN256(P * (uint64_t)es));
  }
  return st;
}

void esmt_offload_destroy(esmt_model *m) {
  esmt_offload *o = m->mem.offload;
  if (!o) return;
  if (m->dev) {
    if (o->copy) {
      m->ops->stream_sync(m->dev, o->copy);
      m->ops->stream_destroy(m->dev, o->copy);
    }
    if (o->ready) m->ops->event_destroy(m->dev, o->ready);
  }
  for (int i = 0; i < o->nbufs; i++) {
    if (o->bufs[i].pinned) m->ops->free(m->dev, ESMTB_MEM_PINNED_HOST, o->bufs[i].ptr);
    else free(o->bufs[i].ptr);
  }
  if (o->hdev) o->hops->close(o->hdev);
  free(m->mem.norm_offs);
  m->mem.norm_offs = NULL;
  m->mem.master = m->mem.moment1 = m->mem.moment2 = NULL;
  free(o);
  m->mem.offload = NULL;
}

static esmt_status h2d(esmt_model *m, void *dst, const void *src, uint64_t bytes) {
  esmtb_status cs = m->ops->copy_async(m->dev, dst, src, bytes, ESMTB_COPY_H2D, m->stream);
  return cs ? esmt_fail_prefix((esmt_status)cs, "offload: weight upload: ") : ESMT_OK;
}

/* The fp32 LayerNorm w/b into the staging image, after the half weights. */
static float *gather_norms(esmt_model *m) {
  esmt_offload *o = m->mem.offload;
  float *dst = (float *)(void *)((char *)o->staging +
                                 ALIGN256(m->layout.total * (uint64_t)m->esize));
  for (int i = 0; i < m->mem.n_norm; i++)
    memcpy(dst + (uint64_t)i * m->d, m->mem.master + m->mem.norm_offs[i], (size_t)m->d * sizeof(float));
  return dst;
}

esmt_status esmt_offload_push_weights(esmt_model *m, uint64_t offset, uint64_t count) {
  esmt_offload *o = m->mem.offload;
  esmt_status st;
  if (!m->mem.compute_lowp) {
    st = h2d(m, m->mem.compute32 + offset, m->mem.master + offset, count * sizeof(float));
  } else {
    esmtb_convert_args c = {sizeof c, count, m->mem.master + offset, ESMTB_F32,
                            (char *)o->staging + offset * m->esize, m->dtype};
    esmtb_status bs = o->hops->convert(o->hdev, &c, NULL);
    if (bs) return esmt_fail_prefix((esmt_status)bs, "offload: converting the weights: ");
    const float *norms = gather_norms(m);
    st = h2d(m, (char *)m->mem.compute_lowp + offset * m->esize, (char *)o->staging + offset * m->esize,
             count * m->esize);
    if (!st) st = h2d(m, m->mem.norm_dev, norms, (uint64_t)m->mem.n_norm * m->d * sizeof(float));
  }
  esmtb_status ss = st ? 0 : m->ops->stream_sync(m->dev, m->stream);
  if (ss) st = esmt_fail_prefix((esmt_status)ss, "offload: weight upload: ");
  m->have_forward = 0;
  return st;
}

esmt_status esmt_offload_arm(esmt_model *m) {
  esmt_offload *o = m->mem.offload;
  /* The copy stream may still hold nothing: every update ends in finish. */
  o->armed = 1;
  o->pending_end = m->layout.total;
  o->host_grads_valid = 0;
  return ESMT_OK;
}

esmt_status esmt_offload_grads_ready(esmt_model *m, uint64_t from) {
  esmt_offload *o = m->mem.offload;
  if (!o->armed || from >= o->pending_end) return ESMT_OK;
  /* Bucket [from, pending_end): ordered after the compute stream's work so
   * far by the event, copied while the compute stream goes on. */
  esmtb_status bs = m->ops->event_record(m->dev, o->ready, m->stream);
  if (!bs) bs = m->ops->stream_wait_event(m->dev, o->copy, o->ready);
  if (!bs)
    bs = m->ops->copy_async(m->dev, o->grads + from, m->mem.grads + from,
                            (o->pending_end - from) * sizeof(float), ESMTB_COPY_D2H, o->copy);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "offload: gradient copy: ");
  o->pending_end = from;
  o->buckets_streamed++;
  return ESMT_OK;
}

esmt_status esmt_offload_finish(esmt_model *m) {
  esmt_offload *o = m->mem.offload;
  if (!o->armed) return ESMT_OK;
  o->armed = 0;
  esmtb_status bs = m->ops->stream_sync(m->dev, o->copy);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "offload: gradient copy: ");
  o->host_grads_valid = o->pending_end == 0; /* else pulled in one copy later */
  return ESMT_OK;
}

void esmt_offload_cancel(esmt_model *m) {
  esmt_offload *o = m->mem.offload;
  if (o->armed) m->ops->stream_sync(m->dev, o->copy);
  o->armed = 0;
  o->host_grads_valid = 0;
}

void esmt_offload_grads_changed(esmt_model *m) {
  if (!m->mem.offload->armed) m->mem.offload->host_grads_valid = 0;
}

esmt_status esmt_offload_pull_grads(esmt_model *m) {
  esmt_offload *o = m->mem.offload;
  if (o->host_grads_valid) return ESMT_OK;
  esmtb_status bs = m->ops->copy_async(m->dev, o->grads, m->mem.grads, m->layout.total * sizeof(float),
                                       ESMTB_COPY_D2H, m->stream);
  if (!bs) bs = m->ops->stream_sync(m->dev, m->stream);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "offload: gradient download: ");
  o->host_grads_valid = 1;
  o->full_pulls++;
  return ESMT_OK;
}

esmt_status esmt_offload_grad_sumsq(esmt_model *m, float *sum) {
  esmt_offload *o = m->mem.offload;
  esmt_status st = esmt_offload_pull_grads(m);
  if (st) return st;
  *sum = 0.0f;
  esmtb_sumsq_args s = {sizeof s, m->layout.total, o->grads, sum};
  esmtb_status bs = o->hops->sumsq(o->hdev, &s, NULL);
  return bs ? esmt_fail_prefix((esmt_status)bs, "offload: host gradient norm: ") : ESMT_OK;
}

esmt_status esmt_offload_step(esmt_model *m, esmtb_adamw_args *aw, esmtb_lion_args *al) {
  esmt_offload *o = m->mem.offload;
  esmt_status st = esmt_offload_pull_grads(m);
  if (st) return st;
  void *low = m->mem.compute_lowp ? o->staging : NULL; /* the compute dtype, for one upload */
  esmtb_status bs;
  if (al) {
    al->params = m->mem.master;
    al->grads = o->grads;
    al->m = m->mem.moment1;
    al->params_lowp = low;
    al->lowp_dtype = m->dtype;
    bs = o->hops->lion(o->hdev, al, NULL); /* present: checked at setup */
  } else {
    aw->params = m->mem.master;
    aw->grads = o->grads;
    aw->m = m->mem.moment1;
    aw->v = m->mem.moment2;
    aw->params_lowp = low;
    aw->lowp_dtype = m->dtype;
    bs = o->hops->adamw(o->hdev, aw, NULL);
  }
  if (bs) return esmt_fail_prefix((esmt_status)bs, "offload: host %s: ", al ? "Lion" : "AdamW");
  if (!m->mem.compute_lowp) {
    st = h2d(m, m->mem.compute32, m->mem.master, m->layout.total * sizeof(float));
  } else {
    gather_norms(m);
    st = h2d(m, m->mem.compute_lowp, o->staging, o->staging_bytes);
  }
  esmtb_status ss = st ? 0 : m->ops->stream_sync(m->dev, m->stream);
  return ss ? esmt_fail_prefix((esmt_status)ss, "offload: weight upload: ") : st;
}

/* The offload layer over the device one: host master and moments, device
 * compute weights and gradients. */
static esmt_status off_copy(esmt_model *m, void *host, void *buf, uint64_t bytes, int to_buf) {
  if (!esmt_offload_is_master(m, buf)) return esmt_device_layer.copy(m, host, buf, bytes, to_buf);
  if (to_buf) memcpy(buf, host, (size_t)bytes); /* both in host memory */
  else memcpy(host, buf, (size_t)bytes);
  return ESMT_OK;
}

static void off_release(esmt_model *m) {
  esmt_param_memory *p = &m->mem;
  /* the device side: compute weights (fp32, or half + norms) and gradients */
  void *dev[] = {p->compute32 != p->master ? p->compute32 : NULL, p->compute_lowp, p->grads};
  for (size_t i = 0; m->dev && i < sizeof dev / sizeof dev[0]; i++)
    if (dev[i]) m->ops->free(m->dev, ESMTB_MEM_DEVICE, dev[i]);
  esmt_offload_destroy(m); /* the host side */
  memset(p, 0, sizeof *p);
}

const esmt_param_layer esmt_offload_layer = {
    "offload",
    esmt_offload_push_weights,
    off_copy,
    esmt_offload_grads_changed,
    esmt_offload_grads_ready,
    esmt_offload_arm,
    esmt_offload_finish,
    esmt_offload_cancel,
    esmt_offload_grad_sumsq,
    esmt_offload_step,
    off_release,
};
