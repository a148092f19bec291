/* SPDX-License-Identifier: MIT */
/* `plot`: the figure (surface, title, grid of panels) and the drawing
 * helpers the panels share (plot_render.h). */
#include <cairo.h>
#include <cairo-svg.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot_render.h"
#include "plot_ticks.h"

#ifdef ESMT_HAVE_FONTCONFIG
#include <fontconfig/fontconfig.h>
#endif

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
static void key_sample(const plot_ctx *c, const plot_key *k, double x, double y, double w) {
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
    key_sample(c, &k[i], x + 0.5 * f, cy, 2.2 * f);
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    cairo_set_font_size(cr, f * 0.9);
    plot_text(cr, x + 3.0 * f, cy, k[i].text, 0, 0.5);
  }
}

/* The title, and beside it the colour of each run when there are several
 * (one row). Returns the height taken. */
static double draw_header(const plot_ctx *c, const plot_figure *fig) {
  cairo_t *cr = c->cr;
  const double f = c->font, top = 0.9 * f;
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(cr, f * 1.35);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  plot_text(cr, 1.2 * f, top, fig->title, 0, 0);
  double x = 1.2 * f + plot_text_width(cr, fig->title) + 2.0 * f;
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  for (int i = 0; i < fig->n_runs; i++) {
    cairo_set_font_size(cr, f);
    const double cy = top + 0.7 * f;
    const plot_key *k = &fig->runs[i];
    key_sample(c, k, x, cy, 2.0 * f);
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    cairo_set_font_size(cr, f);
    plot_text(cr, x + 2.5 * f, cy, k->text, 0, 0.5);
    x += 2.5 * f + plot_text_width(cr, k->text) + 1.5 * f;
  }
  return top + 2.4 * f;
}

/* The data's x range over every series of every panel (a shared axis). */
static void x_range(const plot_figure *fig, double *lo, double *hi) {
  *lo = INFINITY;
  *hi = -INFINITY;
  for (int p = 0; p < fig->n_panels; p++)
    for (int i = 0; i < fig->panels[p].n_series; i++) {
      const plot_series *s = &fig->panels[p].series[i];
      for (size_t j = 0; j < s->n; j++)
        if (isfinite(s->x[j]) && isfinite(s->y[j])) {
          *lo = fmin(*lo, s->x[j]);
          *hi = fmax(*hi, s->x[j]);
        }
    }
  if (!(*lo <= *hi)) *lo = 0, *hi = 1;
  *lo = plot_clamp_value(*lo); /* the pad below stays finite */
  *hi = plot_clamp_value(*hi);
  if (*lo > 0 && *lo < 0.1 * *hi) *lo = 0; /* a run from step 1: the axis from 0 */
  *hi += (*hi - *lo) * 0.015;               /* room for the last marker */
}

static void draw_figure(const plot_ctx *c, const plot_figure *fig) {
  cairo_t *cr = c->cr;
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  const double top = draw_header(c, fig), pad = 0.6 * c->font;
  const double cw = (fig->width - 2 * pad) / fig->cols;
  const double ch = (fig->height - top - pad) / fig->rows;
  for (int p = 0; p < fig->n_panels; p++) {
    const plot_panel *pn = &fig->panels[p];
    const int span = pn->col_span > 0 ? pn->col_span : 1;
    plot_draw_panel(c, pn, pad + pn->col * cw, top + pn->row * ch, span * cw, ch);
  }
}

static cairo_status_t write_stream(void *closure, const unsigned char *data, unsigned int len) {
  return plot_signer_write(closure, data, len) == 0 ? CAIRO_STATUS_SUCCESS
                                                    : CAIRO_STATUS_WRITE_ERROR;
}

static int failed(cairo_status_t st, const char *what, char *err, size_t cap) {
  if (st == CAIRO_STATUS_SUCCESS) return 0;
  snprintf(err, cap, "%s: %s", what, cairo_status_to_string(st));
  return -1;
}

int plot_render(const plot_figure *fig, plot_signer *out, char *err, size_t cap) {
  cairo_surface_t *sf =
      fig->svg ? cairo_svg_surface_create_for_stream(write_stream, out, fig->width, fig->height)
               : cairo_image_surface_create(CAIRO_FORMAT_RGB24, fig->width, fig->height);
  if (failed(cairo_surface_status(sf), "creating the surface", err, cap)) {
    cairo_surface_destroy(sf);
    return -1;
  }
  cairo_t *cr = cairo_create(sf);
  const double s = fmin(fig->width / 1600.0, fig->height / 1000.0);
  plot_ctx c = {.cr = cr, .s = s, .font = fmax(15.0 * pow(s, 0.7), 7.0), .xlabel = fig->xlabel};
  c.x_how = PLOT_AXIS_TIGHT | (fig->x_integer ? PLOT_AXIS_INTEGER : 0);
  x_range(fig, &c.x_lo, &c.x_hi);
  draw_figure(&c, fig);
  int rc = failed(cairo_status(cr), "drawing", err, cap);
  cairo_destroy(cr);
  if (!rc && !fig->svg)
    rc = failed(cairo_surface_write_to_png_stream(sf, write_stream, out), "writing PNG", err, cap);
  cairo_surface_finish(sf); /* an SVG is written out here */
  if (!rc) rc = failed(cairo_surface_status(sf), "writing SVG", err, cap);
  cairo_surface_destroy(sf);
  /* cairo 1.16 keeps font patterns for the life of the process; a leak
   * checker (the sanitizer suite) sees them lost unless they are let go */
  cairo_debug_reset_static_data();
#ifdef ESMT_HAVE_FONTCONFIG
  FcFini();
#endif
  return rc;
}
