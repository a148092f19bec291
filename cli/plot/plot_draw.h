/* SPDX-License-Identifier: MIT */
/* The cairo side of `plot`: the drawing context every part of a figure
 * shares, and the primitives they draw with - colours and line styles,
 * anchored text, legend keys (plot_draw.c). */
#ifndef ESMT_CLI_PLOT_DRAW_H
#define ESMT_CLI_PLOT_DRAW_H

#include <cairo.h>

#include "plot_figure.h"

typedef struct plot_ctx {
  cairo_t *cr;
  double s;          /* scale: 1 at 1600x1000 */
  double font;       /* the body font size */
  double x_lo, x_hi; /* the data's x range, shared by all panels */
  int x_how;         /* PLOT_AXIS_* of the x axis */
  const char *xlabel;
} plot_ctx;

void plot_set_style(const plot_ctx *c, int color, int style);
/* Text with its anchor: ax, ay in 0..1 of its width and height (0.5: centred). */
void plot_text(cairo_t *cr, double x, double y, const char *s, double ax, double ay);
double plot_text_width(cairo_t *cr, const char *s);
/* A legend key's sample line (or markers), w wide, centred on y from x. */
void plot_key_sample(const plot_ctx *c, const plot_key *k, double x, double y, double w);
void plot_draw_keys(const plot_ctx *c, const plot_key *k, int n, double x, double y, int boxed);
void plot_keys_size(const plot_ctx *c, const plot_key *k, int n, double *w, double *h);

/* A width x height PNG (svg: SVG) that draw(cr, user) paints, streamed into
 * out with the mark of plot_signature.h (plot_render.c). Returns 0, or -1
 * with the reason in err. */
typedef void (*plot_draw_fn)(cairo_t *cr, void *user);
int plot_surface_render(int width, int height, int svg, plot_draw_fn draw, void *user,
                        plot_signer *out, char *err, size_t cap);

#endif
