/* SPDX-License-Identifier: MIT */
/* Files a program creates and re-opens later (esmt_owned_file_*,
 * esmtrain.h): the resume of `embed` goes through them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

esmt_status esmt_owned_file_create(const char *path, int *fd) {
  if (!path || !fd) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_owned_file_create: NULL");
  *fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (*fd < 0)
    return esmt_fail(ESMT_ERR_IO, "%s: cannot create: %s%s", path, strerror(errno),
                     errno == EEXIST ? " (nothing was changed)" : "");
  return ESMT_OK;
}

/* "DEV:INO:BIRTH" of a file: an inode number is reused as soon as a file is
 * deleted, so a file put in place of the one this program created may get
 * its number; its creation time (statx's btime, where the file system keeps
 * one) tells them apart. "DEV:INO" where there is none. */
static void id_of(int dirfd, const char *path, int flags, char *out, size_t cap) {
  struct statx sx;
  if (statx(dirfd, path, flags, STATX_INO | STATX_BTIME, &sx) != 0) {
    if (cap) out[0] = '\0';
    return;
  }
  const unsigned long long dev = ((unsigned long long)sx.stx_dev_major << 32) | sx.stx_dev_minor;
  if (sx.stx_mask & STATX_BTIME)
    snprintf(out, cap, "%llu:%llu:%lld.%09u", dev, (unsigned long long)sx.stx_ino,
             (long long)sx.stx_btime.tv_sec, (unsigned)sx.stx_btime.tv_nsec);
  else
    snprintf(out, cap, "%llu:%llu", dev, (unsigned long long)sx.stx_ino);
}

void esmt_owned_file_id(int fd, char *out, size_t cap) {
  if (out) id_of(fd, "", AT_EMPTY_PATH, out, cap);
}

esmt_status esmt_owned_file_reopen(const char *path, const char *recorded, int *fd) {
  if (!path || !fd) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_owned_file_reopen: NULL");
  /* O_NONBLOCK: a FIFO put in its place must not block the open */
  *fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (*fd < 0) {
    const int err = errno;
    return esmt_fail(ESMT_ERR_STATE, "%s: cannot reopen: %s; nothing was changed", path,
                     err == ELOOP ? "it is a symbolic link, not the file this command created"
                                  : strerror(err));
  }
  const char *why = NULL;
  struct stat sb;
  char id[ESMT_OWNED_FILE_ID_CAP];
  if (fstat(*fd, &sb) != 0) why = strerror(errno);
  else if (!S_ISREG(sb.st_mode)) why = "it is not a regular file";
  else if (sb.st_nlink != 1) why = "it has other hard links (another file shares its data)";
  else {
    esmt_owned_file_id(*fd, id, sizeof id);
    if (!recorded || strcmp(id, recorded))
      why = "it is not the file this command created there (replaced, or the directory was "
            "copied)";
  }
  if (why) {
    close(*fd);
    *fd = -1;
    return esmt_fail(ESMT_ERR_STATE, "%s: cannot reopen: %s; nothing was changed", path, why);
  }
  /* back to blocking writes */
  const int fl = fcntl(*fd, F_GETFL);
  if (fl >= 0) fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK);
  return ESMT_OK;
}

int esmt_owned_file_is_own(const char *path, const char *recorded) {
  struct stat sb;
  char id[ESMT_OWNED_FILE_ID_CAP];
  if (!path || lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_nlink != 1) return 0;
  id_of(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, id, sizeof id);
  return !recorded || !strcmp(id, recorded);
}
