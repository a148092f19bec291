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

static void id_of(const struct stat *sb, char *out, size_t cap) {
  snprintf(out, cap, "%llu:%llu", (unsigned long long)sb->st_dev, (unsigned long long)sb->st_ino);
}

void cli_out_id(int fd, char *out, size_t cap) {
  struct stat sb;
  if (fstat(fd, &sb) == 0) id_of(&sb, out, cap);
  else if (cap) out[0] = '\0';
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
    id_of(&sb, id, sizeof id);
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
  id_of(&sb, id, sizeof id);
  return !recorded || !strcmp(id, recorded);
}
