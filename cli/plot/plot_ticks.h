/* SPDX-License-Identifier: MIT */
/* Axis ranges, tick positions and tick labels for `plot`: plain arithmetic,
 * no cairo, so that it can be checked on its own. */
#ifndef ESMT_CLI_PLOT_TICKS_H
#define ESMT_CLI_PLOT_TICKS_H

#include <stddef.h>

#define PLOT_MAX_TICKS 32

/* The values an axis spans: larger magnitudes are drawn at this one (so
 * that a range and its ticks stay finite), a log axis starts at its
 * reciprocal at the lowest, and no linear range is narrower than
 * PLOT_MIN_WIDTH (far above the subnormal numbers, where steps vanish). */
#define PLOT_MAX_VALUE 1e300
#define PLOT_MIN_WIDTH 1e-290

typedef struct plot_axis {
  double lo, hi;               /* the drawn range (linear values, also on a log axis) */
  int log;                     /* log10 scale: lo > 0 */
  double ticks[PLOT_MAX_TICKS];
  int n_ticks;
  double step;                 /* linear tick spacing; 0 on a log axis with decade ticks */
} plot_axis;

/* The 1-2-5 number nearest above `x` > 0 (1, 2, 5, 10, 20, ...). */
double plot_nice_step(double x);

/* v within [-PLOT_MAX_VALUE, PLOT_MAX_VALUE]; NAN and infinities as they are. */
double plot_clamp_value(double v);

/* Ways of plot_axis_make. */
enum {
  PLOT_AXIS_FROM_ZERO = 1, /* a linear axis starts at 0 when the data are all positive */
  PLOT_AXIS_TIGHT = 2,     /* the axis ends at the data, ticks inside (else at whole ticks) */
  PLOT_AXIS_INTEGER = 4    /* ticks at whole numbers only (steps) */
};

/* An axis over the data range [lo, hi] (finite, lo <= hi; a zero-width
 * range is widened) with about `target` ticks. Linear: the range is
 * widened to whole ticks unless PLOT_AXIS_TIGHT. Log (lo > 0 required,
 * else the axis is linear): decades, with 2 and 5 between them when the
 * range is short, or plain 1-2-5 ticks within less than a decade. */
void plot_axis_make(plot_axis *a, double lo, double hi, int target, int log, int how);

/* Where v falls on the axis, 0 at lo to 1 at hi (NAN: not drawable, e.g.
 * v <= 0 on a log axis). */
double plot_axis_frac(const plot_axis *a, double v);

/* A short label for tick v: "0", "2.5", "150k", "1.2M", "3B", "3e-4". The unit
 * (k, M, B, T, scientific) follows the largest tick, decimals the spacing, so
 * that every label of an axis reads alike. */
void plot_tick_label(const plot_axis *a, double v, char *buf, size_t cap);

#endif
