/* SPDX-License-Identifier: MIT */
/* `esmtrain-example watch RUN`: a live view of a run, redrawn in place on a
 * terminal (watch_term.c), else one plain line per new record. It only
 * reads the run: RUN/metrics.jsonl as it grows (a resume replaces it),
 * RUN/run.lock for the writer, and the GPUs through NVML. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common/run_metrics.h"
#include "watch_screen.h"
#include "watch_term.h"

#define CMD "esmtrain-example watch"

typedef struct watch_opts {
  const char *run;
  double interval;
  int plain, once, exit_when_done;
} watch_opts;

/* Everything one look at the run gives. */
typedef struct watch_ctx {
  const watch_opts *o;
  char path[PATH_MAX + 32]; /* RUN/metrics.jsonl */
  cli_run_metrics m;
  char err[1024];
  watch_gpus gpus;
  watch_input in;
  int reset, added; /* of the last poll */
} watch_ctx;

static void usage(FILE *f) {
  fprintf(f,
          "usage: esmtrain-example watch [--interval S] [--plain] [--once] [--exit-when-done] RUN\n"
          "A live view of the training run in directory RUN (running or finished): progress\n"
          "and ETA, train and eval loss with sparklines, perplexity against the amino-acid\n"
          "baseline, tokens/s, MFU, memory, and this machine's GPUs (NVML, when present).\n"
          "It follows RUN/metrics.jsonl as it grows, through resumes. q (or Ctrl-C) quits.\n"
          "\n"
          "  --interval S       seconds between looks at the run (default 1)\n"
          "  --plain            no screen: one line per new train/eval record (also when\n"
          "                     standard output is not a terminal)\n"
          "  --once             print the summary once and exit\n"
          "  --exit-when-done   exit once the run is no longer running and nothing new came\n");
}

/* -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, watch_opts *o) {
  memset(o, 0, sizeof *o);
  o->interval = 1.0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (cli_flag_value("--interval", argc, argv, &i, &v)) {
      if (!cli_double_arg(CMD, "--interval", v, 0.05, 86400, &o->interval)) return 2;
    } else if (!strcmp(a, "--plain")) {
      o->plain = 1;
    } else if (!strcmp(a, "--once")) {
      o->once = 1;
    } else if (!strcmp(a, "--exit-when-done")) {
      o->exit_when_done = 1;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "%s: unknown option '%s'%s (try --help)\n", CMD, a, cli_option_hint(a, usage));
      return 2;
    } else if (o->run) {
      fprintf(stderr, "%s: one run directory only ('%s' and '%s')\n", CMD, o->run, a);
      return 2;
    } else {
      o->run = a;
    }
  }
  if (!o->run) {
    fprintf(stderr, "%s: which run? (esmtrain-example watch RUN; --help)\n", CMD);
    return 2;
  }
  return -1;
}

/* 1 when the locale's characters are UTF-8 (block characters can show);
 * the process's locale is left as it was. */
static int locale_utf8(void) {
  const char *cur = setlocale(LC_CTYPE, NULL);
  char saved[256];
  snprintf(saved, sizeof saved, "%s", cur ? cur : "C");
  int utf8 = 0;
  if (setlocale(LC_CTYPE, "")) {
    const char *cs = nl_langinfo(CODESET);
    utf8 = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
  }
  setlocale(LC_CTYPE, saved);
  return utf8;
}

/* Seconds since the file of `sb` was last written. */
static double age_of(const struct stat *sb) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const double d = (double)(now.tv_sec - sb->st_mtim.tv_sec) +
                   (double)(now.tv_nsec - sb->st_mtim.tv_nsec) * 1e-9;
  return d < 0 ? 0 : d;
}

/* One look at the run: new metrics, its writer, the GPUs. Returns 0, or -1
 * when metrics.jsonl could not be read (the reason in c->err). */
static int look(watch_ctx *c, int gpus) {
  c->added = cli_run_metrics_poll(&c->m, c->path, &c->reset, c->err, sizeof c->err);
  c->in.error = c->added < 0 ? c->err : NULL;
  if (c->reset) c->in.restarts++;
  struct stat sb;
  c->in.have_file = stat(c->path, &sb) == 0;
  c->in.age_s = c->in.have_file ? age_of(&sb) : NAN;
  watch_run_state_read(c->o->run, &c->in.state);
  if (gpus) watch_gpus_sample(&c->gpus);
  return c->added < 0 ? -1 : 0;
}

/* --exit-when-done: no writer and nothing new in the last look. */
static int done(const watch_ctx *c) {
  return c->o->exit_when_done && !c->in.state.running && c->added <= 0 && !c->reset;
}

/* The exit status for the stop signal caught: Ctrl-C is a normal way out. */
static int signal_status(void) {
  const int sig = wt_signal();
  return sig == SIGINT || sig == SIGPIPE ? 0 : 128 + sig;
}

static void print_screen(watch_ctx *c) {
  static watch_screen s;
  watch_screen_render(&c->in, &s);
  for (int i = 0; i < s.n; i++) printf("%s\n", s.line[i]);
}

/* ---- --once ---- */

static int run_once(watch_ctx *c) {
  const int rc = look(c, 1);
  print_screen(c);
  if (rc < 0) fprintf(stderr, "esmtrain-example: watch: %s\n", c->err);
  return rc < 0 ? 1 : 0;
}

/* ---- --plain: one line per new record ---- */

typedef struct plain_pos {
  size_t train, eval;           /* records printed (indices into the arrays) */
  int64_t last_train, last_eval; /* their last steps */
} plain_pos;

/* The new records in file order: a step's train line before its eval. */
static void print_new(const cli_run_metrics *m, plain_pos *p) {
  char line[1024];
  while (p->train < m->n_train || p->eval < m->n_eval) {
    const int take_train =
        p->eval >= m->n_eval ||
        (p->train < m->n_train && m->train[p->train].step <= m->eval[p->eval].step);
    if (take_train) {
      watch_plain_train(&m->train[p->train], line, sizeof line);
      p->last_train = m->train[p->train++].step;
    } else {
      watch_plain_eval(&m->eval[p->eval], line, sizeof line);
      p->last_eval = m->eval[p->eval++].step;
    }
    printf("%s\n", line);
  }
}

/* A resume replaced the file: what it holds up to the steps already shown
 * is not shown again; everything appended later is. */
static void after_reset(const watch_ctx *c, plain_pos *p) {
  const cli_run_metrics *m = &c->m;
  p->train = p->eval = 0;
  while (p->train < m->n_train && m->train[p->train].step <= p->last_train) p->train++;
  while (p->eval < m->n_eval && m->eval[p->eval].step <= p->last_eval) p->eval++;
  printf("-- %s was replaced (the run was resumed); it now ends at step %lld --\n", c->path,
         m->n_train ? (long long)m->train[m->n_train - 1].step : 0LL);
}

static int run_plain(watch_ctx *c) {
  plain_pos pos = {0, 0, INT64_MIN, INT64_MIN};
  char last_err[sizeof c->err] = "";
  int waiting_said = 0, damaged_said = 0;
  for (;;) {
    if (look(c, 0) < 0) {
      if (strcmp(last_err, c->err)) fprintf(stderr, "esmtrain-example: watch: %s\n", c->err);
      snprintf(last_err, sizeof last_err, "%s", c->err);
    } else {
      last_err[0] = '\0';
    }
    if (!c->in.have_file && !waiting_said) fprintf(stderr, "waiting for %s\n", c->path);
    waiting_said |= !c->in.have_file;
    if (c->in.state.damaged[0] && !damaged_said)
      fprintf(stderr, "esmtrain-example: watch: %s/run.lock is damaged (%s): no writer can be "
              "checked; the run is taken as not running\n", c->o->run, c->in.state.damaged);
    damaged_said |= c->in.state.damaged[0] != '\0';
    if (c->reset) after_reset(c, &pos);
    print_new(&c->m, &pos);
    if (fflush(stdout) != 0 || ferror(stdout)) return 0; /* reported by cli_stdout_finish */
    if (done(c)) return 0;
    switch (wt_wait(wt_now() + c->o->interval, 0)) {
      case WT_SIGNAL: return signal_status();
      case WT_CLOSED: return 0; /* the reader went away, as `| head` does: nothing lost */
      default: break;
    }
  }
}

/* ---- the screen ---- */

static void redraw(watch_ctx *c) {
  static watch_screen s;
  int rows, cols;
  wt_size(&rows, &cols);
  c->in.width = cols;
  watch_screen_render(&c->in, &s);
  wt_draw(&s, rows, cols);
}

static int run_screen(watch_ctx *c) {
  const int keys = isatty(STDIN_FILENO);
  c->in.hint = keys ? "(q: quit)" : "(Ctrl-C: quit)";
  wt_enter(keys);
  double next = 0;
  int status = -1;
  while (status < 0) {
    if (wt_now() >= next) {
      look(c, 1);
      next = wt_now() + c->o->interval;
      if (done(c)) break;
    }
    redraw(c);
    switch (wt_wait(next, keys)) {
      case WT_QUIT: case WT_CLOSED: status = 0; break;
      case WT_SIGNAL: status = signal_status(); break;
      case WT_STOP: wt_suspend(keys); break;
      case WT_RESIZE: wt_enter(keys); break; /* also back from a stop */
      default: break;
    }
  }
  wt_leave();
  if (status < 0) { /* the run ended: its last state stays on the normal screen */
    c->in.hint = NULL;
    print_screen(c);
    status = 0;
  }
  return status;
}

int cmd_watch(int argc, char **argv) {
  watch_opts o;
  const int rc = parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  char run[PATH_MAX];
  snprintf(run, sizeof run, "%s", o.run);
  for (size_t n = strlen(run); n > 1 && run[n - 1] == '/';) run[--n] = '\0'; /* "RUN/" */
  o.run = run;
  struct stat sb;
  const int missing = stat(o.run, &sb) != 0 && errno == ENOENT;
  if (missing || stat(o.run, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    fprintf(stderr, "esmtrain-example: watch: %s: not a directory%s\n", o.run,
            missing ? " (it does not exist)" : "");
    return 1;
  }
  static watch_ctx c; /* large (the GPU samples); zeroed */
  c.o = &o;
  snprintf(c.path, sizeof c.path, "%s/metrics.jsonl", o.run);
  c.in.run_dir = o.run;
  c.in.m = &c.m;
  c.in.gpus = &c.gpus;
  c.in.age_s = NAN;
  c.in.utf8 = locale_utf8();
  int status;
  if (o.once) {
    status = run_once(&c);
  } else {
    const int screen = !o.plain && isatty(STDOUT_FILENO);
    if (wt_signals_init(screen) != 0) {
      fprintf(stderr, "esmtrain-example: watch: cannot create a pipe: %s\n", strerror(errno));
      return 1;
    }
    status = screen ? run_screen(&c) : run_plain(&c);
  }
  cli_run_metrics_free(&c.m);
  return status;
}
