/* SPDX-License-Identifier: MIT */
/* Status strings and the per-thread last-error message. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define ESMT_ERRMSG_MAX 1024

static _Thread_local char g_last_error[ESMT_ERRMSG_MAX];

const char *esmt_status_string(int status) {
  switch (status) {
    case ESMT_OK: return "ok";
    case ESMT_ERR_INVALID_ARGUMENT: return "invalid argument";
    case ESMT_ERR_OUT_OF_MEMORY: return "out of memory";
    case ESMT_ERR_IO: return "I/O error";
    case ESMT_ERR_FORMAT: return "malformed input";
    case ESMT_ERR_NO_BACKEND: return "no usable backend";
    case ESMT_ERR_BACKEND: return "backend failure";
    case ESMT_ERR_ABI: return "ABI mismatch";
    case ESMT_ERR_UNSUPPORTED: return "unsupported";
    case ESMT_ERR_CANCELLED: return "cancelled";
    case ESMT_ERR_NUMERIC: return "non-finite value";
    case ESMT_ERR_CONFIG: return "invalid configuration";
    case ESMT_ERR_STATE: return "invalid state";
    case ESMT_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}

const char *esmt_last_error(void) { return g_last_error; }

void esmt_clear_error(void) { g_last_error[0] = '\0'; }

/* Every message is stored with its control characters escaped: the text
 * may quote a file (an id, a config value) and is printed as it is. */
static void set_message(const char *raw) { esmt_escape_text(raw, g_last_error, sizeof g_last_error); }

esmt_status esmt_fail(esmt_status status, const char *fmt, ...) {
  char raw[ESMT_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  set_message(raw);
  return status;
}

esmt_status esmt_fail_prefix(esmt_status status, const char *fmt, ...) {
  char raw[ESMT_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof raw)
    snprintf(raw + n, sizeof raw - (size_t)n, "%s", g_last_error);
  set_message(raw);
  return status;
}

esmt_status esmt_fail_append(esmt_status status, const char *fmt, ...) {
  char raw[ESMT_ERRMSG_MAX];
  size_t n = strlen(g_last_error);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  if (n + 1 < sizeof g_last_error)
    esmt_escape_text(raw, g_last_error + n, sizeof g_last_error - n);
  return status;
}

esmt_status esmt_check_struct(const char *fn, const char *type, uint32_t got, size_t min_size) {
  if (got < min_size)
    return esmt_fail(ESMT_ERR_ABI,
                     "%s: %s.struct_size is %u, smaller than the %zu bytes this library needs "
                     "(initialise it with the _INIT macro or init function)",
                     fn, type, got, min_size);
  return ESMT_OK;
}

static size_t lev(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return (size_t)-1;
  size_t row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t cost = (a[i - 1] == b[j - 1]) ? 0 : 1;
      size_t best = diag + cost;
      if (row[j] + 1 < best) best = row[j] + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

const char *esmt_closest(const char *word, const char *const *names, int n) {
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  for (int i = 0; i < n; i++) {
    size_t d = lev(word, names[i]);
    if (d < best_d) { best_d = d; best = names[i]; }
  }
  return best;
}

const char *esmt_suggest(const char *word, const char *const *names, int n) {
  if (!word || !names || n <= 0) return NULL;
  const char *best = esmt_closest(word, names, n);
  const size_t len = strlen(word), limit = len <= 3 ? 1 : len <= 6 ? 2 : len / 3;
  return best && lev(word, best) <= limit ? best : NULL;
}
