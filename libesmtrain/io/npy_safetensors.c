/* SPDX-License-Identifier: MIT */
/* esmt_npy_streams_to_safetensors (infer.h): the committed rows of .npy
 * streams copied into one new safetensors file through the library's one
 * safetensors writer (safetensors_writer.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npy_stream.h"
#include "safetensors.h"

enum { COPY_CHUNK = 1 << 20 };

static esmt_status copy_body(esmt_st_writer *w, const esmt_npy_stream *f, const char *name,
                             char *buf) {
  uint64_t left = esmt_npy_stream_rows(f) * esmt_npy_row_bytes(f);
  off_t at = ESMT_NPY_HEADER_BYTES;
  while (left) {
    const size_t want = left < COPY_CHUNK ? (size_t)left : COPY_CHUNK;
    ssize_t r = pread(esmt_npy_fd(f), buf, want, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return esmt_fail(ESMT_ERR_IO, "reading the rows of %s: %s", name,
                       r < 0 ? strerror(errno) : "the file is shorter than its rows");
    esmt_status st = esmt_st_writer_append(w, buf, (uint64_t)r);
    if (st) return st;
    at += r;
    left -= (uint64_t)r;
  }
  return ESMT_OK;
}

esmt_status esmt_npy_streams_to_safetensors(const char *path, esmt_npy_stream *const *streams,
                                            const char *const *names, int count,
                                            const char *const *meta, int meta_count) {
  const char *fn = "esmt_npy_streams_to_safetensors";
  ESMT_CHECK_ARG(path && count >= 0 && (!count || (streams && names)) &&
                 (meta_count <= 0 || meta), fn, "path, streams, names and meta must not be NULL");
  esmt_st_entry *e = calloc((size_t)(count ? count : 1), sizeof *e);
  esmt_st_meta *m = calloc((size_t)(meta_count > 0 ? meta_count : 1), sizeof *m);
  char *buf = malloc(COPY_CHUNK);
  esmt_status st = ESMT_OK;
  if (!e || !m || !buf) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  for (int i = 0; !st && i < count; i++) {
    const esmt_npy_stream *f = streams[i];
    if (!f || !names[i]) {
      st = esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: stream or name %d is NULL", fn, i);
      break;
    }
    e[i].name = names[i];
    e[i].dtype = esmt_npy_type(f) == ESMT_NPY_I64 ? ESMT_ST_I64 : ESMT_ST_F32;
    e[i].ndim = esmt_npy_cols(f) > 0 ? 2 : 1;
    e[i].shape[0] = (int64_t)esmt_npy_stream_rows(f);
    e[i].shape[1] = esmt_npy_cols(f);
  }
  for (int k = 0; !st && k < meta_count; k++) {
    m[k].key = (char *)meta[2 * k];
    m[k].value = (char *)meta[2 * k + 1];
  }
  esmt_st_writer *w = NULL;
  if (!st) st = esmt_st_writer_begin_new(path, e, count, m, meta_count > 0 ? meta_count : 0, &w);
  for (int i = 0; !st && i < count; i++) st = copy_body(w, streams[i], names[i], buf);
  if (w) {
    if (st) esmt_st_writer_abort(w);
    else st = esmt_st_writer_finish(w, NULL);
  }
  free(e);
  free(m);
  free(buf);
  return st;
}
