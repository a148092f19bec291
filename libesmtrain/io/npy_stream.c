/* SPDX-License-Identifier: MIT */
/* esmt_npy_stream (infer.h): a .npy array written as a stream of rows on
 * the caller's descriptor; the header, of a fixed size, is rewritten with
 * the row count at each commit. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npy_stream.h"

struct esmt_npy_stream {
  int fd;
  char *path;
  esmt_npy_dtype dtype;
  int64_t cols;   /* 0: a 1-D array */
  uint64_t rows;  /* rows written (committed or not) */
};

static const char *descr(esmt_npy_dtype t) { return t == ESMT_NPY_I64 ? "<i8" : "<f4"; }

uint64_t esmt_npy_row_bytes(const esmt_npy_stream *f) {
  return (uint64_t)(f->cols > 0 ? f->cols : 1) * (f->dtype == ESMT_NPY_I64 ? 8u : 4u);
}

int esmt_npy_fd(const esmt_npy_stream *f) { return f->fd; }
esmt_npy_dtype esmt_npy_type(const esmt_npy_stream *f) { return f->dtype; }
int64_t esmt_npy_cols(const esmt_npy_stream *f) { return f->cols; }
uint64_t esmt_npy_stream_rows(const esmt_npy_stream *f) { return f ? f->rows : 0; }

static esmt_status fail(const esmt_npy_stream *f, const char *what) {
  return esmt_fail(ESMT_ERR_IO, "%s: %s: %s", f->path, what, strerror(errno));
}

static int write_at(int fd, const void *data, size_t n, off_t at) {
  const char *p = data;
  while (n) {
    ssize_t w = at >= 0 ? pwrite(fd, p, n, at) : write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
    if (at >= 0) at += w;
  }
  return 0;
}

static esmt_status header(esmt_npy_stream *f) {
  char h[ESMT_NPY_HEADER_BYTES];
  memset(h, ' ', sizeof h);
  memcpy(h, "\x93NUMPY\x01\x00", 8);
  h[8] = (char)(ESMT_NPY_HEADER_BYTES - 10);
  h[9] = 0;
  char dict[ESMT_NPY_HEADER_BYTES];
  int n = f->cols > 0
              ? snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': "
                         "(%" PRIu64 ", %" PRId64 "), }", descr(f->dtype), f->rows, f->cols)
              : snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': "
                         "(%" PRIu64 ",), }", descr(f->dtype), f->rows);
  if (n < 0 || n > ESMT_NPY_HEADER_BYTES - 11) {
    errno = EOVERFLOW;
    return fail(f, "header");
  }
  memcpy(h + 10, dict, (size_t)n);
  h[ESMT_NPY_HEADER_BYTES - 1] = '\n';
  if (write_at(f->fd, h, sizeof h, 0) != 0) return fail(f, "cannot write the header");
  return ESMT_OK;
}

static esmt_status start(esmt_npy_stream *f, int64_t resume_rows) {
  if (resume_rows < 0) {
    esmt_status st = header(f);
    if (st) return st;
    /* pwrite leaves the offset at 0: the rows go after the header */
    if (lseek(f->fd, ESMT_NPY_HEADER_BYTES, SEEK_SET) < 0) return fail(f, "seek");
    return ESMT_OK;
  }
  struct stat sb;
  const uint64_t want = ESMT_NPY_HEADER_BYTES + (uint64_t)resume_rows * esmt_npy_row_bytes(f);
  if (fstat(f->fd, &sb) != 0) return fail(f, "stat");
  if ((uint64_t)sb.st_size < want)
    return esmt_fail(ESMT_ERR_FORMAT, "%s holds %lld bytes, fewer than the %llu its %lld "
                     "committed rows need: the output was changed outside esmtrain; start a new "
                     "one", f->path, (long long)sb.st_size, (unsigned long long)want,
                     (long long)resume_rows);
  f->rows = (uint64_t)resume_rows;
  return ESMT_OK;
}

esmt_status esmt_npy_stream_start(int fd, const char *path, esmt_npy_dtype dtype, int64_t cols,
                                  int64_t resume_rows, esmt_npy_stream **out) {
  const char *fn = "esmt_npy_stream_start";
  ESMT_CHECK_ARG(fd >= 0 && path && out && cols >= 0, fn,
                 "fd must be open, path and out not NULL, cols >= 0");
  ESMT_CHECK_ARG(dtype == ESMT_NPY_F32 || dtype == ESMT_NPY_I64, fn,
                 "dtype must be ESMT_NPY_F32 or ESMT_NPY_I64");
  *out = NULL;
  esmt_npy_stream *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(path))) {
    free(f);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  f->fd = fd;
  f->dtype = dtype;
  f->cols = cols;
  esmt_status st = start(f, resume_rows);
  if (st) {
    esmt_npy_stream_end(f);
    return st;
  }
  *out = f;
  return ESMT_OK;
}

esmt_status esmt_npy_stream_cut(esmt_npy_stream *f) {
  ESMT_CHECK_ARG(f, "esmt_npy_stream_cut", "stream must not be NULL");
  /* rows past the last commit were never promised: cut them */
  const off_t want = (off_t)(ESMT_NPY_HEADER_BYTES + f->rows * esmt_npy_row_bytes(f));
  if (ftruncate(f->fd, want) != 0) return fail(f, "cannot cut back to the commit");
  if (lseek(f->fd, want, SEEK_SET) < 0) return fail(f, "seek");
  return ESMT_OK;
}

esmt_status esmt_npy_stream_append(esmt_npy_stream *f, const void *data, uint64_t rows) {
  ESMT_CHECK_ARG(f && (data || !rows), "esmt_npy_stream_append",
                 "stream and data must not be NULL");
  if (!rows) return ESMT_OK;
  if (write_at(f->fd, data, (size_t)(rows * esmt_npy_row_bytes(f)), -1) != 0)
    return fail(f, "cannot write");
  f->rows += rows;
  return ESMT_OK;
}

esmt_status esmt_npy_stream_commit(esmt_npy_stream *f) {
  ESMT_CHECK_ARG(f, "esmt_npy_stream_commit", "stream must not be NULL");
  esmt_status st = header(f);
  if (st) return st;
  if (fsync(f->fd) != 0) return fail(f, "fsync");
  return ESMT_OK;
}

void esmt_npy_stream_end(esmt_npy_stream *f) {
  if (!f) return;
  free(f->path);
  free(f);
}
