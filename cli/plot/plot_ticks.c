/* SPDX-License-Identifier: MIT */
/* Nice-number axes for `plot` (plot_ticks.h). */
#include "plot_ticks.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double plot_nice_step(double x) {
  if (!(x > 0) || !isfinite(x)) return 1.0;
  const double mag = pow(10.0, floor(log10(x)));
  const double f = x / mag;
  /* a little slack: 2.0000001 is 2, not 5 */
  return (f <= 1.0 + 1e-9 ? 1.0 : f <= 2.0 + 1e-9 ? 2.0 : f <= 5.0 + 1e-9 ? 5.0 : 10.0) * mag;
}

/* A range of zero width (one point, a constant lr) gets some room; so does
 * one too narrow for distinct ticks, down to the smallest normal numbers. */
static void widen(double *lo, double *hi) {
  const double m = fmax(fabs(*lo), fabs(*hi));
  if (*hi - *lo > fmax(m * 1e-9, PLOT_MIN_WIDTH)) return;
  const double pad = fmax(m * 0.1, PLOT_MIN_WIDTH);
  *lo -= pad;
  *hi += pad;
}

double plot_clamp_value(double v) {
  return isfinite(v) ? fmax(-PLOT_MAX_VALUE, fmin(PLOT_MAX_VALUE, v)) : v;
}

static void add_tick(plot_axis *a, double v) {
  if (a->n_ticks < PLOT_MAX_TICKS) a->ticks[a->n_ticks++] = v;
}

/* Ticks k * step from k = first while they stay within `last`: a bounded
 * loop (the range holds a few steps; no k can be a count too large to step). */
static void step_ticks(plot_axis *a, double first, double last, int positive) {
  for (int i = 0; i < PLOT_MAX_TICKS * 2 && a->n_ticks < PLOT_MAX_TICKS; i++) {
    const double v = (first + i) * a->step;
    if (v > last) break;
    if (!positive || v > 0) add_tick(a, v);
  }
}

/* 1-2-5 ticks at multiples of a nice step inside [lo, hi] (not widened). */
static void inner_ticks(plot_axis *a, int target, int how) {
  a->step = plot_nice_step((a->hi - a->lo) / target);
  if ((how & PLOT_AXIS_INTEGER) && a->step < 1) a->step = 1;
  step_ticks(a, ceil(a->lo / a->step - 1e-9), a->hi + fabs(a->hi) * 1e-12, a->log);
}

/* Decades (with 2 and 5 inside when there are few) within [lo, hi]; 0
 * when fewer than 3 would show (then the caller uses inner_ticks). */
static int log_ticks(plot_axis *a, int target) {
  const int d0 = (int)floor(log10(a->lo)), d1 = (int)ceil(log10(a->hi));
  const int decades = d1 - d0;
  const int mids = decades <= 3;
  const int every = decades > target ? (decades + target - 1) / target : 1;
  static const double k_mult[] = {1, 2, 5};
  for (int d = d0; d <= d1; d++) {
    if ((d - d0) % every) continue;
    for (int m = 0; m < (mids ? 3 : 1); m++) {
      const double v = k_mult[m] * pow(10.0, d);
      if (v >= a->lo * (1 - 1e-9) && v <= a->hi * (1 + 1e-9)) add_tick(a, v);
    }
  }
  if (a->n_ticks >= 3) return 1;
  a->n_ticks = 0;
  return 0;
}

void plot_axis_make(plot_axis *a, double lo, double hi, int target, int log, int how) {
  memset(a, 0, sizeof *a);
  if (target < 2) target = 2;
  if (!isfinite(lo) || !isfinite(hi) || lo > hi) lo = 0, hi = 1;
  lo = plot_clamp_value(lo);
  hi = plot_clamp_value(hi);
  if (log && lo > 0) {
    /* a twentieth of the range's logarithm either side, within the normal numbers */
    lo = fmax(lo, 1 / PLOT_MAX_VALUE);
    hi = fmax(hi, lo);
    const double span = log10(hi) - log10(lo);
    const double pad = pow(10.0, span > 0 ? span * 0.05 : 0.05);
    a->log = 1;
    a->lo = fmax(lo / pad, 0.1 / PLOT_MAX_VALUE);
    a->hi = fmin(hi * pad, 10 * PLOT_MAX_VALUE);
    if (!log_ticks(a, target)) inner_ticks(a, target, how);
    return;
  }
  widen(&lo, &hi); /* first: a constant lr gets room above it */
  if ((how & PLOT_AXIS_FROM_ZERO) && lo > 0) lo = 0;
  if (how & PLOT_AXIS_TIGHT) {
    a->lo = lo;
    a->hi = hi;
    inner_ticks(a, target, how);
    return;
  }
  a->step = plot_nice_step((hi - lo) / target);
  if ((how & PLOT_AXIS_INTEGER) && a->step < 1) a->step = 1;
  a->lo = floor(lo / a->step + 1e-9) * a->step;
  a->hi = ceil(hi / a->step - 1e-9) * a->step;
  step_ticks(a, round(a->lo / a->step), a->hi + a->step * 1e-6, 0);
}

double plot_axis_frac(const plot_axis *a, double v) {
  if (!isfinite(v)) return NAN;
  if (a->log) {
    if (v <= 0) return NAN;
    return (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
  }
  return (v - a->lo) / (a->hi - a->lo);
}

static int decimals(double step) {
  if (!(step > 0) || step >= 1) return 0;
  const int d = (int)ceil(-log10(step) - 1e-9);
  return d < 0 ? 0 : d > 9 ? 9 : d;
}

/* "2e-4", "1.5e-3": mantissa and power of ten */
static void sci(double v, int e, int dec, char *buf, size_t cap) {
  snprintf(buf, cap, "%.*fe%d", dec, v / pow(10.0, e), e);
}

static void log_label(double v, char *buf, size_t cap) {
  const int e = (int)floor(log10(v) + 1e-9);
  if (v >= 1e4 || v < 1e-2) sci(v, e, 0, buf, cap);
  else snprintf(buf, cap, "%g", v);
}

void plot_tick_label(const plot_axis *a, double v, char *buf, size_t cap) {
  if (a->step <= 0) { /* decades on a log axis */
    log_label(v, buf, cap);
    return;
  }
  if (fabs(v) < a->step * 1e-6) v = 0; /* no "-0" */
  double amax = 0;
  for (int i = 0; i < a->n_ticks; i++) amax = fmax(amax, fabs(a->ticks[i]));
  if (v == 0) {
    snprintf(buf, cap, "0");
  } else if ((amax > 0 && amax < 1e-2) || amax >= 1e15) { /* past "T": 2e18, not 2000000T */
    const int e = (int)floor(log10(amax) + 1e-9);
    sci(v, e, decimals(a->step / pow(10.0, e)), buf, cap);
  } else {
    static const char *const k_suffix[] = {"", "k", "M", "B", "T"}; /* B: as in "7B tokens" */
    static const double k_from[] = {0, 1e4, 1e6, 1e9, 1e12}; /* 9999 stays whole */
    int u = 0;
    while (u < 4 && amax >= k_from[u + 1]) u++;
    const double unit = pow(1e3, u);
    snprintf(buf, cap, "%.*f%s", decimals(a->step / unit), v / unit, k_suffix[u]);
  }
}
