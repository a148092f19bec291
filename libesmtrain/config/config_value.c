/* SPDX-License-Identifier: MIT */
/* One configuration value: parse text for a key's type, check its bounds
 * or choices, and produce the canonical text the handle stores (so that
 * printing and loading back gives the same values). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"
#include "size_text.h"

static int parse_bool(const char *s, int *out) {
  static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) { *out = 1; return 1; }
    if (strcasecmp(s, no[i]) == 0) { *out = 0; return 1; }
  }
  return 0;
}

/* Integers as written, or in exponent form when exact ("2e6" tokens). */
static int parse_int(const char *s, long long *out) {
  char *end = NULL;
  errno = 0;
  if (strpbrk(s, "xX")) return 0; /* strtod would read hex */
  long long x = strtoll(s, &end, 10);
  if (end != s && !*end && errno == 0) { *out = x; return 1; }
  double d = strtod(s, &end);
  if (end == s || *end || !isfinite(d) || d != floor(d) || fabs(d) > 9007199254740992.0) return 0;
  *out = (long long)d;
  return 1;
}

static int in_choices(const char *choices, const char *v) {
  size_t n = strlen(v);
  for (const char *p = choices; p && *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, v, n) == 0) return 1;
    p = bar ? bar + 1 : NULL;
  }
  return 0;
}

/* The shortest decimal that reads back as the same double ("0.15", not
 * "0.14999999999999999"). */
static void format_double(double x, char *buf, size_t cap) {
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(buf, cap, "%.*g", prec, x);
    if (strtod(buf, NULL) == x) return;
  }
}

/* "in [a, b]" or ">= a" when the key has no upper bound. */
static void bounds_text(const esmt_key_def *k, int integer, char *buf, size_t cap) {
  char lo[32], hi[32];
  if (integer) {
    snprintf(lo, sizeof lo, "%.0f", k->min);
    snprintf(hi, sizeof hi, "%.0f", k->max);
  } else {
    format_double(k->min, lo, sizeof lo);
    format_double(k->max, hi, sizeof hi);
  }
  if (k->max >= ESMT_CONFIG_UNBOUNDED) snprintf(buf, cap, ">= %s", lo);
  else snprintf(buf, cap, "in [%s, %s]", lo, hi);
}

esmt_status esmt_config_normalise(const esmt_key_def *k, const char *v, const char *where,
                                  char **out) {
  char buf[64], range[80];
  const char *norm = v;
  switch (k->type) {
    case ESMT_CONFIG_INT: {
      long long x = 0;
      if (!parse_int(v, &x) || (double)x < k->min || (double)x > k->max) {
        bounds_text(k, 1, range, sizeof range);
        return esmt_fail(ESMT_ERR_CONFIG, "%s%s = '%s': expected an integer %s", where, k->name,
                         v, range);
      }
      snprintf(buf, sizeof buf, "%lld", x);
      norm = buf;
      break;
    }
    case ESMT_CONFIG_DOUBLE: {
      char *end = NULL;
      errno = 0;
      double x = strtod(v, &end);
      /* "1e-400" reads as 0 (or a subnormal) with ERANGE: not what was written */
      const int underflow = end != v && !*end && errno == ERANGE && fabs(x) < 1.0;
      if (end == v || *end || strpbrk(v, "xX") || underflow || !isfinite(x) || x < k->min ||
          x > k->max) {
        bounds_text(k, 0, range, sizeof range);
        return esmt_fail(ESMT_ERR_CONFIG, "%s%s = '%s': expected a number %s%s", where, k->name,
                         v, range, underflow ? " (it underflows to 0 in double precision)" : "");
      }
      format_double(x, buf, sizeof buf);
      norm = buf;
      break;
    }
    case ESMT_CONFIG_BOOL: {
      int b;
      if (!parse_bool(v, &b))
        return esmt_fail(ESMT_ERR_CONFIG, "%s%s = '%s': expected true or false", where, k->name, v);
      norm = b ? "true" : "false";
      break;
    }
    case ESMT_CONFIG_ENUM:
      if (!in_choices(k->choices, v))
        return esmt_fail(ESMT_ERR_CONFIG, "%s%s = '%s': expected one of %s", where, k->name, v,
                         k->choices);
      break;
    case ESMT_CONFIG_BYTES: {
      uint64_t b;
      if (!esmt_parse_bytes(v, &b) || (double)b < k->min || (double)b > k->max)
        return esmt_fail(ESMT_ERR_CONFIG, "%s%s = '%s': expected a size such as 8GiB, 512MiB or "
                         "1000000 (K/M/G/T binary, KB/MB/GB/TB decimal)", where, k->name, v);
      snprintf(buf, sizeof buf, "%llu", (unsigned long long)b);
      norm = buf;
      break;
    }
    case ESMT_CONFIG_STRING:
      for (const char *p = v; *p; p++)
        if (iscntrl((unsigned char)*p))
          return esmt_fail(ESMT_ERR_CONFIG, "%s%s: control characters are not allowed", where,
                           k->name);
      break;
  }
  *out = strdup(norm);
  return *out ? ESMT_OK : esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "config: out of memory");
}
