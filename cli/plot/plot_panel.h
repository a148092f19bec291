/* SPDX-License-Identifier: MIT */
/* One panel of a `plot` figure: axes, ticks, grid lines, its series and its
 * legend, in the box (x, y, w, h) of the figure's surface (plot_panel.c). */
#ifndef ESMT_CLI_PLOT_PANEL_H
#define ESMT_CLI_PLOT_PANEL_H

#include "plot_draw.h"

void plot_draw_panel(const plot_ctx *c, const plot_panel *p, double x, double y, double w,
                     double h);

#endif
