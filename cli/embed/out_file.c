/* SPDX-License-Identifier: MIT */
/* Output files created and re-opened safely (out_file.h). */
#define _GNU_SOURCE
#include "out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_out_create(const char *cmd, const char *path) {
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    fprintf(stderr, "esmtrain-example: %s: %s: cannot create: %s%s\n", cmd, path,
            strerror(errno), errno == EEXIST ? " (nothing was changed)" : "");
  return fd;
}

/* "DEV:INO:BIRTH" of a file: an inode number is reused as soon as a file is
 * deleted, so a file put in place of the one this command created may get
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

void cli_out_id(int fd, char *out, size_t cap) {
  id_of(fd, "", AT_EMPTY_PATH, out, cap);
}

int cli_out_reopen(const char *cmd, const char *path, const char *recorded) {
  /* O_NONBLOCK: a FIFO put in its place must not block the open */
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  const char *why = NULL;
  struct stat sb;
  char id[CLI_OUT_ID_CAP];
  if (fd < 0) {
    const int err = errno;
    fprintf(stderr, "esmtrain-example: %s: %s: cannot reopen: %s; nothing was changed\n", cmd,
            path, err == ELOOP ? "it is a symbolic link, not the file this command created"
                               : strerror(err));
    return -1;
  }
  if (fstat(fd, &sb) != 0) why = strerror(errno);
  else if (!S_ISREG(sb.st_mode)) why = "it is not a regular file";
  else if (sb.st_nlink != 1) why = "it has other hard links (another file shares its data)";
  else {
    cli_out_id(fd, id, sizeof id);
    if (!recorded || strcmp(id, recorded))
      why = "it is not the file this command created there (replaced, or the directory was "
            "copied)";
  }
  if (why) {
    fprintf(stderr, "esmtrain-example: %s: %s: cannot reopen: %s; nothing was changed\n", cmd,
            path, why);
    close(fd);
    return -1;
  }
  /* back to blocking writes */
  const int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

int cli_out_is_own(const char *path, const char *recorded) {
  struct stat sb;
  char id[CLI_OUT_ID_CAP];
  if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_nlink != 1) return 0;
  id_of(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, id, sizeof id);
  return !recorded || !strcmp(id, recorded);
}
