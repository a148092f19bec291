/* SPDX-License-Identifier: MIT */
/* `plot`'s drawing primitives (plot_draw.h): the palette, line styles,
 * anchored text and legend keys. */
#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot_draw.h"

/* Matplotlib's "tab10": distinct, and readable by most colour-blind eyes. */
static const double k_palette[][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
    {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
    {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812},
};
#define N_PALETTE (int)(sizeof k_palette / sizeof k_palette[0])

static void plot_color(cairo_t *cr, int color, double alpha) {
  if (color < 0) {
    cairo_set_source_rgba(cr, 0.35, 0.35, 0.35, alpha);
    return;
  }
  const double *c = k_palette[color % N_PALETTE];
  cairo_set_source_rgba(cr, c[0], c[1], c[2], alpha);
}

void plot_set_style(const plot_ctx *c, int color, int style) {
  cairo_t *cr = c->cr;
  const double s = c->s;
  double width = 2.0 * s, alpha = 1.0;
  double dash[2] = {0, 0};
  int n_dash = 0;
  switch (style) {
    case PLOT_BOLD: width = 2.8 * s; break;
    case PLOT_FAINT: width = 1.0 * s; alpha = 0.3; break;
    case PLOT_DASHED: dash[0] = 7 * s, dash[1] = 4 * s, n_dash = 2; width = 1.8 * s; break;
    case PLOT_DOTTED: dash[0] = 2 * s, dash[1] = 3 * s, n_dash = 2; break;
    case PLOT_POINTS: width = 1.5 * s; break; /* thinner than a train line of its colour */
    default: break;
  }
  plot_color(cr, color, alpha);
  cairo_set_line_width(cr, fmax(width, 0.6));
  cairo_set_dash(cr, dash, n_dash, 0);
  cairo_set_line_cap(cr, n_dash ? CAIRO_LINE_CAP_BUTT : CAIRO_LINE_CAP_ROUND);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
}

void plot_text(cairo_t *cr, double x, double y, const char *s, double ax, double ay) {
  cairo_text_extents_t te;
  cairo_font_extents_t fe;
  cairo_text_extents(cr, s, &te);
  cairo_font_extents(cr, &fe);
  /* vertical anchoring on the font's ascent, so that labels of one row align */
  const double h = fe.ascent;
  cairo_move_to(cr, x - te.x_advance * ax, y + h * (1 - ay));
  cairo_show_text(cr, s);
}

double plot_text_width(cairo_t *cr, const char *s) {
  cairo_text_extents_t te;
  cairo_text_extents(cr, s, &te);
  return te.x_advance;
}

/* A short sample of a line style, from (x, y) over width w. */
void plot_key_sample(const plot_ctx *c, const plot_key *k, double x, double y, double w) {
  cairo_t *cr = c->cr;
  plot_set_style(c, k->color, k->style);
  cairo_move_to(cr, x, y);
  cairo_line_to(cr, x + w, y);
  cairo_stroke(cr);
  if (k->style == PLOT_POINTS) {
    cairo_arc(cr, x + w / 2, y, 3.2 * c->s, 0, PLOT_TAU);
    cairo_fill(cr);
  }
}

void plot_keys_size(const plot_ctx *c, const plot_key *k, int n, double *w, double *h) {
  cairo_set_font_size(c->cr, c->font * 0.9);
  double tw = 0;
  for (int i = 0; i < n; i++) tw = fmax(tw, plot_text_width(c->cr, k[i].text));
  *w = tw + 3.6 * c->font;
  *h = n * c->font * 1.3 + 0.6 * c->font;
}

/* A legend with its top-left corner at (x, y); boxed: on a pale box. */
void plot_draw_keys(const plot_ctx *c, const plot_key *k, int n, double x, double y, int boxed) {
  cairo_t *cr = c->cr;
  double w, h;
  plot_keys_size(c, k, n, &w, &h);
  if (boxed) {
    cairo_rectangle(cr, x, y, w, h);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
    cairo_set_line_width(cr, fmax(c->s, 0.5));
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_stroke(cr);
  }
  const double f = c->font, line = f * 1.3;
  for (int i = 0; i < n; i++) {
    const double cy = y + 0.3 * f + line * (i + 0.5);
    plot_key_sample(c, &k[i], x + 0.5 * f, cy, 2.2 * f);
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    cairo_set_font_size(cr, f * 0.9);
    plot_text(cr, x + 3.0 * f, cy, k[i].text, 0, 0.5);
  }
}
