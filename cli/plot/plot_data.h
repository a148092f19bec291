/* SPDX-License-Identifier: MIT */
/* `plot`: the runs' metrics turned into the panels and series of a figure
 * (smoothing, x in steps or tokens, thinning of long runs). */
#ifndef ESMT_CLI_PLOT_DATA_H
#define ESMT_CLI_PLOT_DATA_H

#include "plot_figure.h"
#include "common/run_metrics.h"

typedef struct plot_run {
  char name[64];     /* legend text */
  cli_run_metrics m;
} plot_run;

typedef struct plot_options {
  int x_tokens;      /* x axis: tokens trained instead of steps */
  int smooth;        /* train loss moving average: -1 automatic, 0 or 1 off, else the window */
  int log_y;         /* log scale for loss and perplexity */
} plot_options;

/* The arrays the series point into, freed together. */
typedef struct plot_pool {
  double **arrays;
  size_t n, cap;
} plot_pool;

/* Fill fig's panels, keys and run legend (size, title and format are the
 * caller's). Returns 0, or -1 when out of memory. */
int plot_build(plot_figure *fig, plot_pool *pool, const plot_run *runs, int n_runs,
               const plot_options *o);
void plot_pool_free(plot_pool *pool);

/* The moving-average window `smooth` means for n points (0: none). */
int plot_smooth_window(int smooth, size_t n);

#endif
