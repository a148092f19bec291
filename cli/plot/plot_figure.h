/* SPDX-License-Identifier: MIT */
/* What `plot` draws: a figure of panels on a grid, each with its series and
 * legend, and plot_render() that draws it with cairo (plot_render.c). No
 * cairo type shows here, so that the data side (plot_data.c) needs none. */
#ifndef ESMT_CLI_PLOT_FIGURE_H
#define ESMT_CLI_PLOT_FIGURE_H

#include <stddef.h>
#include <stdio.h>

#include "plot_signature.h"

enum plot_style {
  PLOT_LINE,   /* solid */
  PLOT_BOLD,   /* solid and thicker: a smoothed curve */
  PLOT_FAINT,  /* thin and pale: the raw values under a smoothed curve */
  PLOT_DASHED, /* a baseline or a ceiling */
  PLOT_DOTTED,
  PLOT_POINTS  /* a line through markers: sparse values (evaluations) */
};

#define PLOT_GREY (-1) /* colour of baselines and of style-only legend keys */
#define PLOT_TAU 6.283185307179586

typedef struct plot_series {
  const double *x, *y; /* n points; a NAN coordinate breaks the line */
  size_t n;
  int color;           /* palette index, or PLOT_GREY */
  int style;           /* enum plot_style */
  int right;           /* on the panel's right-hand axis */
} plot_series;

/* One legend line: a sample of the line and its text. */
typedef struct plot_key {
  char text[64];
  int color, style;
} plot_key;

#define PLOT_MAX_SERIES 96
#define PLOT_MAX_KEYS 8

typedef struct plot_panel {
  const char *title, *ylabel;
  const char *y2label;    /* the right-hand axis' title; NULL without one */
  int log_y;              /* logarithmic left axis */
  int from_zero;          /* the left axis starts at 0 (rates, memory) */
  int col, row, col_span; /* place on the figure's grid */
  plot_series series[PLOT_MAX_SERIES];
  int n_series;
  plot_key keys[PLOT_MAX_KEYS];
  int n_keys;
} plot_panel;

#define PLOT_MAX_PANELS 8
#define PLOT_MAX_RUNS 10

typedef struct plot_figure {
  int width, height; /* pixels (PNG) or points (SVG) */
  int svg;
  char title[256];
  const char *xlabel;
  int x_integer;     /* the x axis counts steps: whole-number ticks */
  int cols, rows;
  plot_panel panels[PLOT_MAX_PANELS];
  int n_panels;
  plot_key runs[PLOT_MAX_RUNS]; /* the colour of each run, when there are several */
  int n_runs;
} plot_figure;

/* Draw `fig` as PNG or SVG into out->out (a file the caller opened for
 * writing), marked as a figure of `plot`. Returns 0, or -1 with the reason
 * in err. */
int plot_render(const plot_figure *fig, plot_signer *out, char *err, size_t cap);

/* ---- inside the renderer (plot_render.c, plot_panel.c) ---- */

#endif
