/* SPDX-License-Identifier: MIT */
/* The lines of `watch` (watch_screen.h). */
#define _POSIX_C_SOURCE 200809L
#include "watch_screen.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "watch_spark.h"

#define LABEL "%-10s"

/* ---- building lines ---- */

static void next_line(watch_screen *s) {
  if (s->n < WATCH_MAX_LINES) s->line[s->n++][0] = '\0';
}

/* printf onto the end of the text in buf (cut to fit). */
__attribute__((format(printf, 3, 0))) static void vcatf(char *buf, size_t cap, const char *fmt,
                                                        va_list ap) {
  const size_t len = strnlen(buf, cap);
  if (len + 1 < cap) vsnprintf(buf + len, cap - len, fmt, ap);
}

__attribute__((format(printf, 3, 4))) static void catf(char *buf, size_t cap, const char *fmt,
                                                       ...) {
  va_list ap;
  va_start(ap, fmt);
  vcatf(buf, cap, fmt, ap);
  va_end(ap);
}

/* printf onto the end of the current line. */
__attribute__((format(printf, 2, 3))) static void add(watch_screen *s, const char *fmt, ...) {
  if (!s->n) next_line(s);
  va_list ap;
  va_start(ap, fmt);
  vcatf(s->line[s->n - 1], WATCH_LINE_BYTES, fmt, ap);
  va_end(ap);
}

/* Sparkline columns for a line of `width` that has `used` columns of text. */
static int spark_cols(const watch_input *in, int used) {
  const int w = in->width > 0 ? in->width : 80;
  const int c = w - used;
  return c < 8 ? 8 : c > 400 ? 400 : c;
}

/* ---- the run's writer ---- */

void watch_gpus_sample(watch_gpus *g) {
  for (int i = 0; i < WATCH_MAX_GPUS; i++) g->s[i] = (esmt_gpu_sample)ESMT_GPU_SAMPLE_INIT;
  g->why[0] = '\0';
  g->status = esmt_gpu_sample_all(g->s, WATCH_MAX_GPUS, &g->count);
  if (g->status == ESMT_OK) return;
  const char *why = esmt_last_error();
  const char *prefix = "esmt_gpu_sample_all: ";
  if (!strncmp(why, prefix, strlen(prefix))) why += strlen(prefix);
  snprintf(g->why, sizeof g->why, "%s", why);
}

/* ---- sections ---- */

static void header(const watch_input *in, watch_screen *s) {
  next_line(s);
  add(s, "esmtrain-example watch  %s", in->run_dir);
  if (in->hint) add(s, "   %s", in->hint);
  next_line(s);
  const watch_run_state *st = &in->state;
  add(s, LABEL, "state");
  if (st->running && st->other_host)
    add(s, "running on %s: pid %ld (not checked from this machine)", st->host, st->pid);
  else if (st->running)
    add(s, "running: pid %ld on %s", st->pid, st->host[0] ? st->host : "this machine");
  else
    add(s, "finished/stopped");
  if (st->started[0]) add(s, ", started %s", st->started);
  if (!st->running && st->pid > 0)
    add(s, " (run.lock names pid %ld, which %s)", st->pid,
        st->gone_why[0] ? st->gone_why : "is gone");
  if (st->damaged[0]) add(s, " (run.lock is damaged: %s)", st->damaged);
  next_line(s);
  add(s, LABEL, "metrics");
  if (in->error) {
    add(s, "error: %s", in->error);
  } else if (!in->have_file) {
    add(s, "waiting for %s/metrics.jsonl", in->run_dir);
  } else {
    char age[32];
    add(s, "%zu train, %zu eval records", in->m->n_train, in->m->n_eval);
    if (in->m->bad_lines)
      add(s, " (%zu other line%s)", in->m->bad_lines, in->m->bad_lines > 1 ? "s" : "");
    if (isfinite(in->age_s))
      add(s, "; written %s ago", ws_duration(in->age_s, age, sizeof age));
  }
  if (in->restarts)
    add(s, "; replaced %d time%s (a resume)", in->restarts, in->restarts > 1 ? "s" : "");
}

/* The ETA the trainer logged, else one from the step time. */
static double eta_of(const cli_train_point *p) {
  if (isfinite(p->eta_s)) return p->eta_s;
  if (isfinite(p->max_steps) && p->max_steps > 0 && isfinite(p->step_ms))
    return (p->max_steps - (double)p->step) * p->step_ms / 1000.0;
  return NAN;
}

static void progress(const watch_input *in, watch_screen *s) {
  next_line(s);
  add(s, LABEL, "progress");
  if (!in->m->n_train) {
    add(s, "no train step logged yet");
    return;
  }
  const cli_train_point *p = &in->m->train[in->m->n_train - 1];
  /* while it runs, the clock goes on between logged steps */
  const double since = in->state.running && isfinite(in->age_s) ? in->age_s : 0;
  char a[64], b[64], bar[2048];
  ws_duration(p->elapsed_s + since, b, sizeof b);
  if (isfinite(p->max_steps) && p->max_steps > 0) {
    const double frac = (double)p->step / p->max_steps;
    /* an ETA only while a trainer is at it */
    char tail[160], eta[48];
    const double left = eta_of(p) - since;
    if (in->state.running)
      snprintf(eta, sizeof eta, "ETA %s", ws_duration(left > 0 ? left : 0, a, sizeof a));
    else
      snprintf(eta, sizeof eta, "%s", frac >= 1 ? "done" : "stopped");
    snprintf(tail, sizeof tail, " %5.1f%%  %s  elapsed %s", 100.0 * frac, eta, b);
    char head[64];
    snprintf(head, sizeof head, "step %lld/%.0f  ", (long long)p->step, p->max_steps);
    /* room for the longest tail, so that the bar keeps its width */
    int cols = spark_cols(in, 10 + (int)strlen(head) + 38);
    cols = cols > 50 ? 50 : cols;
    add(s, "%s%s%s", head, ws_bar(frac, cols, in->utf8, bar, sizeof bar), tail);
  } else {
    add(s, "step %lld%s  elapsed %s", (long long)p->step,
        p->max_steps == 0 ? " (until the data ends)" : "", b);
  }
}

/* "          <sparkline>  what" under a section. */
static void spark_line(const watch_input *in, watch_screen *s, const double *first, size_t n,
                       size_t stride, const char *what) {
  char sp[WATCH_LINE_BYTES - 256]; /* 400 columns of 3-byte blocks */
  next_line(s);
  add(s, LABEL, "");
  add(s, "%s  %s", ws_spark(first, n, stride, spark_cols(in, 10 + 2 + (int)strlen(what) + 1),
                            in->utf8, sp, sizeof sp), what);
}

static void train(const watch_input *in, watch_screen *s) {
  const cli_run_metrics *m = in->m;
  if (!m->n_train) return;
  const cli_train_point *p = &m->train[m->n_train - 1];
  double lowest = NAN;
  for (size_t i = 0; i < m->n_train; i++)
    if (isfinite(m->train[i].loss) && !(m->train[i].loss >= lowest)) lowest = m->train[i].loss;
  char a[32], b[32], c[32], d[32];
  next_line(s);
  add(s, LABEL "loss %s (lowest %s)  lr %s  grad norm %s", "train",
      ws_num("%.4f", p->loss, a, sizeof a), ws_num("%.4f", lowest, b, sizeof b),
      ws_num("%.2e", p->lr, c, sizeof c), ws_num("%.3f", p->grad_norm, d, sizeof d));
  char what[96];
  snprintf(what, sizeof what, "train loss, steps %lld-%lld", (long long)m->train[0].step,
           (long long)p->step);
  spark_line(in, s, &m->train[0].loss, m->n_train, sizeof *m->train, what);
}

static void eval(const watch_input *in, watch_screen *s) {
  const cli_run_metrics *m = in->m;
  next_line(s);
  add(s, LABEL, "eval");
  if (!m->n_eval) {
    add(s, "no evaluation yet");
    return;
  }
  const cli_eval_point *e = &m->eval[m->n_eval - 1];
  char a[32], b[32], c[32], d[32];
  add(s, "step %lld: loss %s  perplexity %s  accuracy %s%%  (amino-acid baseline %s)",
      (long long)e->step, ws_num("%.4f", e->loss, a, sizeof a),
      ws_num("%.3f", e->perplexity, b, sizeof b), ws_num("%.1f", 100.0 * e->accuracy, c, sizeof c),
      ws_num("%.3f", e->unigram_perplexity, d, sizeof d));
  char what[64];
  snprintf(what, sizeof what, "eval loss, %zu evaluation%s", m->n_eval, m->n_eval > 1 ? "s" : "");
  spark_line(in, s, &m->eval[0].loss, m->n_eval, sizeof *m->eval, what);
}

static void speed(const watch_input *in, watch_screen *s) {
  const cli_run_metrics *m = in->m;
  if (!m->n_train) return;
  const cli_train_point *p = &m->train[m->n_train - 1];
  char a[32], b[32], c[32], d[32];
  next_line(s);
  const double mfu = p->mfu > 0 ? 100.0 * p->mfu : NAN; /* 0: not measured */
  add(s, LABEL "%s tok/s  MFU %s%%  %s ms/step  padding %s%%", "speed",
      ws_si(p->tokens_per_s, a, sizeof a), ws_num("%.1f", mfu, b, sizeof b),
      ws_num("%.1f", p->step_ms, c, sizeof c), ws_num("%.1f", 100.0 * p->padding, d, sizeof d));
  spark_line(in, s, &m->train[0].tokens_per_s, m->n_train, sizeof *m->train, "tokens/s");
  /* mixed precision: only when something happened */
  const int scaled = isfinite(p->loss_scale) && p->loss_scale != 1;
  const int overflowed = p->overflows > 0 || p->skipped > 0;
  if (scaled || overflowed) {
    next_line(s);
    add(s, LABEL "loss scale %s  overflows %s  skipped %s", "scaling",
        ws_num("%.0f", p->loss_scale, a, sizeof a), ws_num("%.0f", p->overflows, b, sizeof b),
        ws_num("%.0f", p->skipped, c, sizeof c));
  }
}

static void memory(const watch_input *in, watch_screen *s) {
  const cli_run_metrics *m = in->m;
  if (!m->n_train) return;
  const cli_train_point *p = &m->train[m->n_train - 1];
  char a[32], b[32];
  next_line(s);
  add(s, LABEL "RSS %s MiB", "memory", ws_num("%.0f", p->rss_mib, a, sizeof a));
  if (isfinite(p->device_mem_mib)) {
    add(s, "  device %s", ws_num("%.0f", p->device_mem_mib, a, sizeof a));
    if (isfinite(p->device_mem_total_mib) && p->device_mem_total_mib > 0)
      add(s, "/%s MiB (%.0f%%)", ws_num("%.0f", p->device_mem_total_mib, b, sizeof b),
          100.0 * p->device_mem_mib / p->device_mem_total_mib);
    else
      add(s, " MiB");
  }
  if (isfinite(p->device_util)) add(s, "  device util %.0f%%", p->device_util);
}

/* A figure NVML did not give (-1) prints as "-". */
static const char *gpu_num(const char *fmt, double v, char *buf, size_t cap) {
  return ws_num(fmt, v < 0 ? NAN : v, buf, cap);
}

static void gpus(const watch_input *in, watch_screen *s) {
  const watch_gpus *g = in->gpus;
  next_line(s);
  if (!g) {
    add(s, LABEL "not sampled", "GPUs:");
    return;
  }
  if (g->status != ESMT_OK) { /* no NVML or no NVIDIA GPU: the normal answer, not an error */
    add(s, LABEL "%s (%s)", "GPUs:", g->status == ESMT_ERR_UNSUPPORTED ? "none" : "error", g->why);
    return;
  }
  add(s, LABEL "%d (NVML, live)", "GPUs:", g->count);
  next_line(s);
  add(s, LABEL "%3s  %-28s %5s  %-17s %6s %7s", "", "GPU", "name", "util", "memory", "temp",
      "power");
  for (int i = 0; i < g->count && i < WATCH_MAX_GPUS; i++) {
    const esmt_gpu_sample *x = &g->s[i];
    char u[32], mem[64], t[32], w[32];
    gpu_num("%.0f%%", x->util_percent, u, sizeof u);
    if (x->memory_total_bytes)
      snprintf(mem, sizeof mem, "%.1f/%.1f GiB", (double)x->memory_used_bytes / 1073741824.0,
               (double)x->memory_total_bytes / 1073741824.0);
    else
      snprintf(mem, sizeof mem, "-");
    gpu_num("%.0f C", x->temperature_c, t, sizeof t);
    gpu_num("%.0f W", x->power_w, w, sizeof w);
    next_line(s);
    add(s, LABEL "%3d  %-28.28s %5s  %-17s %6s %7s", "", x->index, x->name, u, mem, t, w);
  }
  if (g->count > WATCH_MAX_GPUS) {
    next_line(s);
    add(s, LABEL "(%d more)", "", g->count - WATCH_MAX_GPUS);
  }
}

void watch_screen_render(const watch_input *in, watch_screen *out) {
  out->n = 0;
  header(in, out);
  progress(in, out);
  train(in, out);
  eval(in, out);
  speed(in, out);
  memory(in, out);
  gpus(in, out);
}

/* ---- --plain ---- */

void watch_plain_train(const cli_train_point *p, char *buf, size_t cap) {
  char a[32], b[32], c[32], d[32], e[32], f[32];
  if (!cap) return;
  buf[0] = '\0';
  catf(buf, cap, "step %lld", (long long)p->step);
  if (isfinite(p->max_steps) && p->max_steps > 0) catf(buf, cap, "/%.0f", p->max_steps);
  catf(buf, cap, "  loss %s  lr %s  grad %s  tok/s %s  MFU %s%%  %s ms/step",
       ws_num("%.4f", p->loss, a, sizeof a), ws_num("%.1e", p->lr, b, sizeof b),
       ws_num("%.3f", p->grad_norm, c, sizeof c), ws_si(p->tokens_per_s, d, sizeof d),
       ws_num("%.1f", 100.0 * p->mfu, e, sizeof e), ws_num("%.1f", p->step_ms, f, sizeof f));
  if (isfinite(eta_of(p))) catf(buf, cap, "  ETA %s", ws_duration(eta_of(p), a, sizeof a));
  if (isfinite(p->device_mem_mib))
    catf(buf, cap, "  device %s MiB", ws_num("%.0f", p->device_mem_mib, a, sizeof a));
}

void watch_plain_eval(const cli_eval_point *p, char *buf, size_t cap) {
  char a[32], b[32], c[32], d[32];
  snprintf(buf, cap, "eval step %lld  loss %s  ppl %s  acc %s%%  baseline ppl %s",
           (long long)p->step, ws_num("%.4f", p->loss, a, sizeof a),
           ws_num("%.3f", p->perplexity, b, sizeof b),
           ws_num("%.1f", 100.0 * p->accuracy, c, sizeof c),
           ws_num("%.3f", p->unigram_perplexity, d, sizeof d));
}
