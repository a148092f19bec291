/* SPDX-License-Identifier: MIT */
/* Weights <-> one safetensors file under HF EsmForMaskedLM names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "carried_tensors.h"
#include "checkpoint.h"
#include "param_layer.h"
#include "safetensors.h"

/* Copy a whole flat buffer between device and host. The moments cover
 * [opt_lo, opt_hi) of it (a ZeRO-1 shard, else everything): only that part
 * of `host` is copied; a download zeroes the rest. */
static esmt_status flat_copy(esmt_model *m, float *host, float *dev_buf, int to_device) {
  uint64_t lo = 0, n = m->layout.total;
  if (dev_buf && (dev_buf == m->mem.moment1 || dev_buf == m->mem.moment2)) {
    lo = m->mem.opt_lo;
    n = m->mem.opt_hi - m->mem.opt_lo;
    /* a frozen prefix has no moments: they read as zero, never as whatever
     * the host buffer held before */
    if (!to_device) {
      memset(host, 0, (size_t)lo * sizeof(float));
      memset(host + lo + n, 0, (size_t)(m->layout.total - lo - n) * sizeof(float));
    }
  }
  if (dev_buf && dev_buf == m->mem.master && esmt_param_master_sharded(&m->mem)) {
    if (to_device) return esmt_param_master_upload(&m->mem, host); /* shard and half copy */
    if (m->mem.frozen_host) return esmt_param_read_host(&m->mem, host, 0, n); /* LoRA in half */
    return esmt_fail(ESMT_ERR_STATE, "copying model buffers: this rank holds the fp32 master "
                     "weights [%llu, %llu) of %llu only (ZeRO-2 sharded master); gather them "
                     "first (a checkpoint saved by esmt_trainer_save has them all)",
                     (unsigned long long)m->mem.master_lo, (unsigned long long)m->mem.master_hi,
                     (unsigned long long)m->layout.total);
  }
  /* a master buffer may be host memory (optimizer offload) */
  esmt_status st = n ? esmt_master_copy(m, host + lo, dev_buf, n * sizeof(float), to_device)
                     : ESMT_OK;
  return st ? esmt_fail_prefix(st, "copying model buffers: ") : ESMT_OK;
}

esmt_status esmt_flat_download(esmt_model *m, float *host, float *dev_buf) {
  return flat_copy(m, host, dev_buf, 0);
}
esmt_status esmt_flat_upload(esmt_model *m, const float *host, float *dev_buf) {
  esmt_status st = flat_copy(m, (float *)host, dev_buf, 1);
  if (dev_buf == m->mem.grads) m->mem.layer->grads_changed(&m->mem);
  /* new master weights: the half-precision compute copy follows them */
  if (!st && dev_buf == m->mem.master && !esmt_param_master_sharded(&m->mem))
    st = esmt_model_sync_lowp(m, 0, m->layout.total);
  return st;
}

esmt_status esmt_write_flat(esmt_model *m, const char *path, const float *const *bufs,
                            const char *const *prefixes, int nbufs, int with_carried,
                            const esmt_st_meta *meta, int nmeta, uint32_t *crc) {
  const esmt_layout *ly = &m->layout;
  const int nc = with_carried ? m->n_carried : 0;
  int n = ly->count * nbufs + nc;
  esmt_st_entry *e = calloc((size_t)n, sizeof *e);
  char **names = calloc((size_t)n, sizeof *names);
  esmt_status st = ESMT_OK;
  if (!e || !names) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  for (int b = 0; b < nbufs && !st; b++)
    for (int i = 0; i < ly->count && !st; i++) {
      int k = b * ly->count + i;
      const esmt_tensor_info *t = &ly->tensors[i];
      size_t len = strlen(prefixes[b]) + strlen(t->name) + 1;
      names[k] = malloc(len);
      if (!names[k]) { st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path); break; }
      snprintf(names[k], len, "%s%s", prefixes[b], t->name);
      e[k].name = names[k];
      e[k].dtype = ESMT_ST_F32;
      e[k].ndim = t->ndim;
      e[k].shape[0] = t->shape[0];
      e[k].shape[1] = t->shape[1];
    }
  for (int i = 0; i < nc && !st; i++) { /* byte for byte (carried_tensors.h) */
    const esmt_carried_tensor *c = &m->carried[i];
    esmt_st_entry *x = &e[ly->count * nbufs + i];
    x->name = c->name;
    x->dtype = (esmt_st_dtype)c->dtype;
    x->ndim = c->ndim;
    memcpy(x->shape, c->shape, sizeof x->shape);
  }
  esmt_st_writer *w = NULL;
  if (!st) st = esmt_st_writer_begin(path, e, n, meta, nmeta, &w);
  /* Tensors are contiguous in layout order: each buffer is one append. */
  for (int b = 0; b < nbufs && !st; b++)
    st = esmt_st_writer_append(w, bufs[b], ly->total * sizeof(float));
  for (int i = 0; i < nc && !st; i++)
    st = esmt_st_writer_append(w, m->carried[i].data, m->carried[i].nbytes);
  if (w) {
    if (st) esmt_st_writer_abort(w);
    else st = esmt_st_writer_finish(w, crc);
  }
  for (int k = 0; names && k < ly->count * nbufs; k++) free(names[k]);
  free(names);
  free(e);
  return st;
}

esmt_status esmt_weights_save(esmt_model *m, const char *path, uint32_t *crc) {
  float *host = malloc(m->layout.total * sizeof *host);
  if (!host) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
  esmt_status st = esmt_flat_download(m, host, m->mem.master);
  const float *bufs[] = {host};
  const char *prefixes[] = {""};
  esmt_st_meta meta[] = {{"format", "pt"}, {"producer", "esmtrain"}};
  if (!st) st = esmt_write_flat(m, path, bufs, prefixes, 1, 1, meta, 2, crc);
  free(host);
  return st;
}

esmt_status esmt_read_flat(esmt_model *m, const esmt_st_file *f, const char *path,
                           const char *prefix, float *host, int strict_extra) {
  return esmt_read_flat_keep(m, f, path, prefix, host, strict_extra, NULL);
}

esmt_status esmt_read_flat_keep(esmt_model *m, const esmt_st_file *f, const char *path,
                                const char *prefix, float *host, int strict_extra,
                                int (*optional)(const esmt_model *m, const char *name)) {
  const esmt_layout *ly = &m->layout;
  char key[160];
  for (int i = 0; i < ly->count; i++) {
    const esmt_tensor_info *t = &ly->tensors[i];
    snprintf(key, sizeof key, "%s%s", prefix, t->name);
    const esmt_st_tensor *s = esmt_st_find(f, key);
    if (!s && optional && optional(m, t->name)) continue; /* host keeps its values */
    if (!s) return esmt_fail(ESMT_ERR_FORMAT, "%s: tensor '%s' is missing", path, key);
    int shape_ok = s->ndim == t->ndim && s->shape[0] == t->shape[0] &&
                   (t->ndim < 2 || s->shape[1] == t->shape[1]);
    if (!shape_ok)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: tensor '%s' has shape [%lld%s%lld], the model needs "
                       "[%lld%s%lld]", path, key, (long long)s->shape[0], s->ndim > 1 ? ", " : "",
                       s->ndim > 1 ? (long long)s->shape[1] : 0LL, (long long)t->shape[0],
                       t->ndim > 1 ? ", " : "", t->ndim > 1 ? (long long)t->shape[1] : 0LL);
    if (s->dtype != ESMT_ST_F32 && s->dtype != ESMT_ST_F16 && s->dtype != ESMT_ST_BF16 &&
        s->dtype != ESMT_ST_F64)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: tensor '%s' is not floating point", path, key);
    float *dst = host + t->offset;
    esmt_st_to_f32(s, dst);
    for (uint64_t k = 0; k < t->numel; k++)
      if (!isfinite(dst[k]))
        return esmt_fail(ESMT_ERR_NUMERIC, "%s: tensor '%s' holds a non-finite value at index "
                         "%llu", path, key, (unsigned long long)k);
  }
  if (strict_extra) {
    for (int i = 0; i < f->count; i++) {
      const char *name = f->tensors[i].name;
      int idx;
      if (esmt_carried_name(name)) continue; /* kept aside, not trained */
      if (strncmp(name, prefix, strlen(prefix)) == 0 &&
          esmt_model_find_tensor(m, name + strlen(prefix), &idx) == ESMT_OK)
        continue;
      return esmt_fail(ESMT_ERR_FORMAT, "%s: unexpected tensor '%s' (not part of this model)",
                       path, name);
    }
  }
  return ESMT_OK;
}

esmt_status esmt_weights_load(esmt_model *m, const char *path) {
  esmt_st_file f;
  esmt_status st = esmt_st_open(path, &f);
  if (st) return st;
  float *host = malloc(m->layout.total * sizeof *host);
  if (!host) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
  if (!st) st = esmt_read_flat(m, &f, path, "", host, 1);
  esmt_carried_tensor *carried = NULL;
  int nc = 0;
  if (!st) st = esmt_carried_collect(m, &f, path, &carried, &nc);
  if (!st) st = esmt_flat_upload(m, host, m->mem.master);
  if (!st) {
    st = esmt_carried_install(m, carried, nc); /* owns the list from here */
    carried = NULL;
  }
  esmt_carried_free(carried, nc);
  if (!st) m->have_forward = 0;
  free(host);
  esmt_st_close(&f);
  return st;
}
