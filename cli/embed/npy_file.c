/* SPDX-License-Identifier: MIT */
/* embed's .npy files (npy_file.h): the library's esmt_owned_file_* opens
 * them, its esmt_npy_stream writes them; its message printed as the
 * command's. */
#include "npy_file.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int said(const char *cmd, esmt_status st) {
  if (!st) return 0;
  fprintf(stderr, "esmtrain-example: %s: %s\n", cmd, esmt_last_error());
  return -1;
}

int cli_owned_open(const char *cmd, const char *path, int resume, const char *recorded) {
  int fd = -1;
  if (said(cmd, resume ? esmt_owned_file_reopen(path, recorded, &fd)
                       : esmt_owned_file_create(path, &fd)))
    return -1;
  return fd;
}

int cli_npy_open(cli_npy *f, const char *cmd, const char *path, esmt_npy_dtype dtype,
                 int64_t cols, int64_t resume_rows, const char *recorded) {
  memset(f, 0, sizeof *f);
  snprintf(f->path, sizeof f->path, "%s", path);
  if ((f->fd = cli_owned_open(cmd, path, resume_rows >= 0, recorded)) < 0) return -1;
  esmt_owned_file_id(f->fd, f->id, sizeof f->id);
  return said(cmd, esmt_npy_stream_start(f->fd, path, dtype, cols, resume_rows, &f->s));
}

int cli_npy_cut(cli_npy *f, const char *cmd) { return said(cmd, esmt_npy_stream_cut(f->s)); }

int cli_npy_append(cli_npy *f, const char *cmd, const void *data, uint64_t rows) {
  return said(cmd, esmt_npy_stream_append(f->s, data, rows));
}

int cli_npy_commit(cli_npy *f, const char *cmd) {
  return said(cmd, esmt_npy_stream_commit(f->s));
}

void cli_npy_close(cli_npy *f) {
  esmt_npy_stream_end(f->s);
  f->s = NULL;
  if (f->fd > 0) close(f->fd);
  f->fd = -1;
}
