/* SPDX-License-Identifier: MIT */
/* Shared by the libFuzzer targets: hand fuzz bytes to code that opens
 * files, through an anonymous in-memory file (no disk traffic). */
#ifndef ESMT_FUZZ_COMMON_H
#define ESMT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* Returns a path (/proc/self/fd/N) whose contents are data; close fd after. */
static inline int fuzz_memfile(const uint8_t *data, size_t n, char *path, size_t cap) {
  int fd = memfd_create("esmt-fuzz", 0);
  if (fd < 0) return -1;
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(fd, data + off, n - off);
    if (w <= 0) { close(fd); return -1; }
    off += (size_t)w;
  }
  snprintf(path, cap, "/proc/self/fd/%d", fd);
  return fd;
}

#endif
