/* The services table the core hands to every backend it loads. */
#include "internal.h"

#include <stdio.h>

static void host_set_error(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  esmt_fail(ESMT_ERR_BACKEND, "%s", msg);
}

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
