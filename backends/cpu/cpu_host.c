/* SPDX-License-Identifier: MIT */
/* cpu.so: the host services the core handed to esmt_backend_init, and the
 * one way every file of the backend reports an error through them. Kept
 * apart from the entry points so that the kernels and the OpenBLAS loader
 * depend on this file only, not on cpu_backend.c. */
#include "cpu_ops.h"

#include <stdarg.h>
#include <stdio.h>

const esmtb_host *cpu_host;

esmtb_status cpu_fail(esmtb_status status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (cpu_host && cpu_host->set_error) cpu_host->set_error("%s", msg);
  return status;
}
