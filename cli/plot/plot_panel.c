/* SPDX-License-Identifier: MIT */
/* `plot`: one panel - its axes (ticks, labels, grid lines, titles), its
 * series and its legend (plot_panel.h). */
#include <cairo.h>
#include <math.h>
#include <stdio.h>

#include "plot_panel.h"
#include "plot_ticks.h"

/* The plot area of a panel, in device units (y grows downwards). */
typedef struct frame {
  double x0, y0, x1, y1;
} frame;

/* The range of the values on one side (right or left), positive only on a
 * log axis. 0 when nothing is drawable there. */
static int y_range(const plot_panel *p, int right, int log, double *lo, double *hi) {
  *lo = INFINITY;
  *hi = -INFINITY;
  for (int i = 0; i < p->n_series; i++) {
    const plot_series *s = &p->series[i];
    if (s->right != right) continue;
    for (size_t j = 0; j < s->n; j++) {
      const double v = s->y[j];
      if (!isfinite(v) || !isfinite(s->x[j]) || (log && v <= 0)) continue;
      *lo = fmin(*lo, v);
      *hi = fmax(*hi, v);
    }
  }
  return *lo <= *hi;
}

/* Where v falls on the axis, kept within a few frames of the plot area:
 * an extreme value far off the axis stays a coordinate cairo can draw. */
static double frac(const plot_axis *a, double v) {
  const double t = plot_axis_frac(a, v);
  return isnan(t) ? t : fmax(-4.0, fmin(5.0, t)); /* NAN: not drawable, as it was */
}

static double px(const frame *f, const plot_axis *a, double v) {
  return f->x0 + frac(a, v) * (f->x1 - f->x0);
}

static double py(const frame *f, const plot_axis *a, double v) {
  return f->y1 - frac(a, v) * (f->y1 - f->y0);
}

static double widest_label(cairo_t *cr, const plot_axis *a) {
  double w = 0;
  char buf[48];
  for (int i = 0; i < a->n_ticks; i++) {
    plot_tick_label(a, a->ticks[i], buf, sizeof buf);
    w = fmax(w, plot_text_width(cr, buf));
  }
  return w;
}

static void set_font(cairo_t *cr, double size, int bold) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

static void grey(cairo_t *cr, double v, double width) {
  cairo_set_source_rgb(cr, v, v, v);
  cairo_set_line_width(cr, width);
  cairo_set_dash(cr, NULL, 0, 0);
}

/* Text turned a quarter left (a y axis title), centred on (x, y). */
static void vertical_text(cairo_t *cr, double x, double y, const char *s) {
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, -PLOT_TAU / 4);
  plot_text(cr, 0, 0, s, 0.5, 0.5);
  cairo_restore(cr);
}

/* Grid lines (on `grid`) and labelled ticks of the x axis and the y axes
 * that have data. */
static void draw_axes(const plot_ctx *c, const frame *f, const plot_axis *ax, const plot_axis *ay,
                      const plot_axis *ay2) {
  cairo_t *cr = c->cr;
  const double tick = 0.35 * c->font, lw = fmax(c->s, 0.5);
  char buf[48];
  set_font(cr, c->font * 0.85, 0);
  const plot_axis *grid = ay ? ay : ay2;
  for (int i = 0; i < grid->n_ticks; i++) {
    const double y = round(py(f, grid, grid->ticks[i])) + 0.5;
    grey(cr, 0.9, lw);
    cairo_move_to(cr, f->x0, y);
    cairo_line_to(cr, f->x1, y);
    cairo_stroke(cr);
  }
  for (int i = 0; i < ax->n_ticks; i++) {
    const double x = round(px(f, ax, ax->ticks[i])) + 0.5;
    grey(cr, 0.9, lw);
    cairo_move_to(cr, x, f->y0);
    cairo_line_to(cr, x, f->y1);
    cairo_stroke(cr);
    grey(cr, 0.45, lw);
    cairo_move_to(cr, x, f->y1);
    cairo_line_to(cr, x, f->y1 + tick);
    cairo_stroke(cr);
    plot_tick_label(ax, ax->ticks[i], buf, sizeof buf);
    plot_text(cr, x, f->y1 + tick * 1.5, buf, 0.5, 0);
  }
  for (int side = 0; side < 2; side++) {
    const plot_axis *a = side ? ay2 : ay;
    if (!a) continue;
    const double x = side ? f->x1 : f->x0, d = side ? tick : -tick;
    for (int i = 0; i < a->n_ticks; i++) {
      const double y = round(py(f, a, a->ticks[i])) + 0.5;
      grey(cr, 0.45, lw);
      cairo_move_to(cr, x, y);
      cairo_line_to(cr, x + d, y);
      cairo_stroke(cr);
      plot_tick_label(a, a->ticks[i], buf, sizeof buf);
      plot_text(cr, x + d * 1.5, y, buf, side ? 0 : 1, 0.5);
    }
  }
}

/* Point j of a series on the panel, 0 when it is not drawable. */
static int point(const frame *f, const plot_series *s, size_t j, const plot_axis *ax,
                 const plot_axis *ay, double *x, double *y) {
  if (j >= s->n) return 0;
  *x = px(f, ax, s->x[j]);
  *y = py(f, ay, s->y[j]);
  return isfinite(*x) && isfinite(*y);
}

/* One series as a polyline broken at missing values; markers on sparse
 * point series and on lone points (no line through them to show). */
static void draw_series(const plot_ctx *c, const frame *f, const plot_series *s,
                        const plot_axis *ax, const plot_axis *ay) {
  cairo_t *cr = c->cr;
  double x, y, ux, uy;
  plot_set_style(c, s->color, s->style);
  int pen = 0;
  size_t shown = 0;
  for (size_t j = 0; j < s->n; j++) {
    if (!point(f, s, j, ax, ay, &x, &y)) {
      pen = 0;
      continue;
    }
    pen ? cairo_line_to(cr, x, y) : cairo_move_to(cr, x, y);
    pen = 1;
    shown++;
  }
  cairo_stroke(cr);
  const int markers = s->style == PLOT_POINTS && shown * 8 * c->s <= f->x1 - f->x0;
  for (size_t j = 0; j < s->n; j++) {
    if (!point(f, s, j, ax, ay, &x, &y)) continue;
    const int lone = !(j && point(f, s, j - 1, ax, ay, &ux, &uy)) &&
                     !point(f, s, j + 1, ax, ay, &ux, &uy);
    if (!markers && !lone) continue;
    cairo_new_sub_path(cr);
    cairo_arc(cr, x, y, fmax(3.2 * c->s, 1.5), 0, PLOT_TAU);
  }
  cairo_fill(cr);
}

/* How many of the panel's points a legend box at (x, y, w, h) would hide. */
static size_t covered(const plot_panel *p, const frame *f, const plot_axis *ax,
                      const plot_axis *ay, const plot_axis *ay2, const double box[4]) {
  size_t n = 0;
  for (int i = 0; i < p->n_series; i++) {
    const plot_series *s = &p->series[i];
    const plot_axis *a = s->right ? ay2 : ay;
    if (!a) continue;
    for (size_t j = 0; j < s->n; j++) {
      const double x = px(f, ax, s->x[j]), y = py(f, a, s->y[j]);
      n += x >= box[0] && x <= box[0] + box[2] && y >= box[1] && y <= box[1] + box[3];
    }
  }
  return n;
}

/* The legend in the corner where it hides the fewest points. */
static void draw_legend(const plot_ctx *c, const plot_panel *p, const frame *f,
                        const plot_axis *ax, const plot_axis *ay, const plot_axis *ay2) {
  if (p->n_keys == 0) return;
  double w, h;
  plot_keys_size(c, p->keys, p->n_keys, &w, &h);
  const double in = 0.5 * c->font;
  const double l = f->x0 + in, r = f->x1 - in - w, mx = (f->x0 + f->x1 - w) / 2;
  const double t = f->y0 + in, b = f->y1 - in - h, my = (f->y0 + f->y1 - h) / 2;
  /* corners first, top right first (training curves fall from the top
   * left); a place further down the list only if it hides fewer points */
  const double xs[9] = {r, l, r, l, r, l, mx, mx, mx}, ys[9] = {t, t, b, b, my, my, t, b, my};
  int best = 0;
  size_t least = (size_t)-1;
  for (int k = 0; k < 9 && least; k++) {
    const double box[4] = {xs[k], ys[k], w, h};
    const size_t n = covered(p, f, ax, ay, ay2, box);
    if (n < least) least = n, best = k;
  }
  plot_draw_keys(c, p->keys, p->n_keys, xs[best], ys[best], 1);
}

static void draw_frame(const plot_ctx *c, const frame *f) {
  grey(c->cr, 0.55, fmax(c->s, 0.5));
  cairo_rectangle(c->cr, f->x0, f->y0, f->x1 - f->x0, f->y1 - f->y0);
  cairo_stroke(c->cr);
}

static void no_data(const plot_ctx *c, const frame *f) {
  draw_frame(c, f);
  set_font(c->cr, c->font * 1.2, 0);
  cairo_set_source_rgb(c->cr, 0.55, 0.55, 0.55);
  plot_text(c->cr, (f->x0 + f->x1) / 2, (f->y0 + f->y1) / 2, "no data", 0.5, 0.5);
}

/* The titles around the plot area: panel, x axis, left and right axes. */
static void draw_titles(const plot_ctx *c, const plot_panel *p, const frame *f, double x,
                        double y, double w, int left, int right) {
  cairo_t *cr = c->cr;
  const double fs = c->font;
  set_font(cr, fs * 1.05, 1);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  plot_text(cr, f->x0, y + 0.5 * fs, p->title, 0, 0);
  set_font(cr, fs * 0.9, 0);
  cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
  plot_text(cr, (f->x0 + f->x1) / 2, f->y1 + 1.55 * fs, c->xlabel, 0.5, 0);
  if (left && p->ylabel) vertical_text(cr, x + 0.9 * fs, (f->y0 + f->y1) / 2, p->ylabel);
  if (right && p->y2label) vertical_text(cr, x + w - 0.9 * fs, (f->y0 + f->y1) / 2, p->y2label);
}

void plot_draw_panel(const plot_ctx *c, const plot_panel *p, double x, double y, double w,
                     double h) {
  cairo_t *cr = c->cr;
  const double fs = c->font;
  double lo, hi, lo2, hi2;
  const int left = y_range(p, 0, p->log_y, &lo, &hi);
  const int right = y_range(p, 1, 0, &lo2, &hi2);
  plot_axis ax, ay, ay2;
  const double plot_h = h - 5.0 * fs;
  const int ty = (int)fmax(3, fmin(8, plot_h / (3.2 * fs)));
  plot_axis_make(&ay, lo, hi, ty, p->log_y, p->from_zero ? PLOT_AXIS_FROM_ZERO : 0);
  plot_axis_make(&ay2, lo2, hi2, ty, 0, PLOT_AXIS_FROM_ZERO);
  set_font(cr, fs * 0.85, 0);
  const double lw = left ? widest_label(cr, &ay) : 0, rw = right ? widest_label(cr, &ay2) : 0;
  frame f = {x + 2.2 * fs + lw, y + 2.2 * fs, x + w - (right ? 2.2 * fs + rw : 1.8 * fs),
             y + h - 3.0 * fs};
  const int tx = (int)fmax(2, fmin(10, (f.x1 - f.x0) / (6.0 * fs)));
  plot_axis_make(&ax, c->x_lo, c->x_hi, tx, 0, c->x_how);
  draw_titles(c, p, &f, x, y, w, left, right);
  if (!left && !right) {
    no_data(c, &f);
    return;
  }
  draw_axes(c, &f, &ax, left ? &ay : NULL, right ? &ay2 : NULL);
  cairo_save(cr);
  cairo_rectangle(cr, f.x0, f.y0, f.x1 - f.x0, f.y1 - f.y0);
  cairo_clip(cr);
  for (int i = 0; i < p->n_series; i++) {
    const plot_series *s = &p->series[i];
    if (s->right ? right : left) draw_series(c, &f, s, &ax, s->right ? &ay2 : &ay);
  }
  cairo_restore(cr);
  draw_frame(c, &f);
  draw_legend(c, p, &f, &ax, left ? &ay : NULL, right ? &ay2 : NULL);
}
