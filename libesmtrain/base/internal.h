/* SPDX-License-Identifier: MIT */
/* Internal helpers shared by the core's translation units (never installed). */
#ifndef ESMTRAIN_INTERNAL_H
#define ESMTRAIN_INTERNAL_H

#include "esmtrain/base.h"

#include <stdarg.h>

#define ESMT_HIDDEN __attribute__((visibility("hidden")))

/* Record `status` and a printf-style message as the calling thread's last
 * error; returns `status` so callers can `return esmt_fail(...)`. */
ESMT_HIDDEN esmt_status esmt_fail(esmt_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Like esmt_fail but keeps the current message and prefixes it with `fmt`
 * ("loading checkpoint: " + inner message). */
ESMT_HIDDEN esmt_status esmt_fail_prefix(esmt_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Like esmt_fail but keeps the current message and appends `fmt` to it
 * (advice after the failure it explains). */
ESMT_HIDDEN esmt_status esmt_fail_append(esmt_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Deliver one log line to the process-wide sink. */
ESMT_HIDDEN void esmt_log(esmt_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
ESMT_HIDDEN void esmt_vlog(esmt_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* A per-context log sink (NULL fn = use the process-wide one). */
typedef struct esmt_logger {
  esmt_log_fn fn;
  void *user;
  esmt_log_level min_level;
} esmt_logger;
ESMT_HIDDEN void esmt_logger_log(const esmt_logger *lg, esmt_log_level level,
                                 const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Check an options struct's struct_size: at least `min_size` (the size of
 * the oldest version this library accepts). */
ESMT_HIDDEN esmt_status esmt_check_struct(const char *fn, const char *type, uint32_t got,
                                          size_t min_size);

/* Monotonic clock in seconds. */
ESMT_HIDDEN double esmt_now_s(void);

/* Levenshtein-closest candidate to `word` among `n` names (for messages). */
ESMT_HIDDEN const char *esmt_closest(const char *word, const char *const *names, int n);

#define ESMT_CHECK_ARG(cond, fn, what)                                            \
  do {                                                                            \
    if (!(cond)) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %s", fn, what); \
  } while (0)

#endif
