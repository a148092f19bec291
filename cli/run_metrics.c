/* SPDX-License-Identifier: MIT */
/* metrics.jsonl read back for plot and watch (run_metrics.h). */
#define _POSIX_C_SOURCE 200809L
#include "run_metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
static int add_line(cli_run_metrics *m, const char *line, size_t len) {
  json_t *j = json_loadb(line, len, 0, NULL);
  const char *kind = json_is_object(j) ? json_string_value(json_object_get(j, "kind")) : NULL;
  json_t *step = kind ? json_object_get(j, "step") : NULL;
  int rc = 0;
  if (json_is_integer(step) && !strcmp(kind, "train")) {
    rc = grow((void **)&m->train, &m->cap_train, m->n_train + 1, sizeof *m->train) ? -1 : 1;
    if (rc == 1) {
      cli_train_point *p = &m->train[m->n_train++];
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
      cli_eval_point *p = &m->eval[m->n_eval++];
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

static void drop_records(cli_run_metrics *m) {
  m->n_train = m->n_eval = 0;
  m->bad_lines = 0;
  m->offset = 0;
}

int cli_run_metrics_poll(cli_run_metrics *m, const char *path, int *reset, char *err, size_t cap) {
  if (reset) *reset = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    snprintf(err, cap, "cannot read %s: %s", path, strerror(errno));
    return -1;
  }
  struct stat sb;
  const int no_stat = fstat(fd, &sb) != 0; /* sb is undefined then */
  if (no_stat || !S_ISREG(sb.st_mode)) {
    snprintf(err, cap, "%s: %s", path, no_stat ? strerror(errno) : "not a regular file");
    close(fd);
    return -1;
  }
  if (m->have_file && (sb.st_dev != m->dev || sb.st_ino != m->ino || sb.st_size < m->offset)) {
    drop_records(m);
    if (reset) *reset = 1;
  }
  m->have_file = 1;
  m->dev = sb.st_dev;
  m->ino = sb.st_ino;
  int added = 0;
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
        added += r;
      }
      start = i + 1;
    }
    m->offset += (off_t)start;
    memmove(buf, buf + start, len - start);
    len -= start;
    if (len > METRICS_MAX_LINE) { /* a record is a few hundred bytes: not a metrics file */
      snprintf(err, cap, "%s: a line at byte %lld is longer than %d MiB: not a metrics.jsonl "
               "esmtrain wrote", path, (long long)m->offset, METRICS_MAX_LINE >> 20);
      free(buf);
      close(fd);
      return -1;
    }
  }
  free(buf);
  close(fd);
  return added;
io_error:
  snprintf(err, cap, "reading %s: %s", path, strerror(errno));
  free(buf);
  close(fd);
  return -1;
no_memory:
  snprintf(err, cap, "reading %s: out of memory", path);
  free(buf);
  close(fd);
  return -1;
}

int cli_run_metrics_load(cli_run_metrics *m, const char *path, char *err, size_t cap) {
  if (access(path, F_OK) != 0) {
    snprintf(err, cap, "cannot read %s: %s", path, strerror(errno));
    return -1;
  }
  return cli_run_metrics_poll(m, path, NULL, err, cap) < 0 ? -1 : 0;
}

void cli_run_metrics_free(cli_run_metrics *m) {
  free(m->train);
  free(m->eval);
  memset(m, 0, sizeof *m);
}
