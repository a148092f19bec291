/* SPDX-License-Identifier: MIT */
/* `plot`: metrics into panels and series (plot_data.h). */
#include "plot_data.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Beyond this many points a series is drawn as the lowest and highest
 * value of each of THIN_BUCKETS slices: the same picture (a pixel column
 * holds several points anyway), a much smaller SVG. */
#define THIN_ABOVE 4000
#define THIN_BUCKETS 1500

enum { P_LOSS, P_PPL, P_LR, P_SPEED, P_MEM, N_PANELS };
#define RIGHT 0x100 /* or'ed into a style: on the right-hand axis */

static double *alloc(plot_pool *pool, size_t n) {
  if (pool->n == pool->cap) {
    const size_t cap = pool->cap ? pool->cap * 2 : 64;
    double **a = realloc(pool->arrays, cap * sizeof *a);
    if (!a) return NULL;
    pool->arrays = a;
    pool->cap = cap;
  }
  double *v = malloc((n ? n : 1) * sizeof *v);
  if (v) pool->arrays[pool->n++] = v;
  return v;
}

void plot_pool_free(plot_pool *pool) {
  for (size_t i = 0; i < pool->n; i++) free(pool->arrays[i]);
  free(pool->arrays);
  memset(pool, 0, sizeof *pool);
}

/* The double at byte offset `off` of each record, times mul. */
static double *column(plot_pool *pool, const void *records, size_t n, size_t size, size_t off,
                      double mul) {
  double *v = alloc(pool, n);
  for (size_t i = 0; v && i < n; i++) {
    memcpy(&v[i], (const char *)records + i * size + off, sizeof v[i]);
    v[i] *= mul;
  }
  return v;
}
#define TRAIN_COL(pool, m, field, mul) \
  column(pool, (m)->train, (m)->n_train, sizeof *(m)->train, offsetof(cli_train_point, field), mul)
#define EVAL_COL(pool, m, field, mul) \
  column(pool, (m)->eval, (m)->n_eval, sizeof *(m)->eval, offsetof(cli_eval_point, field), mul)

static size_t n_finite(const double *x, const double *y, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += isfinite(x[i]) && isfinite(y[i]);
  return k;
}

/* The tokens trained by `step`: interpolated between the train records
 * around it (their steps ascend); step 0 is 0 tokens. */
static double tokens_at(const cli_run_metrics *m, int64_t step) {
  size_t lo = 0, hi = m->n_train; /* first record with step >= `step` */
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (m->train[mid].step < step) lo = mid + 1;
    else hi = mid;
  }
  if (lo < m->n_train && m->train[lo].step == step) return m->train[lo].tokens;
  if (lo == m->n_train) return NAN; /* past the last train record */
  const double s0 = lo ? (double)m->train[lo - 1].step : 0, t0 = lo ? m->train[lo - 1].tokens : 0;
  const double s1 = (double)m->train[lo].step, t1 = m->train[lo].tokens;
  return step <= 0 ? 0 : t0 + (t1 - t0) * ((double)step - s0) / (s1 - s0);
}

int plot_smooth_window(int smooth, size_t n) {
  long long w = smooth < 0 ? (long long)(n / 50) : smooth;
  if (w > (long long)n) w = (long long)n;
  return w >= 2 ? (int)w : 0;
}

/* Centred moving average over the finite values of a w-point window (fewer
 * at the ends); a missing value stays missing. */
static double *smooth(plot_pool *pool, const double *y, size_t n, int w) {
  double *out = alloc(pool, n), *sum = alloc(pool, n + 1), *cnt = alloc(pool, n + 1);
  if (!out || !sum || !cnt) return NULL;
  sum[0] = cnt[0] = 0;
  for (size_t i = 0; i < n; i++) {
    sum[i + 1] = sum[i] + (isfinite(y[i]) ? y[i] : 0);
    cnt[i + 1] = cnt[i] + (isfinite(y[i]) ? 1 : 0);
  }
  const size_t before = (size_t)(w - 1) / 2, after = (size_t)w / 2;
  for (size_t i = 0; i < n; i++) {
    const size_t a = i > before ? i - before : 0, b = i + after + 1 < n ? i + after + 1 : n;
    out[i] = isfinite(y[i]) ? (sum[b] - sum[a]) / (cnt[b] - cnt[a]) : NAN;
  }
  return out;
}

/* Long series: the lowest and highest point of each slice, in order. */
static int thin(plot_pool *pool, plot_series *s) {
  if (s->n <= THIN_ABOVE) return 0;
  double *x = alloc(pool, 2 * THIN_BUCKETS), *y = alloc(pool, 2 * THIN_BUCKETS);
  if (!x || !y) return -1;
  size_t k = 0;
  for (size_t b = 0; b < THIN_BUCKETS; b++) {
    const size_t i0 = b * s->n / THIN_BUCKETS, i1 = (b + 1) * s->n / THIN_BUCKETS;
    size_t lo = i0, hi = i0;
    for (size_t i = i0; i < i1; i++) {
      if (!isfinite(s->y[i]) || !isfinite(s->x[i])) continue;
      if (!isfinite(s->y[lo]) || s->y[i] < s->y[lo]) lo = i;
      if (!isfinite(s->y[hi]) || s->y[i] > s->y[hi]) hi = i;
    }
    const size_t first = lo < hi ? lo : hi, second = lo < hi ? hi : lo;
    x[k] = s->x[first], y[k++] = s->y[first];
    if (second != first) x[k] = s->x[second], y[k++] = s->y[second];
  }
  s->x = x, s->y = y, s->n = k;
  return 0;
}

typedef struct build {
  plot_figure *fig;
  plot_pool *pool;
  int multi; /* several runs: colour is the run, the legend keys are styles */
  int run;
} build;

static void add_key(plot_panel *p, const char *text, int color, int style) {
  for (int i = 0; i < p->n_keys; i++)
    if (!strcmp(p->keys[i].text, text)) return;
  if (p->n_keys == PLOT_MAX_KEYS) return;
  plot_key *k = &p->keys[p->n_keys++];
  snprintf(k->text, sizeof k->text, "%s", text);
  k->color = color;
  k->style = style;
}

/* A series of the current run with its legend key; nothing when every
 * value is missing. `color` is the colour of this kind of line in a
 * one-run figure. */
static int add(build *b, int panel, const double *x, const double *y, size_t n, int color,
               int style, const char *key) {
  plot_panel *p = &b->fig->panels[panel];
  if (!x || !y) return -1;
  if (!n_finite(x, y, n) || p->n_series == PLOT_MAX_SERIES) return 0;
  plot_series *s = &p->series[p->n_series++];
  *s = (plot_series){x, y, n, b->multi ? b->run : color, style & ~RIGHT, !!(style & RIGHT)};
  add_key(p, key, b->multi ? PLOT_GREY : color, style & ~RIGHT);
  return thin(b->pool, s);
}

static double *map_log(double *v, size_t n) {
  for (size_t i = 0; v && i < n; i++) v[i] = v[i] > 0 ? log(v[i]) : NAN;
  return v;
}

static double *map_positive(double *v, size_t n) { /* mfu 0: not measured */
  for (size_t i = 0; v && i < n; i++) v[i] = v[i] > 0 ? v[i] : NAN;
  return v;
}

/* The x coordinates of a run's train and eval records. */
static int run_x(build *b, const cli_run_metrics *m, int tokens, double **tx, double **ex) {
  *tx = tokens ? TRAIN_COL(b->pool, m, tokens, 1) : alloc(b->pool, m->n_train);
  *ex = alloc(b->pool, m->n_eval);
  if (!*tx || !*ex) return -1;
  for (size_t i = 0; !tokens && i < m->n_train; i++) (*tx)[i] = (double)m->train[i].step;
  for (size_t i = 0; i < m->n_eval; i++) {
    const cli_eval_point *e = &m->eval[i];
    (*ex)[i] = !tokens ? (double)e->step : isfinite(e->tokens) ? e->tokens : tokens_at(m, e->step);
  }
  return 0;
}

static int train_loss(build *b, const cli_run_metrics *m, const double *tx, const plot_options *o) {
  const size_t n = m->n_train;
  const double *loss = TRAIN_COL(b->pool, m, loss, 1);
  if (!loss) return -1;
  const int w = plot_smooth_window(o->smooth, n_finite(tx, loss, n));
  if (!w) return add(b, P_LOSS, tx, loss, n, 0, PLOT_LINE, "train");
  char key[64];
  snprintf(key, sizeof key, "train, mean of %d", w);
  if (add(b, P_LOSS, tx, loss, n, 0, PLOT_FAINT, "train, each logged step")) return -1;
  return add(b, P_LOSS, tx, smooth(b->pool, loss, n, w), n, 0, PLOT_BOLD, key);
}

static int add_run(build *b, const cli_run_metrics *m, const plot_options *o) {
  plot_pool *pl = b->pool;
  const size_t nt = m->n_train, ne = m->n_eval;
  double *tx, *ex;
  int rc = run_x(b, m, o->x_tokens, &tx, &ex);
  if (!rc) rc = train_loss(b, m, tx, o);
  if (!rc) rc = add(b, P_LOSS, ex, EVAL_COL(pl, m, loss, 1), ne, 1, PLOT_POINTS, "validation");
  if (!rc) rc = add(b, P_LOSS, ex, map_log(EVAL_COL(pl, m, unigram_perplexity, 1), ne), ne,
                    PLOT_GREY, PLOT_DASHED, "amino-acid frequencies");
  if (!rc) rc = add(b, P_PPL, ex, EVAL_COL(pl, m, perplexity, 1), ne, 1, PLOT_POINTS, "validation");
  if (!rc) rc = add(b, P_PPL, ex, EVAL_COL(pl, m, unigram_perplexity, 1), ne, PLOT_GREY,
                    PLOT_DASHED, "amino-acid frequencies");
  if (!rc) rc = add(b, P_LR, tx, TRAIN_COL(pl, m, lr, 1), nt, 2, PLOT_LINE, "learning rate");
  if (!rc) rc = add(b, P_SPEED, tx, TRAIN_COL(pl, m, tokens_per_s, 1), nt, 0, PLOT_LINE,
                    "tokens/s");
  if (!rc) rc = add(b, P_SPEED, tx, map_positive(TRAIN_COL(pl, m, mfu, 100), nt), nt, 3,
                    PLOT_DOTTED | RIGHT, "MFU (right axis)");
  if (!rc) rc = add(b, P_MEM, tx, TRAIN_COL(pl, m, rss_mib, 1), nt, 4, PLOT_LINE, "host RSS");
  if (!rc) rc = add(b, P_MEM, tx, TRAIN_COL(pl, m, device_mem_mib, 1), nt, 5, PLOT_DOTTED,
                    "device used");
  if (!rc) rc = add(b, P_MEM, tx, TRAIN_COL(pl, m, device_mem_total_mib, 1), nt, PLOT_GREY,
                    PLOT_DASHED, "device total");
  return rc;
}

static void layout(plot_figure *fig, const plot_options *o) {
  static const struct {
    const char *title, *ylabel, *y2label;
    int col, row, span, from_zero;
  } k_panels[N_PANELS] = {
      {"Loss", "masked-LM loss (nats)", NULL, 0, 0, 2, 0},
      {"Validation perplexity", "perplexity", NULL, 2, 0, 1, 0},
      {"Learning rate", "learning rate", NULL, 0, 1, 1, 1},
      {"Throughput", "tokens/s", "MFU (%)", 1, 1, 1, 1},
      {"Memory", "MiB", NULL, 2, 1, 1, 1},
  };
  fig->cols = 3;
  fig->rows = 2;
  fig->n_panels = N_PANELS;
  for (int i = 0; i < N_PANELS; i++) {
    plot_panel *p = &fig->panels[i];
    memset(p, 0, sizeof *p);
    p->title = k_panels[i].title;
    p->ylabel = k_panels[i].ylabel;
    p->y2label = k_panels[i].y2label;
    p->col = k_panels[i].col;
    p->row = k_panels[i].row;
    p->col_span = k_panels[i].span;
    p->from_zero = k_panels[i].from_zero;
    p->log_y = o->log_y && (i == P_LOSS || i == P_PPL);
  }
  fig->xlabel = o->x_tokens ? "tokens trained" : "step";
  fig->x_integer = !o->x_tokens;
}

int plot_build(plot_figure *fig, plot_pool *pool, const plot_run *runs, int n_runs,
               const plot_options *o) {
  layout(fig, o);
  build b = {fig, pool, n_runs > 1, 0};
  fig->n_runs = n_runs > 1 ? n_runs : 0;
  for (int r = 0; r < n_runs && r < PLOT_MAX_RUNS; r++) {
    b.run = r;
    if (add_run(&b, &runs[r].m, o)) return -1;
    if (b.multi)
      fig->runs[r] = (plot_key){.color = r, .style = PLOT_BOLD};
    snprintf(fig->runs[r].text, sizeof fig->runs[r].text, "%s", runs[r].name);
  }
  return 0;
}
