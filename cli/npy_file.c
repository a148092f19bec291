/* SPDX-License-Identifier: MIT */
/* Streaming .npy writer (npy_file.h). */
#define _GNU_SOURCE
#include "npy_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t cli_npy_row_bytes(const cli_npy *f) {
  return (uint64_t)(f->cols > 0 ? f->cols : 1) * f->esize;
}

static int fail(const cli_npy *f, const char *cmd, const char *what) {
  fprintf(stderr, "esmtrain-example: %s: %s: %s: %s\n", cmd, f->path, what, strerror(errno));
  return -1;
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

static int header(cli_npy *f, const char *cmd) {
  char h[CLI_NPY_HEADER];
  memset(h, ' ', sizeof h);
  memcpy(h, "\x93NUMPY\x01\x00", 8);
  h[8] = (char)(CLI_NPY_HEADER - 10);
  h[9] = 0;
  char dict[CLI_NPY_HEADER];
  int n = f->cols > 0
              ? snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': "
                         "(%" PRIu64 ", %" PRId64 "), }", f->descr, f->rows, f->cols)
              : snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': "
                         "(%" PRIu64 ",), }", f->descr, f->rows);
  if (n < 0 || n > CLI_NPY_HEADER - 11) {
    errno = EOVERFLOW;
    return fail(f, cmd, "header");
  }
  memcpy(h + 10, dict, (size_t)n);
  h[CLI_NPY_HEADER - 1] = '\n';
  if (write_at(f->fd, h, sizeof h, 0) != 0) return fail(f, cmd, "cannot write the header");
  return 0;
}

int cli_npy_open(cli_npy *f, const char *cmd, const char *path, const char *descr, size_t esize,
                 int64_t cols, int64_t resume_rows, const char *recorded) {
  memset(f, 0, sizeof *f);
  snprintf(f->path, sizeof f->path, "%s", path);
  f->descr = descr;
  f->esize = esize;
  f->cols = cols;
  f->fd = resume_rows >= 0 ? cli_out_reopen(cmd, path, recorded) : cli_out_create(cmd, path);
  if (f->fd < 0) return -1;
  cli_out_id(f->fd, f->id, sizeof f->id);
  if (resume_rows < 0) {
    f->rows = 0;
    if (header(f, cmd)) return -1;
    /* pwrite leaves the offset at 0: the rows go after the header */
    if (lseek(f->fd, CLI_NPY_HEADER, SEEK_SET) < 0) return fail(f, cmd, "seek");
    return 0;
  }
  struct stat sb;
  const uint64_t want = CLI_NPY_HEADER + (uint64_t)resume_rows * cli_npy_row_bytes(f);
  if (fstat(f->fd, &sb) != 0) return fail(f, cmd, "stat");
  if ((uint64_t)sb.st_size < want) {
    fprintf(stderr, "esmtrain-example: %s: %s holds %lld bytes, fewer than the %llu its %lld "
            "committed rows need: the output was changed outside esmtrain; start a new one\n",
            cmd, path, (long long)sb.st_size, (unsigned long long)want, (long long)resume_rows);
    return -1;
  }
  f->rows = (uint64_t)resume_rows;
  return 0;
}

int cli_npy_cut(cli_npy *f, const char *cmd) {
  /* rows past the last commit were never promised: cut them */
  const off_t want = (off_t)(CLI_NPY_HEADER + f->rows * cli_npy_row_bytes(f));
  if (ftruncate(f->fd, want) != 0) return fail(f, cmd, "cannot cut back to the commit");
  if (lseek(f->fd, want, SEEK_SET) < 0) return fail(f, cmd, "seek");
  return 0;
}

int cli_npy_append(cli_npy *f, const char *cmd, const void *data, uint64_t rows) {
  if (!rows) return 0;
  if (write_at(f->fd, data, (size_t)(rows * cli_npy_row_bytes(f)), -1) != 0)
    return fail(f, cmd, "cannot write");
  f->rows += rows;
  return 0;
}

int cli_npy_commit(cli_npy *f, const char *cmd) {
  if (header(f, cmd) != 0) return -1;
  if (fsync(f->fd) != 0) return fail(f, cmd, "fsync");
  return 0;
}

void cli_npy_close(cli_npy *f) {
  if (f->fd > 0) close(f->fd);
  f->fd = -1;
}
