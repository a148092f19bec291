/* SPDX-License-Identifier: MIT */
/* Opening input files without blocking; see input_file.h. */
#define _GNU_SOURCE
#include "input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

const char *esmt_file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

static esmt_status not_regular(const char *path, const char *what, mode_t mode) {
  return esmt_fail(ESMT_ERR_FORMAT, "%s: is %s, not a regular file; a %s must be a regular file",
                   path, esmt_file_kind(mode), what);
}

esmt_status esmt_check_regular_input(const char *path, const char *what) {
  struct stat sb;
  if (stat(path, &sb) != 0)
    return esmt_fail(ESMT_ERR_IO, "%s: cannot open %s: %s", path, what, strerror(errno));
  return S_ISREG(sb.st_mode) ? ESMT_OK : not_regular(path, what, sb.st_mode);
}

esmt_status esmt_open_input(const char *path, const char *what, int *fd, struct stat *sb) {
  *fd = -1;
  /* O_NONBLOCK: opening a FIFO with no writer returns at once instead of
   * waiting; it is cleared again for the regular file we keep. */
  int d = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (d < 0) {
    int err = errno;
    struct stat ls;
    if (err == EISDIR || (stat(path, &ls) == 0 && !S_ISREG(ls.st_mode)))
      return not_regular(path, what, err == EISDIR ? S_IFDIR : ls.st_mode);
    return esmt_fail(ESMT_ERR_IO, "%s: cannot open %s: %s", path, what, strerror(err));
  }
  struct stat s;
  if (fstat(d, &s) != 0) {
    int err = errno;
    close(d);
    return esmt_fail(ESMT_ERR_IO, "%s: cannot stat %s: %s", path, what, strerror(err));
  }
  if (!S_ISREG(s.st_mode)) {
    close(d);
    return not_regular(path, what, s.st_mode);
  }
  int fl = fcntl(d, F_GETFL);
  if (fl < 0 || fcntl(d, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int err = errno;
    close(d);
    return esmt_fail(ESMT_ERR_IO, "%s: fcntl: %s", path, strerror(err));
  }
  *fd = d;
  if (sb) *sb = s;
  return ESMT_OK;
}

esmt_status esmt_fopen_input(const char *path, const char *what, FILE **f) {
  *f = NULL;
  int fd;
  esmt_status st = esmt_open_input(path, what, &fd, NULL);
  if (st) return st;
  FILE *s = fdopen(fd, "rb");
  if (!s) {
    int err = errno;
    close(fd);
    return esmt_fail(ESMT_ERR_IO, "%s: cannot open %s: %s", path, what, strerror(err));
  }
  *f = s;
  return ESMT_OK;
}
