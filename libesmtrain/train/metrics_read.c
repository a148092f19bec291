/* SPDX-License-Identifier: MIT */
/* esmt_metrics_reader (trainer.h): a run's metrics.jsonl, as
 * metrics_sink.c writes it (docs/formats.md "Metrics files"), read back
 * whole or followed as the file grows (plot, watch, embedders). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

struct esmt_metrics_reader {
  char *path;
  esmt_metrics_train *train;
  size_t n_train, cap_train;
  esmt_metrics_eval *eval;
  size_t n_eval, cap_eval;
  size_t bad_lines;
  /* the file read so far (a replaced or shorter file is read again) */
  dev_t dev;
  ino_t ino;
  off_t offset;
  int have_file;
};

static double num(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

static int grow(void **p, size_t *cap, size_t need, size_t esize) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap * 2 : 256;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * esize);
  if (!q) return -1;
  *p = q;
  *cap = c;
  return 0;
}

/* One line: 1 when it was a record, 0 when not, -1 out of memory. */
static int add_line(esmt_metrics_reader *m, const char *line, size_t len) {
  json_t *j = json_loadb(line, len, 0, NULL);
  const char *kind = json_is_object(j) ? json_string_value(json_object_get(j, "kind")) : NULL;
  json_t *step = kind ? json_object_get(j, "step") : NULL;
  int rc = 0;
  if (json_is_integer(step) && !strcmp(kind, "train")) {
    rc = grow((void **)&m->train, &m->cap_train, m->n_train + 1, sizeof *m->train) ? -1 : 1;
    if (rc == 1) {
      esmt_metrics_train *p = &m->train[m->n_train++];
      p->step = (int64_t)json_integer_value(step);
      p->loss = num(j, "loss");
      p->lr = num(j, "lr");
      p->grad_norm = num(j, "grad_norm");
      p->tokens = num(j, "tokens");
      p->tokens_per_s = num(j, "tokens_per_s");
      p->mfu = num(j, "mfu");
      p->step_ms = num(j, "step_ms");
      p->elapsed_s = num(j, "elapsed_s");
      p->eta_s = num(j, "eta_s");
      p->padding = num(j, "padding");
      p->loss_scale = num(j, "loss_scale");
      p->overflows = num(j, "overflows");
      p->skipped = num(j, "skipped");
      p->rss_mib = num(j, "rss_mib");
      p->max_steps = num(j, "max_steps");
      p->device_util = num(j, "device_util");
      p->device_mem_mib = num(j, "device_mem_mib");
      p->device_mem_total_mib = num(j, "device_mem_total_mib");
    }
  } else if (json_is_integer(step) && !strcmp(kind, "eval")) {
    rc = grow((void **)&m->eval, &m->cap_eval, m->n_eval + 1, sizeof *m->eval) ? -1 : 1;
    if (rc == 1) {
      esmt_metrics_eval *p = &m->eval[m->n_eval++];
      p->step = (int64_t)json_integer_value(step);
      p->loss = num(j, "loss");
      p->perplexity = num(j, "perplexity");
      p->accuracy = num(j, "accuracy");
      p->unigram_perplexity = num(j, "unigram_perplexity");
      p->tokens = NAN; /* the train line of this step may come after it */
      for (size_t i = m->n_train; i-- > 0;)
        if (m->train[i].step <= p->step) {
          if (m->train[i].step == p->step) p->tokens = m->train[i].tokens;
          break;
        }
    }
  } else {
    m->bad_lines++;
  }
  json_decref(j);
  return rc;
}

/* The longest line read (the reader keeps a partial line in memory). */
#define METRICS_MAX_LINE (1 << 20)

static void drop_records(esmt_metrics_reader *m) {
  m->n_train = m->n_eval = 0;
  m->bad_lines = 0;
  m->offset = 0;
}

esmt_status esmt_metrics_reader_poll(esmt_metrics_reader *m, int must_exist, size_t *added_out,
                                     int *reset) {
  ESMT_CHECK_ARG(m, "esmt_metrics_reader_poll", "reader must not be NULL");
  if (reset) *reset = 0;
  if (added_out) *added_out = 0;
  const char *path = m->path;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT && !must_exist) return ESMT_OK;
    return esmt_fail(ESMT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
  }
  struct stat sb;
  const int no_stat = fstat(fd, &sb) != 0; /* sb is undefined then */
  if (no_stat || !S_ISREG(sb.st_mode)) {
    esmt_status st = esmt_fail(no_stat ? ESMT_ERR_IO : ESMT_ERR_FORMAT, "%s: %s", path,
                               no_stat ? strerror(errno) : "not a regular file");
    close(fd);
    return st;
  }
  if (m->have_file && (sb.st_dev != m->dev || sb.st_ino != m->ino || sb.st_size < m->offset)) {
    drop_records(m);
    if (reset) *reset = 1;
  }
  m->have_file = 1;
  m->dev = sb.st_dev;
  m->ino = sb.st_ino;
  size_t added = 0;
  esmt_status st = ESMT_OK;
  char *buf = NULL;
  size_t len = 0, bcap = 0;
  if (lseek(fd, m->offset, SEEK_SET) < 0) goto io_error;
  for (;;) {
    if (grow((void **)&buf, &bcap, len + 65536, 1)) goto no_memory;
    ssize_t n = read(fd, buf + len, bcap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) goto io_error;
    if (n == 0) break;
    len += (size_t)n;
    /* whole lines go in; a partial last line waits for the next poll */
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
      if (buf[i] != '\n') continue;
      if (i > start) {
        const int r = add_line(m, buf + start, i - start);
        if (r < 0) goto no_memory;
        added += (size_t)r;
      }
      start = i + 1;
    }
    m->offset += (off_t)start;
    memmove(buf, buf + start, len - start);
    len -= start;
    if (len > METRICS_MAX_LINE) { /* a record is a few hundred bytes: not a metrics file */
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: a line at byte %lld is longer than %d MiB: not a "
                     "metrics.jsonl esmtrain wrote", path, (long long)m->offset,
                     METRICS_MAX_LINE >> 20);
      break;
    }
  }
  free(buf);
  close(fd);
  if (added_out) *added_out = added;
  return st;
io_error:
  st = esmt_fail(ESMT_ERR_IO, "reading %s: %s", path, strerror(errno));
  free(buf);
  close(fd);
  return st;
no_memory:
  free(buf);
  close(fd);
  return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "reading %s: out of memory", path);
}

esmt_status esmt_metrics_reader_open(const char *path, esmt_metrics_reader **out) {
  ESMT_CHECK_ARG(path && out, "esmt_metrics_reader_open", "path and out must not be NULL");
  *out = NULL;
  esmt_metrics_reader *m = calloc(1, sizeof *m);
  if (!m || !(m->path = strdup(path))) {
    free(m);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_metrics_reader_open: out of memory");
  }
  *out = m;
  return ESMT_OK;
}

void esmt_metrics_reader_close(esmt_metrics_reader *m) {
  if (!m) return;
  free(m->path);
  free(m->train);
  free(m->eval);
  free(m);
}

esmt_status esmt_metrics_reader_view(const esmt_metrics_reader *m, esmt_metrics_view *view) {
  const char *fn = "esmt_metrics_reader_view";
  ESMT_CHECK_ARG(m && view, fn, "reader and view must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_metrics_view", view->struct_size,
                                     sizeof(esmt_metrics_view));
  if (st) return st;
  view->train = m->train;
  view->n_train = m->n_train;
  view->eval = m->eval;
  view->n_eval = m->n_eval;
  view->bad_lines = m->bad_lines;
  return ESMT_OK;
}
