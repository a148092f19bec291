/* SPDX-License-Identifier: MIT */
/* --format safetensors (embed.h): once every protein is committed, the
 * .npy arrays are copied into OUT/embeddings.safetensors (written as a
 * temporary file, fsync'd, then renamed); once embed.json says so, the
 * .npy files, which this command created, are removed. A header key "__metadata__" points at
 * ids.txt for the protein ids, which safetensors cannot hold as a tensor. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embed.h"

/* "mean.layer6" from ".../mean.layer6.npy" */
static void tensor_name(const cli_npy *f, char *name, size_t cap) {
  const char *base = strrchr(f->path, '/');
  snprintf(name, cap, "%s", base ? base + 1 : f->path);
  char *dot = strrchr(name, '.');
  if (dot) *dot = 0;
}

static char *header_json(cli_npy **a, int n, size_t *len) {
  size_t cap = 256 + (size_t)n * 256;
  char *h = malloc(cap);
  if (!h) return NULL;
  size_t at = (size_t)snprintf(h, cap, "{\"__metadata__\":{\"format\":\"esmtrain-embeddings\","
                               "\"ids\":\"ids.txt\"}");
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    char name[256];
    tensor_name(a[i], name, sizeof name);
    const uint64_t bytes = a[i]->rows * cli_npy_row_bytes(a[i]);
    char shape[64];
    if (a[i]->cols > 0) snprintf(shape, sizeof shape, "%" PRIu64 ",%" PRId64, a[i]->rows, a[i]->cols);
    else snprintf(shape, sizeof shape, "%" PRIu64, a[i]->rows);
    at += (size_t)snprintf(h + at, cap - at, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],"
                           "\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", name,
                           a[i]->esize == 8 ? "I64" : "F32", shape, off, off + bytes);
    off += bytes;
  }
  at += (size_t)snprintf(h + at, cap - at, "}");
  while (at % 8) h[at++] = ' '; /* the data starts 8-aligned */
  *len = at;
  return h;
}

static int copy_body(int to, cli_npy *f, char *buf, size_t cap) {
  uint64_t left = f->rows * cli_npy_row_bytes(f);
  off_t at = CLI_NPY_HEADER;
  while (left) {
    const size_t want = left < cap ? (size_t)left : cap;
    ssize_t r = pread(f->fd, buf, want, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    for (ssize_t done = 0; done < r;) {
      ssize_t k = write(to, buf + done, (size_t)(r - done));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return -1;
      done += k;
    }
    at += r;
    left -= (uint64_t)r;
  }
  return 0;
}

int embed_output_finish(embed_output *w, const embed_stats *s) {
  (void)s;
  if (!w->o->safetensors) return 0;
  cli_npy *a[3 * EMBED_MAX_LAYERS + 2];
  const int n = embed_output_arrays(w, a);
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/embeddings.safetensors", w->o->out);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  /* a copy an interrupted run of this command left is a regular file with
   * one link; a symbolic link or anything else there is refused below */
  if (cli_out_is_own(tmp, NULL)) unlink(tmp);
  struct stat sb;
  if (lstat(path, &sb) == 0 && !cli_out_is_own(path, NULL)) {
    fprintf(stderr, "esmtrain-example: embed: %s is %s that embed did not write: nothing was "
            "changed (the .npy arrays are complete and kept); move it away and run the same "
            "command again\n", path, S_ISLNK(sb.st_mode) ? "a symbolic link" : "a file");
    return -1;
  }
  size_t hl = 0;
  char *h = header_json(a, n, &hl);
  char *buf = malloc(1 << 20);
  int fd = h && buf ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644) : -1;
  const uint64_t hl64 = hl;
  int rc = fd < 0 || write(fd, &hl64, 8) != 8 || write(fd, h, hl) != (ssize_t)hl;
  for (int i = 0; i < n && !rc; i++) rc = copy_body(fd, a[i], buf, 1 << 20);
  if (!rc) rc = fsync(fd) != 0 || rename(tmp, path) != 0;
  const int err = errno;
  if (fd >= 0) close(fd);
  free(h);
  free(buf);
  if (rc) {
    if (fd >= 0) unlink(tmp);
    fprintf(stderr, "esmtrain-example: embed: cannot write %s: %s (the .npy arrays are "
            "complete and kept)\n", path, strerror(err));
    return -1;
  }
  return 0;
}

int embed_output_remove_staging(embed_output *w) {
  if (!w->o->safetensors) return 0;
  cli_npy *a[3 * EMBED_MAX_LAYERS + 2];
  const int n = embed_output_arrays(w, a);
  for (int i = 0; i < n; i++) {
    char gone[4096];
    snprintf(gone, sizeof gone, "%s", a[i]->path);
    cli_npy_close(a[i]);
    unlink(gone);
  }
  return 0;
}
