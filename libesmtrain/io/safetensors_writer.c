/* SPDX-License-Identifier: MIT */
/* safetensors writer (see safetensors.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "fs_util.h"
#include "safetensors.h"
#include "input_file.h"

static const char *const k_names[] = {"F64", "F32", "F16", "BF16", "I64",
                                      "I32", "I16", "I8",  "U8",   "BOOL"};
static const int k_sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1};

int esmt_st_dtype_size(esmt_st_dtype dt) { return k_sizes[dt]; }

struct esmt_st_writer {
  int fd;
  char *path;
  uint64_t expected, written;
  uLong crc;
};

static esmt_status begin(const char *path, const esmt_st_entry *e, int count,
                         const esmt_st_meta *meta, int meta_count, int flags,
                         esmt_st_writer **out) {
  *out = NULL;
  json_t *root = json_object();
  if (!root) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  if (meta_count > 0) {
    json_t *m = json_object();
    for (int i = 0; i < meta_count; i++) json_object_set_new(m, meta[i].key, json_string(meta[i].value));
    json_object_set_new(root, "__metadata__", m);
  }
  uint64_t off = 0;
  for (int i = 0; i < count; i++) {
    uint64_t numel = 1;
    json_t *shape = json_array();
    for (int k = 0; k < e[i].ndim; k++) {
      json_array_append_new(shape, json_integer(e[i].shape[k]));
      numel *= (uint64_t)e[i].shape[k];
    }
    uint64_t bytes = numel * (uint64_t)k_sizes[e[i].dtype];
    json_t *t = json_object();
    json_object_set_new(t, "dtype", json_string(k_names[e[i].dtype]));
    json_object_set_new(t, "shape", shape);
    json_object_set_new(t, "data_offsets",
                        json_pack("[II]", (json_int_t)off, (json_int_t)(off + bytes)));
    json_object_set_new(root, e[i].name, t);
    off += bytes;
  }
  char *hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!hdr) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  size_t hlen = strlen(hdr);
  size_t padded = (hlen + 7) & ~(size_t)7; /* keep the data 8-byte aligned */
  esmt_st_writer *w = calloc(1, sizeof *w);
  char *buf = malloc(8 + padded);
  esmt_status st = ESMT_OK;
  if (!w || !buf || !(w->path = strdup(path))) {
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  } else {
    for (int i = 0; i < 8; i++) buf[i] = (char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, hdr, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    w->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
    if (w->fd < 0) st = esmt_fail(ESMT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    else st = esmt_write_all(w->fd, buf, 8 + padded, path);
    w->crc = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)buf, (uInt)(8 + padded));
  }
  free(hdr);
  free(buf);
  if (st) {
    if (w && w->path) {
      if (w->fd >= 0) esmt_st_writer_abort(w);
      else { free(w->path); free(w); }
    } else {
      free(w);
    }
    return st;
  }
  w->expected = off;
  *out = w;
  return ESMT_OK;
}

esmt_status esmt_st_writer_begin(const char *path, const esmt_st_entry *e, int count,
                                 const esmt_st_meta *meta, int meta_count, esmt_st_writer **out) {
  return begin(path, e, count, meta, meta_count, O_TRUNC, out);
}

esmt_status esmt_st_writer_begin_new(const char *path, const esmt_st_entry *e, int count,
                                     const esmt_st_meta *meta, int meta_count,
                                     esmt_st_writer **out) {
  return begin(path, e, count, meta, meta_count, O_EXCL | O_NOFOLLOW, out);
}

esmt_status esmt_st_writer_append(esmt_st_writer *w, const void *data, uint64_t bytes) {
  if (w->written + bytes > w->expected)
    return esmt_fail(ESMT_ERR_INTERNAL, "%s: more tensor bytes than the header declares", w->path);
  esmt_status st = esmt_write_all(w->fd, data, (size_t)bytes, w->path);
  if (st) return st;
  w->written += bytes;
  const Bytef *p = data;
  for (uint64_t left = bytes; left > 0;) { /* crc32 takes 32-bit lengths */
    uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
    w->crc = crc32(w->crc, p, chunk);
    p += chunk;
    left -= chunk;
  }
  return ESMT_OK;
}

esmt_status esmt_st_writer_finish(esmt_st_writer *w, uint32_t *crc) {
  esmt_status st = ESMT_OK;
  if (crc) *crc = (uint32_t)w->crc;
  if (w->written != w->expected)
    st = esmt_fail(ESMT_ERR_INTERNAL, "%s: %llu of %llu tensor bytes written", w->path,
                   (unsigned long long)w->written, (unsigned long long)w->expected);
  if (!st && fsync(w->fd) != 0)
    st = esmt_fail(ESMT_ERR_IO, "%s: fsync failed: %s", w->path, strerror(errno));
  if (close(w->fd) != 0 && !st)
    st = esmt_fail(ESMT_ERR_IO, "%s: close failed: %s", w->path, strerror(errno));
  w->fd = -1;
  if (st) unlink(w->path);
  free(w->path);
  free(w);
  return st;
}

void esmt_st_writer_abort(esmt_st_writer *w) {
  if (!w) return;
  if (w->fd >= 0) close(w->fd);
  unlink(w->path);
  free(w->path);
  free(w);
}

esmt_status esmt_file_crc32(const char *path, uint32_t *crc) {
  int fd;
  esmt_status st = esmt_open_input(path, "file to checksum", &fd, NULL);
  if (st) return st;
  uLong c = crc32(0L, Z_NULL, 0);
  static _Thread_local unsigned char buf[1 << 16];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      close(fd);
      return esmt_fail(ESMT_ERR_IO, "%s: read failed: %s", path, strerror(err));
    }
    if (r == 0) break;
    c = crc32(c, buf, (uInt)r);
  }
  close(fd);
  *crc = (uint32_t)c;
  return ESMT_OK;
}
