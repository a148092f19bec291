/* SPDX-License-Identifier: MIT */
/* esmt_contact_dir (infer.h): a new directory of one ID.npy contact map per
 * protein and index.tsv, built under OUT.PID.tmp beside OUT and renamed to
 * OUT at the end without replacing anything, so that an error or a kill
 * never leaves a half directory under OUT's name. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"
#include "fs_util.h"

#define NAME_CAP 200 /* bytes of a file name made of an id, before ".npy" */

struct esmt_contact_dir {
  char out[4096], tmp[4200];
  char *index; /* index.tsv's lines so far */
  size_t index_len, index_cap;
  int made, finished;
};

static esmt_status index_append(esmt_contact_dir *d, const char *s, size_t n) {
  if (d->index_len + n + 1 > d->index_cap) {
    const size_t cap = (d->index_len + n + 1) * 2;
    char *p = realloc(d->index, cap);
    if (!p) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory for index.tsv", d->out);
    d->index = p;
    d->index_cap = cap;
  }
  memcpy(d->index + d->index_len, s, n);
  d->index_len += n;
  d->index[d->index_len] = 0;
  return ESMT_OK;
}

esmt_status esmt_contact_dir_begin(const char *out, esmt_removed_fn removed, void *user,
                                   esmt_contact_dir **dir) {
  static const char fn[] = "esmt_contact_dir_begin";
  ESMT_CHECK_ARG(dir, fn, "dir is NULL");
  *dir = NULL;
  ESMT_CHECK_ARG(out && out[0] && strlen(out) < 4000, fn, "out: a directory path (under 4000 "
                 "bytes)");
  esmt_contact_dir *d = calloc(1, sizeof *d);
  if (!d) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  snprintf(d->out, sizeof d->out, "%s", out);
  for (size_t n = strlen(d->out); n > 1 && d->out[n - 1] == '/'; n--) d->out[n - 1] = 0;
  static const char *const kinds[] = {"tmp"};
  esmt_remove_dead_temporaries(d->out, kinds, 1, removed, user);
  struct stat sb;
  esmt_status st = ESMT_OK;
  if (lstat(d->out, &sb) == 0)
    st = esmt_fail(ESMT_ERR_STATE, "%s exists: contacts creates a new directory", d->out);
  snprintf(d->tmp, sizeof d->tmp, "%s.%ld.tmp", d->out, (long)getpid());
  if (!st && mkdir(d->tmp, 0755) != 0)
    st = esmt_fail(ESMT_ERR_IO, "cannot create %s: %s", d->tmp, strerror(errno));
  d->made = !st;
  if (!st) st = index_append(d, "id\tlength\tfile\n", 15);
  if (st) {
    esmt_contact_dir_close(d);
    return st;
  }
  *dir = d;
  return ESMT_OK;
}

/* `id` made a file name: safe bytes only, no leading '.', bounded. */
static void safe_name(const char *id, char *out) {
  size_t n = 0;
  for (; id[n] && n < NAME_CAP; n++) {
    const unsigned char c = (unsigned char)id[n];
    const int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                   c == '.' || c == '_' || c == '-';
    out[n] = ok ? (char)c : '_';
  }
  out[n] = 0;
  if (!n) snprintf(out, NAME_CAP + 1, "protein");
  if (out[0] == '.') out[0] = '_';
}

/* The new file's path into path[4500] (for messages). */
static esmt_status add_file(esmt_contact_dir *d, const char *id, int n, const char *ext, int *fd,
                            char *path) {
  static const char fn[] = "esmt_contact_dir_add_file";
  ESMT_CHECK_ARG(fd, fn, "fd is NULL");
  *fd = -1;
  ESMT_CHECK_ARG(d && d->made && !d->finished, fn, "dir: begun and not finished");
  ESMT_CHECK_ARG(id && n > 0, fn, "id and n > 0");
  ESMT_CHECK_ARG(ext && (!strcmp(ext, ".npy") || !strcmp(ext, ".png")), fn,
                 "ext: \".npy\" or \".png\"");
  char name[NAME_CAP + 1], file[NAME_CAP + 32];
  safe_name(id, name);
  /* the first free name: the directory is this writer's alone */
  struct stat sb;
  for (int k = 1;; k++) {
    if (k == 1)
      snprintf(file, sizeof file, "%s%s", name, ext);
    else
      snprintf(file, sizeof file, "%s~%d%s", name, k, ext);
    snprintf(path, 4500, "%s/%s", d->tmp, file);
    if (lstat(path, &sb) != 0) break;
  }
  esmt_status st = esmt_owned_file_create(path, fd);
  if (st) return st;
  for (const char *c = id; *c && !st; c++) {
    const char ch = (*c == '\t' || *c == '\n' || *c == '\r') ? ' ' : *c;
    st = index_append(d, &ch, 1);
  }
  char line[64];
  const int len = snprintf(line, sizeof line, "\t%d\t", n);
  if (!st) st = index_append(d, line, (size_t)len);
  if (!st) st = index_append(d, file, strlen(file));
  if (!st) st = index_append(d, "\n", 1);
  if (st) {
    close(*fd);
    *fd = -1;
  }
  return st;
}

esmt_status esmt_contact_dir_add_file(esmt_contact_dir *d, const char *id, int n,
                                      const char *ext, int *fd) {
  char path[4500];
  return add_file(d, id, n, ext, fd, path);
}

esmt_status esmt_contact_dir_add(esmt_contact_dir *d, const char *id, const float *map, int n) {
  ESMT_CHECK_ARG(map, "esmt_contact_dir_add", "map is NULL");
  int fd = -1;
  char path[4500];
  esmt_status st = add_file(d, id, n, ".npy", &fd, path);
  if (st) return st;
  esmt_npy_stream *s = NULL;
  st = esmt_npy_stream_start(fd, path, ESMT_NPY_F32, n, -1, &s);
  if (!st) st = esmt_npy_stream_append(s, map, (uint64_t)n);
  if (!st) st = esmt_npy_stream_commit(s);
  esmt_npy_stream_end(s);
  close(fd);
  return st;
}

esmt_status esmt_contact_dir_finish(esmt_contact_dir *d) {
  static const char fn[] = "esmt_contact_dir_finish";
  ESMT_CHECK_ARG(d && d->made && !d->finished, fn, "dir: begun and not finished");
  char path[4300];
  snprintf(path, sizeof path, "%s/index.tsv", d->tmp);
  int fd = -1;
  esmt_status st = esmt_owned_file_create(path, &fd);
  if (st) return st;
  st = esmt_write_all(fd, d->index, d->index_len, path);
  if (!st && fsync(fd) != 0)
    st = esmt_fail(ESMT_ERR_IO, "%s: fsync: %s", path, strerror(errno));
  close(fd);
  if (!st) st = esmt_fsync_dir(d->tmp);
  if (st) return st;
  /* never onto an existing OUT, an empty directory included (rename(2) would) */
  if (renameat2(AT_FDCWD, d->tmp, AT_FDCWD, d->out, RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST)
      return esmt_fail(ESMT_ERR_STATE, "%s appeared meanwhile: nothing written", d->out);
    return esmt_fail(ESMT_ERR_IO, "cannot rename %s to %s: %s", d->tmp, d->out,
                     strerror(errno));
  }
  d->finished = 1;
  char parent[4096];
  esmt_dirname(d->out, parent, sizeof parent);
  esmt_fsync_dir_published(parent);
  return ESMT_OK;
}

void esmt_contact_dir_close(esmt_contact_dir *d) {
  if (!d) return;
  if (d->made && !d->finished) esmt_cleanup_tree(d->tmp); /* this writer's own directory */
  free(d->index);
  free(d);
}
