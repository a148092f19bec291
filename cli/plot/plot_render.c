/* SPDX-License-Identifier: MIT */
/* `plot`: the figure (surface, title, grid of panels), drawn with the
 * primitives of plot_draw.c and the panels of plot_panel.c. */
#include <cairo.h>
#include <cairo-svg.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot_draw.h"
#include "plot_panel.h"
#include "plot_ticks.h"

#ifdef ESMT_HAVE_FONTCONFIG
#include <fontconfig/fontconfig.h>
#endif

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
    plot_key_sample(c, k, x, cy, 2.0 * f);
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

int plot_surface_render(int width, int height, int svg, plot_draw_fn draw, void *user,
                        plot_signer *out, char *err, size_t cap) {
  cairo_surface_t *sf =
      svg ? cairo_svg_surface_create_for_stream(write_stream, out, width, height)
          : cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  if (failed(cairo_surface_status(sf), "creating the surface", err, cap)) {
    cairo_surface_destroy(sf);
    return -1;
  }
  cairo_t *cr = cairo_create(sf);
  draw(cr, user);
  int rc = failed(cairo_status(cr), "drawing", err, cap);
  cairo_destroy(cr);
  if (!rc && !svg)
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

static void draw_plot(cairo_t *cr, void *user) {
  const plot_figure *fig = user;
  const double s = fmin(fig->width / 1600.0, fig->height / 1000.0);
  plot_ctx c = {.cr = cr, .s = s, .font = fmax(15.0 * pow(s, 0.7), 7.0), .xlabel = fig->xlabel};
  c.x_how = PLOT_AXIS_TIGHT | (fig->x_integer ? PLOT_AXIS_INTEGER : 0);
  x_range(fig, &c.x_lo, &c.x_hi);
  draw_figure(&c, fig);
}

int plot_render(const plot_figure *fig, plot_signer *out, char *err, size_t cap) {
  return plot_surface_render(fig->width, fig->height, fig->svg, draw_plot, (void *)fig, out, err,
                             cap);
}
