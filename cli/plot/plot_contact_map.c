/* SPDX-License-Identifier: MIT */
/* A contact map as a PNG heat map (plot_contact_map.h), through
 * plot_surface_render and the text and tick helpers of `plot`. */
#include <cairo.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "plot_contact_map.h"
#include "plot_draw.h"
#include "plot_ticks.h"

typedef struct contact_map {
  const float *p;
  int n;
  const char *id;
  int64_t *top; /* the top-L/5 long-range pairs, i * n + j, i < j */
  int n_top;
} contact_map;

/* Matplotlib's viridis at 9 points, interpolated: light is likely. */
static void viridis(double v, double rgb[3]) {
  static const double k[9][3] = {
      {0.267, 0.005, 0.329}, {0.283, 0.141, 0.458}, {0.254, 0.265, 0.530},
      {0.207, 0.372, 0.553}, {0.164, 0.471, 0.558}, {0.128, 0.567, 0.551},
      {0.135, 0.659, 0.518}, {0.360, 0.786, 0.388}, {0.993, 0.906, 0.144}};
  v = isfinite(v) ? fmin(fmax(v, 0), 1) * 8 : 0;
  const int a = v >= 8 ? 7 : (int)v;
  const double f = v - a;
  for (int c = 0; c < 3; c++) rgb[c] = k[a][c] * (1 - f) + k[a + 1][c] * f;
}

/* The L/5 pairs i < j, j - i >= 24, of highest probability (kept sorted,
 * highest first, by insertion: L/5 is small beside the pairs). */
static int top_long_range(const float *p, int n, int64_t *top) {
  const int k = n / 5;
  int have = 0;
  for (int i = 0; i < n && k > 0; i++)
    for (int j = i + PLOT_CONTACT_LONG_RANGE; j < n; j++) {
      const float v = p[(int64_t)i * n + j];
      if (have == k && !(v > p[top[k - 1]])) continue;
      int at = have < k ? have++ : k - 1;
      for (; at > 0 && p[top[at - 1]] < v; at--) top[at] = top[at - 1];
      top[at] = (int64_t)i * n + j;
    }
  return have;
}

static void draw_map(cairo_t *cr, void *user) {
  const contact_map *m = user;
  const int n = m->n;
  const double f = 14, x0 = 80, y0 = 70, side = 660;
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  char title[512];
  snprintf(title, sizeof title, "%s (%d residues)", m->id, n);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(cr, f * 1.3);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  plot_text(cr, x0, 0.9 * f, title, 0, 0);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, f * 0.9);
  if (m->n_top) {
    char key[128];
    snprintf(key, sizeof key, "circled: the top L/5 = %d pairs with |i - j| >= %d", m->n_top,
             PLOT_CONTACT_LONG_RANGE);
    plot_text(cr, x0, 2.9 * f, key, 0, 0);
  }
  /* the map, a pixel per pair, scaled up without smoothing */
  cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, n, n);
  if (cairo_surface_status(img) == CAIRO_STATUS_SUCCESS) {
    cairo_surface_flush(img);
    unsigned char *px = cairo_image_surface_get_data(img);
    const int stride = cairo_image_surface_get_stride(img);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double c[3];
        viridis(m->p[(int64_t)i * n + j], c);
        ((uint32_t *)(px + (size_t)i * stride))[j] = (uint32_t)lround(c[0] * 255) << 16 |
                                                     (uint32_t)lround(c[1] * 255) << 8 |
                                                     (uint32_t)lround(c[2] * 255);
      }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_translate(cr, x0, y0);
    cairo_scale(cr, side / n, side / n);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, 0, 0, n, n);
    cairo_fill(cr);
    cairo_restore(cr);
  }
  cairo_surface_destroy(img);
  const double cell = side / n, r = fmax(2.5, 0.8 * cell);
  cairo_set_source_rgb(cr, 0.95, 0.15, 0.1);
  cairo_set_line_width(cr, 1.2);
  for (int t = 0; t < m->n_top; t++) {
    const int64_t i = m->top[t] / n, j = m->top[t] % n;
    cairo_new_sub_path(cr);
    cairo_arc(cr, x0 + (j + 0.5) * cell, y0 + (i + 0.5) * cell, r, 0, PLOT_TAU);
  }
  cairo_stroke(cr);
  /* frame and residue ticks (1-based), the same on both axes */
  cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x0, y0, side, side);
  cairo_stroke(cr);
  plot_axis ax;
  plot_axis_make(&ax, 1, n, 6, 0, PLOT_AXIS_TIGHT | PLOT_AXIS_INTEGER);
  for (int t = 0; t < ax.n_ticks; t++) {
    char lab[32];
    plot_tick_label(&ax, ax.ticks[t], lab, sizeof lab);
    const double at = (ax.ticks[t] - 0.5) * cell;
    cairo_move_to(cr, x0 + at, y0 + side);
    cairo_line_to(cr, x0 + at, y0 + side + 5);
    cairo_move_to(cr, x0 - 5, y0 + at);
    cairo_line_to(cr, x0, y0 + at);
    cairo_stroke(cr);
    plot_text(cr, x0 + at, y0 + side + 8, lab, 0.5, 0);
    plot_text(cr, x0 - 8, y0 + at, lab, 1, 0.5);
  }
  plot_text(cr, x0 + side / 2, y0 + side + 8 + 1.6 * f, "residue j", 0.5, 0);
  cairo_save(cr);
  cairo_translate(cr, x0 - 4.2 * f, y0 + side / 2);
  cairo_rotate(cr, -PLOT_TAU / 4);
  plot_text(cr, 0, 0, "residue i", 0.5, 0.5);
  cairo_restore(cr);
  /* the colour bar */
  const double bx = x0 + side + 30, bw = 22;
  for (int k = 0; k < 256; k++) {
    double c[3];
    viridis(k / 255.0, c);
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    cairo_rectangle(cr, bx, y0 + side * (1 - (k + 1) / 256.0), bw, side / 256.0 + 0.5);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
  cairo_rectangle(cr, bx, y0, bw, side);
  cairo_stroke(cr);
  for (int k = 0; k <= 4; k++) {
    char lab[16];
    snprintf(lab, sizeof lab, "%g", k / 4.0);
    const double y = y0 + side * (1 - k / 4.0);
    cairo_move_to(cr, bx + bw, y);
    cairo_line_to(cr, bx + bw + 5, y);
    cairo_stroke(cr);
    plot_text(cr, bx + bw + 8, y, lab, 0, 0.5);
  }
  plot_text(cr, bx + bw / 2, y0 - 0.6 * f, "P(contact)", 0.5, 1);
}

int plot_contact_map(const float *map, int n, const char *id, plot_signer *out, char *err,
                     size_t cap) {
  contact_map m = {.p = map, .n = n, .id = id};
  m.top = malloc((size_t)(n / 5 + 1) * sizeof *m.top);
  if (!m.top) {
    snprintf(err, cap, "out of memory");
    return -1;
  }
  m.n_top = top_long_range(map, n, m.top);
  const int rc = plot_surface_render(PLOT_CONTACT_MAP_WIDTH, PLOT_CONTACT_MAP_HEIGHT, 0, draw_map,
                                     &m, out, err, cap);
  free(m.top);
  return rc;
}
