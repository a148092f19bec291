/* SPDX-License-Identifier: MIT */
/* test_load_backend: one backend loaded by the op tests themselves, its
 * groups resolved as the core resolves them (ops_table.h). */
#define _GNU_SOURCE
#include "test_util.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_table.h"

static char g_backend_error[1024];

static void host_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void host_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_backend_error, sizeof g_backend_error, fmt, ap);
  va_end(ap);
}

static void host_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void host_log(int level, const char *fmt, ...) {
  (void)level;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static const esmtb_host g_host = {sizeof(esmtb_host), ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR,
                                  host_set_error, host_log};

const char *test_backend_error(void) { return g_backend_error; }

const esmtb_ops *test_load_backend(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.so", test_backend_dir(), name);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) fail_msg("cannot load %s: %s", path, dlerror());
  esmtb_init_fn init = (esmtb_init_fn)(uintptr_t)dlsym(h, ESMTB_INIT_SYMBOL);
  char why[512];
  const esmtb_ops *ops = esmt_ops_from_init(init, &g_host, why, sizeof why);
  if (!ops) fail_msg("%s: %s%s%s", path, why, g_backend_error[0] ? ": " : "", g_backend_error);
  return ops;
}

