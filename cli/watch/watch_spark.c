/* SPDX-License-Identifier: MIT */
/* Sparklines, bars and number formats of `watch` (watch_spark.h). */
#include "watch_spark.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Eight heights of block (3 bytes each in UTF-8), nine of ASCII. */
static const char *const k_blocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
static const char k_ascii_levels[] = ".:-=+*#%@";

/* Append `s` when it fits whole (the text stays NUL-terminated). */
static void put(char *buf, size_t cap, size_t *len, const char *s) {
  const size_t n = strlen(s);
  if (*len + n + 1 > cap) return;
  memcpy(buf + *len, s, n + 1);
  *len += n;
}

static double value_at(const double *first, size_t stride, size_t i) {
  return *(const double *)((const char *)first + i * stride);
}

/* The mean of the finite values in [lo, hi), NAN when none. */
static double bucket_mean(const double *first, size_t stride, size_t lo, size_t hi) {
  double sum = 0;
  size_t k = 0;
  for (size_t i = lo; i < hi; i++) {
    const double v = value_at(first, stride, i);
    if (isfinite(v)) { sum += v; k++; }
  }
  return k ? sum / (double)k : NAN;
}

const char *ws_spark(const double *first, size_t n, size_t stride, int cols, int utf8, char *buf,
                     size_t cap) {
  size_t len = 0;
  if (cap) buf[0] = '\0';
  if (!n || cols <= 0 || !cap) return buf;
  const size_t ncol = n < (size_t)cols ? n : (size_t)cols;
  double col[512];
  const size_t m = ncol < sizeof col / sizeof col[0] ? ncol : sizeof col / sizeof col[0];
  double lo = INFINITY, hi = -INFINITY;
  for (size_t c = 0; c < m; c++) {
    /* the whole history: column c holds values [c*n/m, (c+1)*n/m) */
    col[c] = bucket_mean(first, stride, c * n / m, (c + 1) * n / m);
    if (isfinite(col[c])) {
      lo = col[c] < lo ? col[c] : lo;
      hi = col[c] > hi ? col[c] : hi;
    }
  }
  const int levels = utf8 ? 8 : (int)(sizeof k_ascii_levels - 1);
  for (size_t c = 0; c < m; c++) {
    if (!isfinite(col[c])) { put(buf, cap, &len, " "); continue; }
    /* a flat line sits in the middle: neither "all low" nor "all high" */
    const double t = hi > lo ? (col[c] - lo) / (hi - lo) : 0.5;
    int k = (int)lround(t * (levels - 1));
    k = k < 0 ? 0 : k >= levels ? levels - 1 : k;
    char a[2] = {k_ascii_levels[k], '\0'};
    put(buf, cap, &len, utf8 ? k_blocks[k] : a);
  }
  return buf;
}

const char *ws_bar(double frac, int cols, int utf8, char *buf, size_t cap) {
  static const char *const eighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  size_t len = 0;
  if (cap) buf[0] = '\0';
  if (!isfinite(frac)) frac = 0;
  frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
  put(buf, cap, &len, "[");
  const int units = (int)floor(frac * cols * 8 + 1e-9); /* eighths of a cell filled */
  int c = 0;
  for (; c < units / 8; c++) put(buf, cap, &len, utf8 ? "█" : "#");
  if (c < cols && units % 8 && utf8) {
    put(buf, cap, &len, eighths[units % 8]);
    c++;
  }
  for (; c < cols; c++) put(buf, cap, &len, utf8 ? "░" : ".");
  put(buf, cap, &len, "]");
  return buf;
}

const char *ws_duration(double s, char *buf, size_t cap) {
  if (!isfinite(s) || s < 0) {
    snprintf(buf, cap, "-");
    return buf;
  }
  const long long t = llround(s);
  if (t < 60) snprintf(buf, cap, "%llds", t);
  else if (t < 3600) snprintf(buf, cap, "%lldm%02llds", t / 60, t % 60);
  else if (t < 86400) snprintf(buf, cap, "%lldh%02lldm", t / 3600, t % 3600 / 60);
  else snprintf(buf, cap, "%lldd%02lldh", t / 86400, t % 86400 / 3600);
  return buf;
}

const char *ws_si(double v, char *buf, size_t cap) {
  const double a = fabs(v);
  if (!isfinite(v)) snprintf(buf, cap, "-");
  else if (a < 10000) snprintf(buf, cap, "%.0f", v);
  else if (a < 1e6) snprintf(buf, cap, "%.1fk", v / 1e3);
  else if (a < 1e9) snprintf(buf, cap, "%.2fM", v / 1e6);
  else snprintf(buf, cap, "%.2fG", v / 1e9);
  return buf;
}

const char *ws_num(const char *fmt, double v, char *buf, size_t cap) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  if (isfinite(v)) snprintf(buf, cap, fmt, v);
  else snprintf(buf, cap, "-");
#pragma GCC diagnostic pop
  return buf;
}

/* A byte that starts a code point (not a UTF-8 continuation byte). */
static int starts_char(unsigned char c) { return (c & 0xC0) != 0x80; }

size_t ws_columns(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += (size_t)starts_char((unsigned char)*s);
  return n;
}

size_t ws_prefix_bytes(const char *s, size_t cols) {
  size_t i = 0, n = 0;
  for (; s[i]; i++) {
    if (starts_char((unsigned char)s[i])) {
      if (n == cols) break;
      n++;
    }
  }
  return i;
}
