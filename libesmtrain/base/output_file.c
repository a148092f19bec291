/* SPDX-License-Identifier: MIT */
/* New output files published whole (esmtrain.h, "New output files"). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"
#include "fs_util.h"
#include "input_file.h"
#include "internal.h"

struct esmt_output_file {
  char *path, *tmp, *dir;
  int fd;
  int replacing;     /* the destination exists and was accepted at begin */
  dev_t dev;         /* ... and is this file */
  ino_t ino;
};

static void release(esmt_output_file *f) {
  if (f->fd >= 0) close(f->fd);
  free(f->path);
  free(f->tmp);
  free(f->dir);
  free(f);
}

/* The existing destination under the caller's rule: ESMT_OK (f->replacing
 * set when it exists), or ESMT_ERR_STATE naming it and why not. */
static esmt_status check_existing(esmt_output_file *f, esmt_output_replace_fn may_replace,
                                  void *user) {
  struct stat ls, sb;
  if (lstat(f->path, &ls) != 0) {
    if (errno == ENOENT) return ESMT_OK;
    return esmt_fail(ESMT_ERR_IO, "%s: %s", f->path, strerror(errno));
  }
  if (S_ISLNK(ls.st_mode))
    return esmt_fail(ESMT_ERR_STATE, "%s is a symbolic link; it is neither followed nor "
                     "replaced", f->path);
  if (!S_ISREG(ls.st_mode))
    return esmt_fail(ESMT_ERR_STATE, "%s exists and is %s; not replaced", f->path,
                     esmt_file_kind(ls.st_mode));
  if (!may_replace) return esmt_fail(ESMT_ERR_STATE, "%s exists; not replaced", f->path);
  const int fd = open(f->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return esmt_fail(ESMT_ERR_STATE, "%s: %s; not replaced", f->path, strerror(errno));
  char why[512] = "is not a file this program may replace";
  const int same = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_dev == ls.st_dev &&
                   sb.st_ino == ls.st_ino;
  const int ok = same && may_replace(fd, user, why, sizeof why);
  close(fd);
  if (!same) return esmt_fail(ESMT_ERR_STATE, "%s changed while it was checked; not replaced",
                              f->path);
  if (!ok) return esmt_fail(ESMT_ERR_STATE, "%s exists and %s; not replaced", f->path, why);
  f->replacing = 1;
  f->dev = sb.st_dev;
  f->ino = sb.st_ino;
  return ESMT_OK;
}

/* A new temporary ".NAME.tmp-XXXXXX" beside the destination; O_EXCL with
 * O_NOFOLLOW: a name planted there, link or file, is never opened. */
static esmt_status create_temp(esmt_output_file *f) {
  const char *slash = strrchr(f->path, '/');
  const char *base = slash ? slash + 1 : f->path;
  const size_t cap = strlen(f->dir) + strlen(base) + 32;
  if (!(f->tmp = malloc(cap))) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  unsigned long seed = (unsigned long)ts.tv_nsec ^ ((unsigned long)getpid() << 16);
  for (int tries = 0; tries < 100; tries++) {
    seed = seed * 6364136223846793005UL + 1442695040888963407UL;
    snprintf(f->tmp, cap, "%s/.%s.tmp-%06lx", f->dir, base, (seed >> 40) & 0xffffff);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (f->fd >= 0) return ESMT_OK;
    if (errno != EEXIST) break;
  }
  return esmt_fail(ESMT_ERR_IO, "cannot create %s (a temporary file in %s): %s", f->path,
                   f->dir, strerror(errno));
}

esmt_status esmt_output_file_begin(const char *path, esmt_output_replace_fn may_replace,
                                   void *user, esmt_output_file **out) {
  if (!out || !path || !*path)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_output_file_begin: no path");
  *out = NULL;
  esmt_output_file *f = calloc(1, sizeof *f);
  if (f) f->fd = -1;
  const size_t n = strlen(path) + 1;
  if (!f || !(f->path = malloc(n)) || !(f->dir = malloc(n + 1))) {
    if (f) release(f);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
  }
  memcpy(f->path, path, n);
  esmt_dirname(path, f->dir, n + 1);
  esmt_status st = check_existing(f, may_replace, user);
  if (!st) st = create_temp(f);
  if (st) {
    release(f);
    return st;
  }
  *out = f;
  return ESMT_OK;
}

int esmt_output_file_fd(const esmt_output_file *f) { return f ? f->fd : -1; }

const char *esmt_output_file_temp_path(const esmt_output_file *f) { return f ? f->tmp : NULL; }

void esmt_output_file_abort(esmt_output_file *f) {
  if (!f) return;
  if (f->tmp && f->fd >= 0) unlink(f->tmp);
  release(f);
}

/* The accepted destination is still that file (not swapped meanwhile). */
static int still_accepted(const esmt_output_file *f) {
  struct stat ls;
  return lstat(f->path, &ls) == 0 && S_ISREG(ls.st_mode) && ls.st_dev == f->dev &&
         ls.st_ino == f->ino;
}

/* Publish the synced temporary. */
static esmt_status publish(esmt_output_file *f) {
  struct stat ls;
  if (f->replacing) {
    if (!still_accepted(f))
      return esmt_fail(ESMT_ERR_STATE, "%s changed while it was being written; not replaced",
                       f->path);
    if (rename(f->tmp, f->path) == 0) return ESMT_OK;
  } else if (link(f->tmp, f->path) == 0) {
    unlink(f->tmp);
    return ESMT_OK;
  } else if (errno == EEXIST || lstat(f->path, &ls) == 0) {
    /* (the lstat: a file system without hard links gets a check, then rename) */
    return esmt_fail(ESMT_ERR_STATE, "%s appeared while it was being written; not replaced",
                     f->path);
  } else if (rename(f->tmp, f->path) == 0) {
    return ESMT_OK;
  }
  return esmt_fail(ESMT_ERR_IO, "cannot create %s: %s", f->path, strerror(errno));
}

esmt_status esmt_output_file_commit(esmt_output_file *f) {
  if (!f) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_output_file_commit: NULL");
  esmt_status st = ESMT_OK;
  if (fsync(f->fd) != 0)
    st = esmt_fail(ESMT_ERR_IO, "writing %s: %s%s", f->path, strerror(errno),
                   esmt_write_errno_hint(errno));
  if (close(f->fd) != 0 && !st)
    st = esmt_fail(ESMT_ERR_IO, "writing %s: %s", f->path, strerror(errno));
  f->fd = -1;
  if (!st) st = publish(f);
  if (st) unlink(f->tmp);
  else esmt_fsync_dir_published(f->dir);
  release(f);
  return st;
}
