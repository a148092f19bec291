/* SPDX-License-Identifier: MIT */
/* Logging: a process-wide sink and per-context sinks; nothing is printed
 * unless the application installs a callback. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static esmt_logger g_logger = {NULL, NULL, ESMT_LOG_INFO};

void esmt_set_log_callback(esmt_log_fn fn, void *user, esmt_log_level min_level) {
  pthread_mutex_lock(&g_log_lock);
  g_logger.fn = fn;
  g_logger.user = user;
  g_logger.min_level = min_level;
  pthread_mutex_unlock(&g_log_lock);
}

static void deliver(const esmt_logger *lg, esmt_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void deliver(const esmt_logger *lg, esmt_log_level level, const char *fmt, va_list ap) {
  if (!lg->fn || level < lg->min_level) return;
  char raw[2048], line[2048];
  vsnprintf(raw, sizeof raw, fmt, ap);
  lg->fn(lg->user, level, esmt_escape_text(raw, line, sizeof line)); /* quoted file text */
}

void esmt_vlog(esmt_log_level level, const char *fmt, va_list ap) {
  pthread_mutex_lock(&g_log_lock);
  esmt_logger lg = g_logger;
  pthread_mutex_unlock(&g_log_lock);
  deliver(&lg, level, fmt, ap);
}

void esmt_log(esmt_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  esmt_vlog(level, fmt, ap);
  va_end(ap);
}

void esmt_logger_log(const esmt_logger *lg, esmt_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (lg && lg->fn) deliver(lg, level, fmt, ap);
  else esmt_vlog(level, fmt, ap);
  va_end(ap);
}
