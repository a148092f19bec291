/* SPDX-License-Identifier: MIT */
/* The services table the core hands to every backend it loads. */
#include "esmtrain/backend.h"
#include "internal.h"
#include "registry.h"

#include <stdio.h>

/* Backends return esmt_status values by their backend.h names. */
#define SAME(x) ((int)ESMTB_##x == (int)ESMT_##x)
_Static_assert(SAME(OK) && SAME(ERR_INVALID_ARGUMENT) && SAME(ERR_OUT_OF_MEMORY) && SAME(ERR_IO) &&
                   SAME(ERR_FORMAT) && SAME(ERR_NO_BACKEND) && SAME(ERR_BACKEND) && SAME(ERR_ABI) &&
                   SAME(ERR_UNSUPPORTED) && SAME(ERR_CANCELLED) && SAME(ERR_NUMERIC) &&
                   SAME(ERR_CONFIG) && SAME(ERR_STATE) && SAME(ERR_INTERNAL),
               "backend.h status names match esmt_status");
#undef SAME

static void host_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void host_set_error(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  esmt_fail(ESMT_ERR_BACKEND, "%s", msg);
}

static void host_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void host_log(int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  esmt_vlog((esmt_log_level)level, fmt, ap);
  va_end(ap);
}

static const esmtb_host g_host = {
    sizeof(esmtb_host), ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR, host_set_error, host_log,
};

const esmtb_host *esmt_backend_host(void) { return &g_host; }
