/* SPDX-License-Identifier: MIT */
/* Bounded, interruptible line reading (input_reader.h; the policy is in
 * data.h, esmt_line_reader). */
#define _GNU_SOURCE /* F_DUPFD_CLOEXEC */
#include "input_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "input_file.h"

#define CHUNK (1 << 16)

struct esmt_line_reader {
  esmt_input_read_fn read;
  void *src;
  int fd;                    /* ours to close, or -1 */
  char *name;
  char what[64];
  uint64_t max_bytes, max_line, total; /* total: the file's size, 0 when unknown */
  esmt_progress_fn progress;
  void *user;
  double t0;
  unsigned char buf[CHUNK];
  size_t pos, len;
  int eof;
  char *line;
  size_t line_len, line_cap;
  uint64_t bytes, line_no;
};

const char *esmt_limit_text(uint64_t bytes, char *out, size_t cap) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0)
    snprintf(out, cap, "%llu GiB", (unsigned long long)(bytes >> 30));
  else if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
    snprintf(out, cap, "%llu MiB", (unsigned long long)(bytes >> 20));
  else if (bytes >= (1u << 10) && bytes % (1u << 10) == 0)
    snprintf(out, cap, "%llu KiB", (unsigned long long)(bytes >> 10));
  else
    snprintf(out, cap, "%llu bytes", (unsigned long long)bytes);
  return out;
}

static esmt_status fd_read(void *src, void *buf, size_t cap, size_t *got) {
  const esmt_line_reader *r = src;
  *got = 0;
  ssize_t n = read(r->fd, buf, cap);
  if (n >= 0) {
    *got = (size_t)n;
    return ESMT_OK;
  }
  if (errno == EINTR) return ESMT_ERR_CANCELLED;
  return esmt_fail(ESMT_ERR_IO, "%s: reading the %s: %s", r->name, r->what, strerror(errno));
}

static esmt_status reader_new(const char *name, const esmt_line_reader_options *opts,
                              esmt_line_reader **out) {
  *out = NULL;
  if (opts)
    ESMT_CHECK_ARG(opts->struct_size >= sizeof *opts, "esmt_line_reader_open",
                   "opts.struct_size is too small (use ESMT_LINE_READER_OPTIONS_INIT)");
  esmt_line_reader *r = calloc(1, sizeof *r);
  if (r) r->name = strdup(name);
  if (!r || !r->name) {
    free(r);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
  }
  r->fd = -1;
  snprintf(r->what, sizeof r->what, "%s", opts && opts->what ? opts->what : "input");
  r->max_bytes = opts && opts->max_bytes ? opts->max_bytes : ESMT_LINE_READER_MAX_BYTES;
  r->max_line = opts && opts->max_line ? opts->max_line : ESMT_LINE_READER_MAX_LINE;
  r->progress = opts ? opts->progress : NULL;
  r->user = opts ? opts->user : NULL;
  r->t0 = esmt_now_s();
  *out = r;
  return ESMT_OK;
}

esmt_status esmt_line_reader_wrap(esmt_input_read_fn read, void *src, const char *name,
                                  const esmt_line_reader_options *opts, esmt_line_reader **out) {
  esmt_status st = reader_new(name, opts, out);
  if (st) return st;
  (*out)->read = read;
  (*out)->src = src;
  return ESMT_OK;
}

static int is_stdin(const char *path) { return !strcmp(path, "-") || !strcmp(path, "/dev/stdin"); }

esmt_status esmt_line_reader_open(const char *path, const esmt_line_reader_options *opts,
                                  esmt_line_reader **out) {
  ESMT_CHECK_ARG(path && out, "esmt_line_reader_open", "path and out must not be NULL");
  const int from_stdin = opts && opts->allow_stdin && is_stdin(path);
  esmt_status st = reader_new(from_stdin ? "standard input" : path, opts, out);
  if (st) return st;
  esmt_line_reader *r = *out;
  struct stat sb;
  if (from_stdin) {
    if (isatty(STDIN_FILENO))
      st = esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "standard input is a terminal: pipe the %s in "
                     "(`cat FILE | ...`) or give its path", r->what);
    else if ((r->fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)) < 0)
      st = esmt_fail(ESMT_ERR_IO, "standard input: cannot read the %s: %s", r->what,
                     strerror(errno));
    else if (fstat(r->fd, &sb) == 0 && S_ISREG(sb.st_mode))
      r->total = (uint64_t)sb.st_size;
  } else if (!(st = esmt_open_input(path, r->what, &r->fd, &sb))) {
    r->total = (uint64_t)sb.st_size;
  }
  char lim[32];
  if (!st && r->total > r->max_bytes)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: %llu bytes is larger than a %s may be (at most %s)",
                   r->name, (unsigned long long)r->total, r->what,
                   esmt_limit_text(r->max_bytes, lim, sizeof lim));
  if (st) {
    esmt_line_reader_close(r);
    *out = NULL;
    return st;
  }
  r->read = fd_read;
  r->src = r;
  return ESMT_OK;
}

static esmt_status ask_progress(esmt_line_reader *r) {
  if (!r->progress) return ESMT_OK;
  esmt_progress p = {sizeof p, "read", r->bytes, r->total, "bytes", esmt_now_s() - r->t0,
                     r->line_no};
  if (r->progress(r->user, &p))
    return esmt_fail(ESMT_ERR_CANCELLED, "%s: reading the %s: cancelled at line %llu", r->name,
                     r->what, (unsigned long long)r->line_no + 1);
  return ESMT_OK;
}

/* The next chunk into buf; r->eof at the end. */
static esmt_status fill(esmt_line_reader *r) {
  char lim[32];
  for (;;) {
    size_t got = 0;
    esmt_status st = r->read(r->src, r->buf, sizeof r->buf, &got);
    if (st == ESMT_ERR_CANCELLED) { /* interrupted by a signal: stop if the caller says so */
      if ((st = ask_progress(r))) return st;
      continue;
    }
    if (st) return st;
    r->pos = 0;
    r->len = got;
    r->eof = got == 0;
    r->bytes += got;
    if (r->bytes > r->max_bytes)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu: the %s is larger than %s, the most it "
                       "may hold (an endless stream?)", r->name,
                       (unsigned long long)r->line_no + 1, r->what,
                       esmt_limit_text(r->max_bytes, lim, sizeof lim));
    return ask_progress(r);
  }
}

static esmt_status append(esmt_line_reader *r, const unsigned char *s, size_t n) {
  char lim[32];
  if (memchr(s, 0, n))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu holds a NUL byte (at byte %zu of the "
                     "line): a %s is text", r->name, (unsigned long long)r->line_no + 1,
                     r->line_len + (size_t)((const unsigned char *)memchr(s, 0, n) - s) + 1,
                     r->what);
  if (r->line_len + n > r->max_line)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu is longer than %s, the longest line a %s "
                     "may have", r->name, (unsigned long long)r->line_no + 1,
                     esmt_limit_text(r->max_line, lim, sizeof lim), r->what);
  if (r->line_len + n + 1 > r->line_cap) {
    size_t cap = r->line_cap ? r->line_cap : 256;
    while (cap < r->line_len + n + 1) cap *= 2;
    char *p = realloc(r->line, cap);
    if (!p) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: line %llu: out of memory", r->name,
                             (unsigned long long)r->line_no + 1);
    r->line = p;
    r->line_cap = cap;
  }
  memcpy(r->line + r->line_len, s, n);
  r->line_len += n;
  r->line[r->line_len] = '\0';
  return ESMT_OK;
}

esmt_status esmt_line_reader_next(esmt_line_reader *r, const char **line, size_t *len,
                                  int *got) {
  ESMT_CHECK_ARG(r && line && got, "esmt_line_reader_next", "arguments must not be NULL");
  *got = 0;
  *line = NULL;
  if (len) *len = 0;
  r->line_len = 0;
  esmt_status st = append(r, (const unsigned char *)"", 0);
  int any = 0;
  while (!st) {
    if (r->pos == r->len) {
      if (r->eof || (st = fill(r)) || r->eof) break;
    }
    const unsigned char *s = r->buf + r->pos;
    const unsigned char *nl = memchr(s, '\n', r->len - r->pos);
    const size_t n = nl ? (size_t)(nl - s) : r->len - r->pos;
    any = 1;
    if ((st = append(r, s, n))) break;
    r->pos += n + (nl != NULL);
    if (nl) break;
  }
  if (st) return st;
  if (!any) return ESMT_OK; /* the end */
  r->line_no++;
  *line = r->line;
  if (len) *len = r->line_len;
  *got = 1;
  return ESMT_OK;
}

uint64_t esmt_line_reader_line_number(const esmt_line_reader *r) { return r ? r->line_no : 0; }

void esmt_line_reader_close(esmt_line_reader *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  free(r->line);
  free(r->name);
  free(r);
}

esmt_status esmt_input_read_all(const char *path, const esmt_line_reader_options *opts,
                                char **text, size_t *len) {
  *text = NULL;
  *len = 0;
  esmt_line_reader *r = NULL;
  esmt_status st = esmt_line_reader_open(path, opts, &r);
  char *all = NULL;
  size_t n = 0, cap = 0;
  for (int got = 1; !st && got;) {
    const char *line;
    size_t ln;
    if ((st = esmt_line_reader_next(r, &line, &ln, &got)) || !got) break;
    if (n + ln + 2 > cap) {
      size_t c = cap ? cap : 4096;
      while (c < n + ln + 2) c *= 2;
      char *p = realloc(all, c);
      if (!p) {
        st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        break;
      }
      all = p;
      cap = c;
    }
    memcpy(all + n, line, ln);
    n += ln;
    all[n++] = '\n';
    all[n] = '\0';
  }
  esmt_line_reader_close(r);
  if (st) {
    free(all);
    return st;
  }
  if (!all && !(all = calloc(1, 1))) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  *text = all;
  *len = n;
  return ESMT_OK;
}
