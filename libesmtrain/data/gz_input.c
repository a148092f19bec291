/* SPDX-License-Identifier: MIT */
/* Plain or gzip input from a file or standard input (gz_input.h). */
#define _GNU_SOURCE /* F_DUPFD_CLOEXEC */
#include "gz_input.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "input_file.h"

esmt_status esmt_gz_input_open(const char *path, const char *what, const char *tty_hint,
                               gzFile *out) {
  *out = NULL;
  int fd = -1;
  if (!strcmp(path, "-")) {
    if (isatty(STDIN_FILENO))
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "standard input ('-') is a terminal: %s",
                       tty_hint);
    if ((fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)) < 0)
      return esmt_fail(ESMT_ERR_IO, "standard input: cannot open: %s", strerror(errno));
  } else {
    esmt_status st = esmt_open_input(path, what, &fd, NULL);
    if (st) return st;
  }
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    close(fd);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory (zlib)", path);
  }
  gzbuffer(gz, 1 << 17);
  *out = gz;
  return ESMT_OK;
}

uint64_t esmt_gz_input_offset(gzFile gz, int is_stdin) {
  /* gzoffset is lseek on the descriptor: -1 on a pipe */
  z_off_t off = is_stdin ? gztell(gz) : gzoffset(gz);
  return off > 0 ? (uint64_t)off : 0;
}
