/* SPDX-License-Identifier: MIT */
/* safetensors reader (see safetensors.h). JSON through jansson. */
#define _POSIX_C_SOURCE 200809L
#include "safetensors.h"

#include "input_file.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
  const char *name;
  esmt_st_dtype dtype;
  int size;
} k_dtypes[] = {
    {"F64", ESMT_ST_F64, 8}, {"F32", ESMT_ST_F32, 4}, {"F16", ESMT_ST_F16, 2},
    {"BF16", ESMT_ST_BF16, 2}, {"I64", ESMT_ST_I64, 8}, {"I32", ESMT_ST_I32, 4},
    {"I16", ESMT_ST_I16, 2}, {"I8", ESMT_ST_I8, 1}, {"U8", ESMT_ST_U8, 1},
    {"BOOL", ESMT_ST_BOOL, 1},
};

static int dtype_of(const char *s, esmt_st_dtype *dt, int *size) {
  for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
    if (strcmp(s, k_dtypes[i].name) == 0) {
      *dt = k_dtypes[i].dtype;
      *size = k_dtypes[i].size;
      return 1;
    }
  return 0;
}

#define BAD(...) (st = esmt_fail(ESMT_ERR_FORMAT, __VA_ARGS__))

static esmt_status parse_tensor(const char *path, const char *name, json_t *v,
                                const uint8_t *data, uint64_t data_len, esmt_st_tensor *t) {
  esmt_status st = ESMT_OK;
  json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
         *jo = json_object_get(v, "data_offsets");
  int esize;
  if (!json_is_object(v) || !json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) ||
      json_array_size(jo) != 2)
    return BAD("%s: tensor '%s': needs dtype, shape and data_offsets", path, name);
  if (!dtype_of(json_string_value(jd), &t->dtype, &esize))
    return BAD("%s: tensor '%s': unknown dtype '%s'", path, name, json_string_value(jd));
  size_t nd = json_array_size(js);
  if (nd > 8) return BAD("%s: tensor '%s': %zu dimensions (at most 8)", path, name, nd);
  t->ndim = (int)nd;
  uint64_t numel = 1;
  for (size_t i = 0; i < nd; i++) {
    json_t *e = json_array_get(js, i);
    if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > (1ll << 40))
      return BAD("%s: tensor '%s': bad shape entry %zu", path, name, i);
    t->shape[i] = json_integer_value(e);
    /* checked before multiplying: 2^40 x 2^40 must not wrap to 0 */
    if (t->shape[i] && numel > (1ull << 42) / (uint64_t)t->shape[i])
      return BAD("%s: tensor '%s': too many elements (shape entry %zu is %lld; at most 2^42 "
                 "elements)", path, name, i, (long long)t->shape[i]);
    numel *= (uint64_t)t->shape[i];
  }
  json_t *b0 = json_array_get(jo, 0), *b1 = json_array_get(jo, 1);
  if (!json_is_integer(b0) || !json_is_integer(b1) || json_integer_value(b0) < 0 ||
      json_integer_value(b1) < 0)
    return BAD("%s: tensor '%s': data_offsets must be two non-negative integers [begin, end]",
               path, name);
  uint64_t begin = (uint64_t)json_integer_value(b0), end = (uint64_t)json_integer_value(b1);
  if (end < begin)
    return BAD("%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", path, name,
               (unsigned long long)begin, (unsigned long long)end);
  if (end > data_len)
    return BAD("%s: tensor '%s': data_offsets [%llu, %llu] end past the %llu bytes of data the "
               "file holds (truncated?)", path, name, (unsigned long long)begin,
               (unsigned long long)end, (unsigned long long)data_len);
  /* numel <= 2^42 and esize <= 8: the product cannot overflow */
  uint64_t need = numel * (uint64_t)esize;
  if (end - begin != need)
    return BAD("%s: tensor '%s': shape needs %llu bytes (%llu elements of %d) but data_offsets "
               "[%llu, %llu] span %llu", path, name, (unsigned long long)need,
               (unsigned long long)numel, esize, (unsigned long long)begin,
               (unsigned long long)end, (unsigned long long)(end - begin));
  t->numel = numel;
  t->data = data + begin;
  t->nbytes = end - begin;
  t->name = strdup(name);
  if (!t->name) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  return ESMT_OK;
}

static int by_begin(const void *a, const void *b) {
  const esmt_st_tensor *x = *(const esmt_st_tensor *const *)a, *y = *(const esmt_st_tensor *const *)b;
  return x->data < y->data ? -1 : x->data > y->data;
}

/* No two tensors may share bytes: a file whose bias points into a weight's
 * bytes would load silently wrong values. Sorted by start, each tensor must
 * begin at or after the end of the one before it. */
static esmt_status check_overlap(const char *path, const esmt_st_file *f, const uint8_t *data) {
  esmt_status st = ESMT_OK;
  const esmt_st_tensor **order = malloc((size_t)(f->count ? f->count : 1) * sizeof *order);
  if (!order) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  int n = 0;
  for (int i = 0; i < f->count; i++)
    if (f->tensors[i].nbytes) order[n++] = &f->tensors[i];
  qsort(order, (size_t)n, sizeof *order, by_begin);
  for (int i = 1; i < n && !st; i++) {
    const esmt_st_tensor *a = order[i - 1], *b = order[i];
    if (b->data < a->data + a->nbytes)
      BAD("%s: tensors '%s' (data_offsets [%llu, %llu]) and '%s' ([%llu, %llu]) overlap: each "
          "tensor needs bytes of its own; the file is damaged or was not written by a "
          "safetensors writer", path, a->name, (unsigned long long)(a->data - data),
          (unsigned long long)(a->data - data + a->nbytes), b->name,
          (unsigned long long)(b->data - data), (unsigned long long)(b->data - data + b->nbytes));
  }
  free(order);
  return st;
}

static esmt_status parse_header(const char *path, esmt_st_file *f, const char *json,
                                size_t json_len, const uint8_t *data, uint64_t data_len) {
  esmt_status st = ESMT_OK;
  json_error_t jerr;
  json_t *root = json_loadb(json, json_len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) return BAD("%s: header is not valid JSON (%s at column %d)", path, jerr.text,
                        jerr.column);
  if (!json_is_object(root)) {
    json_decref(root);
    return BAD("%s: header is not a JSON object", path);
  }
  size_t n = json_object_size(root);
  f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
  f->meta = NULL;
  if (!f->tensors) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (st) break;
    if (strcmp(key, "__metadata__") == 0) {
      if (!json_is_object(v)) { BAD("%s: __metadata__ is not an object", path); break; }
      f->meta = calloc(json_object_size(v) + 1, sizeof *f->meta);
      if (!f->meta) { st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path); break; }
      const char *mk;
      json_t *mv;
      json_object_foreach(v, mk, mv) {
        if (!json_is_string(mv)) { BAD("%s: metadata '%s' is not a string", path, mk); break; }
        f->meta[f->meta_count].key = strdup(mk);
        f->meta[f->meta_count].value = strdup(json_string_value(mv));
        f->meta_count++;
      }
      continue;
    }
    st = parse_tensor(path, key, v, data, data_len, &f->tensors[f->count]);
    if (!st) f->count++;
  }
  json_decref(root);
  if (!st) st = check_overlap(path, f, data);
  return st;
}

esmt_status esmt_st_open(const char *path, esmt_st_file *f) {
  memset(f, 0, sizeof *f);
  esmt_status st = ESMT_OK;
  int fd;
  struct stat sb;
  st = esmt_open_input(path, "safetensors file", &fd, &sb);
  if (st) return st;
  if (sb.st_size < 10) {
    close(fd);
    return esmt_fail(ESMT_ERR_FORMAT, "%s: %lld bytes is too short for a safetensors file", path,
                     (long long)sb.st_size);
  }
  void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return esmt_fail(ESMT_ERR_IO, "%s: mmap: %s", path, strerror(errno));
  f->map = map;
  f->size = (uint64_t)sb.st_size;
  const uint8_t *p = map;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];
  if (hlen < 2 || hlen > f->size - 8 || hlen > (100u << 20)) {
    BAD("%s: header length %llu (the first 8 bytes) %s the %llu-byte file: not a safetensors "
        "file, or truncated", path, (unsigned long long)hlen,
        hlen > (100u << 20) ? "is over the 100 MiB limit for" : "does not fit",
        (unsigned long long)f->size);
  } else {
    st = parse_header(path, f, (const char *)p + 8, (size_t)hlen, p + 8 + hlen,
                      f->size - 8 - hlen);
  }
  if (st) esmt_st_close(f);
  return st;
}

void esmt_st_close(esmt_st_file *f) {
  if (!f) return;
  for (int i = 0; i < f->count; i++) free(f->tensors[i].name);
  for (int i = 0; i < f->meta_count; i++) {
    free(f->meta[i].key);
    free(f->meta[i].value);
  }
  free(f->tensors);
  free(f->meta);
  if (f->map) munmap(f->map, (size_t)f->size);
  memset(f, 0, sizeof *f);
}

const esmt_st_tensor *esmt_st_find(const esmt_st_file *f, const char *name) {
  for (int i = 0; i < f->count; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}

const char *esmt_st_meta_get(const esmt_st_file *f, const char *key) {
  for (int i = 0; i < f->meta_count; i++)
    if (f->meta[i].key && strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
  return NULL;
}

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp((double)m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                      : ldexp((double)(m | 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

static double elem(const esmt_st_tensor *t, uint64_t i) {
  const uint8_t *p = t->data;
  switch (t->dtype) {
    case ESMT_ST_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case ESMT_ST_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case ESMT_ST_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return half_to_double(h); }
    case ESMT_ST_BF16: {
      uint16_t h; memcpy(&h, p + 2 * i, 2);
      uint32_t u = (uint32_t)h << 16; float v; memcpy(&v, &u, 4); return v;
    }
    case ESMT_ST_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case ESMT_ST_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case ESMT_ST_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case ESMT_ST_I8: return (int8_t)p[i];
    default: return p[i];
  }
}

void esmt_st_to_f32(const esmt_st_tensor *t, float *out) {
  if (t->dtype == ESMT_ST_F32) { memcpy(out, t->data, t->nbytes); return; }
  for (uint64_t i = 0; i < t->numel; i++) out[i] = (float)elem(t, i);
}

void esmt_st_to_f64(const esmt_st_tensor *t, double *out) {
  for (uint64_t i = 0; i < t->numel; i++) out[i] = elem(t, i);
}
