/* SPDX-License-Identifier: MIT */
/* See carried_tensors.h. */
#define _POSIX_C_SOURCE 200809L
#include "carried_tensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char k_inv_suffix[] = ".attention.self.rotary_embeddings.inv_freq";

static int is_inv_freq(const char *name) {
  size_t n = strlen(name), s = sizeof k_inv_suffix - 1;
  return strncmp(name, "esm.encoder.layer.", 18) == 0 && n > s && !strcmp(name + n - s, k_inv_suffix);
}

int esmt_carried_name(const char *name) {
  return is_inv_freq(name) || strcmp(name, "esm.embeddings.position_embeddings.weight") == 0 ||
         strcmp(name, "esm.embeddings.position_ids") == 0 ||
         strncmp(name, "esm.contact_head.", 17) == 0 ||
         strcmp(name, "lm_head.decoder.weight") == 0 || strcmp(name, "lm_head.decoder.bias") == 0;
}

void esmt_carried_free(esmt_carried_tensor *list, int n) {
  for (int i = 0; list && i < n; i++) {
    free(list[i].name);
    free(list[i].data);
  }
  free(list);
}

/* A carried tensor as a safetensors view (for esmt_st_to_f32). */
static esmt_st_tensor view(const esmt_carried_tensor *c) {
  esmt_st_tensor t;
  memset(&t, 0, sizeof t);
  t.name = c->name;
  t.dtype = (esmt_st_dtype)c->dtype;
  t.ndim = c->ndim;
  memcpy(t.shape, c->shape, sizeof t.shape);
  t.numel = c->nbytes / (uint64_t)esmt_st_dtype_size(t.dtype);
  t.data = c->data;
  t.nbytes = c->nbytes;
  return t;
}

static esmt_status check_inv_freq(const esmt_model *m, const esmt_st_tensor *t, const char *path,
                                  float *first, int *have_first) {
  const int half = m->hd / 2;
  if (t->dtype != ESMT_ST_F32 && t->dtype != ESMT_ST_F16 && t->dtype != ESMT_ST_BF16 &&
      t->dtype != ESMT_ST_F64)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: '%s' is not floating point", path, t->name);
  if ((int64_t)t->numel != half || half > ESMT_MAX_HALF_HEAD)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: rotary '%s' has %llu values, head dim %d needs %d",
                     path, t->name, (unsigned long long)t->numel, m->hd, half);
  float f[ESMT_MAX_HALF_HEAD];
  esmt_st_to_f32(t, f);
  for (int i = 0; i < half; i++)
    if (!(f[i] > 0.0f) || !isfinite(f[i]))
      return esmt_fail(ESMT_ERR_NUMERIC, "%s: rotary '%s'[%d] is %g (frequencies are positive "
                       "and finite)", path, t->name, i, (double)f[i]);
  if (!*have_first) {
    memcpy(first, f, (size_t)half * sizeof *f);
    *have_first = 1;
  } else if (memcmp(first, f, (size_t)half * sizeof *f) != 0) {
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: rotary '%s' differs from another layer's; "
                     "esmtrain computes every layer with one table", path, t->name);
  }
  return ESMT_OK;
}

esmt_status esmt_carried_collect(const esmt_model *m, const esmt_st_file *f, const char *path,
                                 esmt_carried_tensor **out, int *n) {
  *out = NULL;
  *n = 0;
  int count = 0;
  for (int i = 0; i < f->count; i++) count += esmt_carried_name(f->tensors[i].name);
  if (!count) return ESMT_OK;
  esmt_carried_tensor *list = calloc((size_t)count, sizeof *list);
  if (!list) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  float first[ESMT_MAX_HALF_HEAD];
  int have_first = 0, k = 0;
  esmt_status st = ESMT_OK;
  for (int i = 0; i < f->count && !st; i++) {
    const esmt_st_tensor *t = &f->tensors[i];
    if (!esmt_carried_name(t->name)) continue;
    if (is_inv_freq(t->name) && (st = check_inv_freq(m, t, path, first, &have_first))) break;
    esmt_carried_tensor *c = &list[k++];
    c->name = strdup(t->name);
    c->data = malloc(t->nbytes ? t->nbytes : 1);
    if (!c->name || !c->data) {
      st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
      break;
    }
    c->dtype = (int)t->dtype;
    c->ndim = t->ndim;
    memcpy(c->shape, t->shape, sizeof c->shape);
    if (t->nbytes) memcpy(c->data, t->data, t->nbytes);
    c->nbytes = t->nbytes;
  }
  if (st) {
    esmt_carried_free(list, k);
    return st;
  }
  *out = list;
  *n = k;
  return ESMT_OK;
}

esmt_status esmt_carried_install(esmt_model *m, esmt_carried_tensor *list, int n) {
  esmt_model_drop_carried(m);
  m->carried = list;
  m->n_carried = n;
  for (int i = 0; i < n; i++)
    if (is_inv_freq(list[i].name)) { /* checked when collected; all layers equal */
      float f[ESMT_MAX_HALF_HEAD];
      esmt_st_tensor t = view(&list[i]);
      esmt_st_to_f32(&t, f);
      return esmt_model_set_inv_freq(m, f);
    }
  return esmt_model_set_inv_freq(m, NULL);
}

const esmt_carried_tensor *esmt_carried_find(const esmt_model *m, const char *name) {
  for (int i = 0; i < m->n_carried; i++)
    if (!strcmp(m->carried[i].name, name)) return &m->carried[i];
  return NULL;
}

uint64_t esmt_carried_numel(const esmt_carried_tensor *c) {
  return c->nbytes / (uint64_t)esmt_st_dtype_size((esmt_st_dtype)c->dtype);
}

void esmt_carried_to_f32(const esmt_carried_tensor *c, float *out) {
  esmt_st_tensor t = view(c);
  esmt_st_to_f32(&t, out);
}

esmt_status esmt_carried_put_f32(esmt_model *m, const char *name, int ndim,
                                 const int64_t *shape, const float *values) {
  uint64_t numel = 1;
  for (int i = 0; i < ndim; i++) numel *= (uint64_t)shape[i];
  esmt_carried_tensor *c = (esmt_carried_tensor *)esmt_carried_find(m, name);
  void *data = malloc(numel ? numel * sizeof(float) : 1);
  char *copy = c ? NULL : strdup(name);
  esmt_carried_tensor *list = c ? m->carried
                                : realloc(m->carried, (size_t)(m->n_carried + 1) * sizeof *list);
  if (list) m->carried = list;
  if (!data || (!c && (!copy || !list))) {
    free(data), free(copy);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory for the tensor '%s'", name);
  }
  if (!c) {
    c = &m->carried[m->n_carried++];
    memset(c, 0, sizeof *c);
    c->name = copy;
  }
  free(c->data);
  memcpy(data, values, numel * sizeof(float));
  c->data = data;
  c->nbytes = numel * sizeof(float);
  c->dtype = (int)ESMT_ST_F32;
  c->ndim = ndim;
  memset(c->shape, 0, sizeof c->shape);
  memcpy(c->shape, shape, (size_t)ndim * sizeof *shape);
  return ESMT_OK;
}
