/* SPDX-License-Identifier: MIT */
/* TensorBoard event files (tfevents.h): Event messages packed by protobuf-c,
 * framed as TFRecords: uint64 length (little-endian), masked CRC-32C of
 * those 8 bytes, the data, masked CRC-32C of the data. */
#define _POSIX_C_SOURCE 200809L
#include "tfevents.h"

#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_util.h"
#include "tensorboard_event.pb-c.h"

struct esmt_tfevents {
  int fd;
  char path[4096];
};

uint32_t esmt_crc32c(const void *data, size_t n) {
  /* ISA-L's crc32_iscsi neither inverts its input nor its result: the
   * standard CRC-32C starts from ~0 and ends inverted (checked in
   * test_tfevents against the check value). It takes an int length. */
  uint32_t crc = 0xFFFFFFFFu;
  const unsigned char *p = data;
  while (n > 0) {
    const int len = n > (size_t)INT_MAX ? INT_MAX : (int)n;
    crc = crc32_iscsi((unsigned char *)p, len, crc);
    p += len;
    n -= (size_t)len;
  }
  return ~crc;
}

uint32_t esmt_tfrecord_masked_crc(const void *data, size_t n) {
  const uint32_t crc = esmt_crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* One Event as one TFRecord, in one write. */
static esmt_status write_event(esmt_tfevents *w, const EsmtTb__Event *ev) {
  const size_t len = esmt_tb__event__get_packed_size(ev);
  unsigned char *rec = malloc(len + 16);
  if (!rec) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory for an event", w->path);
  put_le(rec, len, 8);
  put_le(rec + 8, esmt_tfrecord_masked_crc(rec, 8), 4);
  esmt_tb__event__pack(ev, rec + 12);
  put_le(rec + 12 + len, esmt_tfrecord_masked_crc(rec + 12, len), 4);
  esmt_status st = esmt_write_all(w->fd, rec, len + 16, w->path);
  free(rec);
  return st;
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

esmt_status esmt_tfevents_open(const char *dir, esmt_tfevents **out) {
  const char *fn = "esmt_tfevents_open";
  ESMT_CHECK_ARG(dir && out, fn, "directory and out must not be NULL");
  *out = NULL;
  char host[256] = "localhost";
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = '\0';
  for (char *c = host; *c; c++)
    if (*c == '/') *c = '_'; /* the name must stay one path component */
  esmt_tfevents *w = calloc(1, sizeof *w);
  if (!w) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  int n = snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s.%ld.esmtrain", dir,
                   (long long)time(NULL), host, (long)getpid());
  if (n < 0 || (size_t)n >= sizeof w->path) {
    free(w);
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: the path in %s is too long", fn, dir);
  }
  /* O_APPEND: a name taken already (the same process, the same second)
   * gets its records after the ones there; nothing is overwritten */
  w->fd = open(w->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    const int e = errno;
    esmt_status st = esmt_fail(ESMT_ERR_IO, "%s: cannot create the TensorBoard event file %s: %s",
                               fn, w->path, strerror(e));
    free(w);
    return st;
  }
  EsmtTb__Event ev = ESMT_TB__EVENT__INIT;
  ev.wall_time = wall_now();
  ev.what_case = ESMT_TB__EVENT__WHAT_FILE_VERSION;
  ev.file_version = (char *)"brain.Event:2";
  esmt_status st = write_event(w, &ev);
  if (st) {
    close(w->fd);
    free(w);
    return esmt_fail_prefix(st, "%s: ", fn);
  }
  *out = w;
  return ESMT_OK;
}

esmt_status esmt_tfevents_scalars(esmt_tfevents *w, int64_t step, const esmt_tfevents_scalar *v,
                                  size_t n) {
  const char *fn = "esmt_tfevents_scalars";
  ESMT_CHECK_ARG(w && (v || n == 0), fn, "writer and values must not be NULL");
  EsmtTb__Summary__Value *vals = calloc(n ? n : 1, sizeof *vals);
  EsmtTb__Summary__Value **ptrs = calloc(n ? n : 1, sizeof *ptrs);
  if (!vals || !ptrs) {
    free(vals);
    free(ptrs);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  for (size_t i = 0; i < n; i++) {
    esmt_tb__summary__value__init(&vals[i]);
    vals[i].tag = (char *)v[i].tag;
    vals[i].value_case = ESMT_TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    vals[i].simple_value = (float)v[i].value;
    ptrs[i] = &vals[i];
  }
  EsmtTb__Summary sum = ESMT_TB__SUMMARY__INIT;
  sum.n_value = n;
  sum.value = ptrs;
  EsmtTb__Event ev = ESMT_TB__EVENT__INIT;
  ev.wall_time = wall_now();
  ev.step = step;
  ev.what_case = ESMT_TB__EVENT__WHAT_SUMMARY;
  ev.summary = &sum;
  esmt_status st = write_event(w, &ev);
  free(vals);
  free(ptrs);
  return st ? esmt_fail_prefix(st, "%s: ", fn) : ESMT_OK;
}

esmt_status esmt_tfevents_session_start(esmt_tfevents *w, int64_t step) {
  ESMT_CHECK_ARG(w, "esmt_tfevents_session_start", "writer is NULL");
  EsmtTb__SessionLog sl = ESMT_TB__SESSION_LOG__INIT;
  sl.status = ESMT_TB__SESSION_LOG__SESSION_STATUS__START;
  EsmtTb__Event ev = ESMT_TB__EVENT__INIT;
  ev.wall_time = wall_now();
  ev.step = step;
  ev.what_case = ESMT_TB__EVENT__WHAT_SESSION_LOG;
  ev.session_log = &sl;
  esmt_status st = write_event(w, &ev);
  return st ? esmt_fail_prefix(st, "esmt_tfevents_session_start: ") : ESMT_OK;
}

esmt_status esmt_tfevents_flush(esmt_tfevents *w) {
  ESMT_CHECK_ARG(w, "esmt_tfevents_flush", "writer is NULL");
  if (fsync(w->fd) != 0) {
    const int e = errno;
    return esmt_fail(ESMT_ERR_IO, "esmt_tfevents_flush: fsync %s: %s%s", w->path, strerror(e),
                     esmt_write_errno_hint(e));
  }
  return ESMT_OK;
}

esmt_status esmt_tfevents_close(esmt_tfevents *w) {
  if (!w) return ESMT_OK;
  esmt_status st = esmt_tfevents_flush(w);
  if (close(w->fd) != 0 && !st) {
    const int e = errno;
    st = esmt_fail(ESMT_ERR_IO, "esmt_tfevents_close: close %s: %s", w->path, strerror(e));
  }
  free(w);
  return st;
}

const char *esmt_tfevents_path(const esmt_tfevents *w) { return w ? w->path : ""; }
