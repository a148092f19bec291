/* SPDX-License-Identifier: MIT */
/* How much host memory this process may still allocate: the smallest of
 * the kernel's MemAvailable, the address-space and data-segment limits
 * (ulimit -v / RLIMIT_DATA) less what is in use, and a cgroup v2 memory.max
 * less memory.current. Used to refuse settings whose buffers cannot fit,
 * before they are allocated, with the figures. */
#ifndef ESMTRAIN_HOST_MEMORY_H
#define ESMTRAIN_HOST_MEMORY_H

#include "internal.h"

typedef struct esmt_host_memory {
  uint64_t available;      /* bytes; UINT64_MAX when nothing could be read */
  char limited_by[96];     /* "MemAvailable", "ulimit -v", "cgroup memory.max", ... */
} esmt_host_memory;

ESMT_HIDDEN void esmt_host_memory_probe(esmt_host_memory *out);

/* ESMT_ERR_OUT_OF_MEMORY naming `what` and the figures when `need` bytes
 * exceed what is available; `advice` says which setting to lower. */
ESMT_HIDDEN esmt_status esmt_host_memory_check(uint64_t need, const char *what,
                                               const char *advice);

/* "9.3 GiB", "512.0 MiB", ... into buf. */
ESMT_HIDDEN const char *esmt_format_bytes(uint64_t bytes, char *buf, size_t cap);

#endif
