/* SPDX-License-Identifier: MIT */
/* `esmtrain-example plot RUN... -o FILE.png|FILE.svg`: the curves of one
 * or more runs (loss, perplexity, learning rate, throughput, memory) from
 * their metrics.jsonl, drawn with cairo (plot_render.c) into a new file
 * that appears whole or not at all. Without cairo at build time the
 * command only says so. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define PLOT_PREFIX "esmtrain-example: plot: "

static void usage(FILE *f) {
  fprintf(f,
      "usage: esmtrain-example plot RUN... -o FILE.png|FILE.svg [options]\n"
      "RUN  a run directory of `train` (its metrics.jsonl is read) or a metrics.jsonl file;\n"
      "     several runs are overlaid, one colour each\n"
      "Panels: loss (train, validation, the amino-acid frequency baseline dashed), validation\n"
      "perplexity, learning rate, throughput (tokens/s; MFU on the right axis) and memory\n"
      "(host RSS; device memory used and total on GPU runs).\n"
      "  -o, --output FILE    the image (a new file, written whole or not at all); an\n"
      "                       existing one is refused unless --force\n"
      "  --format png|svg     (default: from FILE's extension)\n"
      "  --width N --height N pixels, or points for SVG (default 1600 x 1000)\n"
      "  --x steps|tokens     the x axis: optimizer steps or tokens trained (default steps)\n"
      "  --title TEXT         (default: the run's name, or the number of runs)\n"
      "  --smooth N           moving average of N train losses drawn over the raw ones, which\n"
      "                       stay faint; 0 off (default: about 1/50 of the points)\n"
      "  --label A,B,...      legend names, one per RUN (default: the run directories' names)\n"
      "  --log-y              logarithmic loss and perplexity axes\n"
      "  --force              replace FILE if it is an earlier figure of `plot` (never\n"
      "                       another file); FILE may not be inside a run, a checkpoint or\n"
      "                       a dataset, nor one of the RUNs\n"
#ifndef ESMT_HAVE_CAIRO
      "(this build has no cairo: install libcairo2-dev and rebuild to use `plot`)\n"
#endif
  );
}

#ifdef ESMT_HAVE_CAIRO
#include <libgen.h>

#include "plot_data.h"

typedef struct plot_args {
  const char *runs[PLOT_MAX_RUNS + 1];
  int n_runs;
  const char *out, *format, *title, *labels, *x;
  long long width, height, smooth;
  int log_y, force;
} plot_args;

enum { F_OUT, F_OUTPUT, F_FORMAT, F_TITLE, F_LABEL, F_X, F_WIDTH, F_HEIGHT, F_SMOOTH, N_FLAGS };
static const char *const k_flags[N_FLAGS] = {"-o", "--output", "--format", "--title", "--label",
                                             "--x", "--width", "--height", "--smooth"};

/* The value of flag k into *a: 0, or 1 after a bad number (printed). */
static int set_flag(plot_args *a, int k, const char *v) {
  const char *const cmd = "esmtrain-example: plot";
  switch (k) {
    case F_OUT: case F_OUTPUT: a->out = v; break;
    case F_FORMAT: a->format = v; break;
    case F_TITLE: a->title = v; break;
    case F_LABEL: a->labels = v; break;
    case F_X: a->x = v; break;
    case F_WIDTH: return !cli_int_arg(cmd, "--width", v, 200, 16000, &a->width);
    case F_HEIGHT: return !cli_int_arg(cmd, "--height", v, 150, 16000, &a->height);
    default: return !cli_int_arg(cmd, "--smooth", v, 0, 1 << 30, &a->smooth);
  }
  return 0;
}

/* argv[*i] as a flag with a value ("--flag V" or "--flag=V"): 1 taken,
 * 0 not one of them, -1 a usage error (printed). */
static int value_flag(plot_args *a, int argc, char **argv, int *i) {
  for (int k = 0; k < N_FLAGS; k++) {
    const char *v = NULL;
    if (!cli_flag_value(k_flags[k], argc, argv, i, &v)) continue;
    if (!v) {
      fprintf(stderr, PLOT_PREFIX "%s needs a value (try --help)\n", k_flags[k]);
      return -1;
    }
    return set_flag(a, k, v) ? -1 : 1;
  }
  return 0;
}

/* argv into *a: 0, 1 after --help, 2 after a usage error (printed). */
static int parse(int argc, char **argv, plot_args *a) {
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return usage(stdout), 1;
    const int taken = value_flag(a, argc, argv, &i);
    if (taken < 0) return 2;
    if (taken) continue;
    if (!strcmp(arg, "--log-y")) a->log_y = 1;
    else if (!strcmp(arg, "--force")) a->force = 1;
    else if (arg[0] == '-' && arg[1]) {
      fprintf(stderr, PLOT_PREFIX "unknown option '%s'%s (try --help)\n", arg,
              cli_option_hint(arg, usage));
      return 2;
    } else if (a->n_runs < PLOT_MAX_RUNS) a->runs[a->n_runs++] = arg;
    else {
      fprintf(stderr, PLOT_PREFIX "at most %d runs in one figure\n", PLOT_MAX_RUNS);
      return 2;
    }
  }
  if (!a->n_runs || !a->out) {
    fprintf(stderr, PLOT_PREFIX "%s\n", a->n_runs ? "no output (-o FILE.png|FILE.svg)" : "no RUN");
    usage(stderr);
    return 2;
  }
  return 0;
}

/* PNG or SVG, from --format or the file's extension: 0 png, 1 svg, -1 unknown. */
static int output_kind(const plot_args *a) {
  const char *f = a->format;
  if (!f) {
    const char *dot = strrchr(a->out, '.');
    f = dot && !strchr(dot, '/') ? dot + 1 : "";
  }
  return !strcasecmp(f, "png") ? 0 : !strcasecmp(f, "svg") ? 1 : -1;
}

/* --x, --format and --label against the rest: 0, or 2 after saying why. */
static int check(const plot_args *a, int *x_tokens, int *svg) {
  if (a->x && strcmp(a->x, "steps") && strcmp(a->x, "tokens")) {
    fprintf(stderr, PLOT_PREFIX "--x '%s': steps or tokens\n", a->x);
    return 2;
  }
  *x_tokens = a->x && !strcmp(a->x, "tokens");
  *svg = output_kind(a);
  if (*svg < 0) {
    fprintf(stderr, PLOT_PREFIX "%s: the format follows the extension, .png or .svg (or give "
            "--format png|svg)\n", a->format ? a->format : a->out);
    return 2;
  }
  int n = 1;
  for (const char *p = a->labels; p && *p; p++) n += *p == ',';
  if (a->labels && n != a->n_runs) {
    fprintf(stderr, PLOT_PREFIX "--label has %d name%s for %d run%s\n", n, n == 1 ? "" : "s",
            a->n_runs, a->n_runs == 1 ? "" : "s");
    return 2;
  }
  return 0;
}

/* The legend name of a run: its --label, else the run directory's name. */
static void run_name(const plot_args *a, int k, const char *dir, char *name, size_t cap) {
  if (a->labels) {
    const char *p = a->labels;
    for (int i = 0; i < k; i++) p = strchr(p, ',') + 1;
    const size_t len = strcspn(p, ",");
    snprintf(name, cap, "%.*s", (int)len, p);
    return;
  }
  char *real = realpath(dir, NULL), *copy = strdup(real ? real : dir);
  snprintf(name, cap, "%s", copy ? basename(copy) : dir);
  free(copy);
  free(real);
}

/* Read RUN's metrics (RUN a run directory or the metrics file itself). */
static int load_run(const plot_args *a, int k, plot_run *r) {
  const char *arg = a->runs[k];
  char path[4096], dir[4096], err[512];
  struct stat sb;
  if (stat(arg, &sb) != 0) {
    fprintf(stderr, PLOT_PREFIX "%s: %s (a run directory or its metrics.jsonl)\n", arg,
            strerror(errno));
    return 1;
  }
  const int is_dir = S_ISDIR(sb.st_mode);
  snprintf(path, sizeof path, is_dir ? "%s/metrics.jsonl" : "%s", arg);
  snprintf(dir, sizeof dir, "%s", arg);
  run_name(a, k, is_dir ? dir : dirname(dir), r->name, sizeof r->name);
  if (cli_run_metrics_load(&r->m, path, err, sizeof err) != 0) {
    fprintf(stderr, PLOT_PREFIX "%s%s\n", err,
            is_dir && access(path, F_OK) ? " (not a run directory of `train`?)" : "");
    return 1;
  }
  if (r->m.bad_lines)
    fprintf(stderr, PLOT_PREFIX "warning: %s: %zu line%s skipped (not a train or eval record)\n",
            path, r->m.bad_lines, r->m.bad_lines == 1 ? "" : "s");
  if (!r->m.n_train && !r->m.n_eval)
    fprintf(stderr, PLOT_PREFIX "warning: %s has no train or eval record yet\n", path);
  return 0;
}

/* The output is none of the inputs (a RUN, its metrics.jsonl: also a hard
 * link to it) and in no run, checkpoint or dataset: 0, or 1 after saying why. */
static int output_check(const plot_args *a) {
  char metrics[PLOT_MAX_RUNS][4096];
  const char *inputs[2 * PLOT_MAX_RUNS];
  for (int k = 0; k < a->n_runs; k++) {
    struct stat sb;
    const int is_dir = stat(a->runs[k], &sb) == 0 && S_ISDIR(sb.st_mode);
    snprintf(metrics[k], sizeof metrics[k], is_dir ? "%s/metrics.jsonl" : "%s", a->runs[k]);
    inputs[2 * k] = a->runs[k];
    inputs[2 * k + 1] = metrics[k];
  }
  return cli_output_path_check("plot", a->out, inputs, 2 * a->n_runs);
}

/* The figure into a new output file (esmt_output_file): an existing one
 * only with --force, and only when it is an earlier figure of `plot`. A
 * stop signal ends the write and removes the temporary. 0, or the exit
 * status after saying why. */
static int write_figure(const plot_figure *fig, const char *out, int force) {
  esmt_output_file *of = NULL;
  esmt_status st = esmt_output_file_begin(out, force ? plot_is_figure : NULL, NULL, &of);
  if (st) {
    struct stat sb;
    const int plain = lstat(out, &sb) == 0 && S_ISREG(sb.st_mode);
    fprintf(stderr, PLOT_PREFIX "%s%s\n", esmt_last_error(),
            st == ESMT_ERR_STATE && plain && !force ? " (--force replaces an earlier figure of "
            "`plot`)" : st == ESMT_ERR_STATE && plain ? ": remove it or choose another name" : "");
    return 1;
  }
  char err[512] = "";
  const int fd = dup(esmt_output_file_fd(of));
  FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  int rc = !f;
  if (rc) snprintf(err, sizeof err, "%s", strerror(errno));
  plot_signer signer = {.out = f, .svg = fig->svg, .stopped = cli_signal_caught};
  if (!rc) rc = plot_render(fig, &signer, err, sizeof err) != 0;
  if (!rc && fflush(f) != 0) rc = 1, snprintf(err, sizeof err, "%s", strerror(errno));
  if (f && fclose(f) != 0 && !rc) rc = 1, snprintf(err, sizeof err, "%s", strerror(errno));
  if (!f && fd >= 0) close(fd);
  const int sig = cli_signal_caught();
  if (sig) {
    esmt_output_file_abort(of);
    fprintf(stderr, PLOT_PREFIX "stopped by %s: %s was not written (its temporary file was "
            "removed)\n", cli_signal_name(sig), out);
    return 128 + sig;
  }
  if (rc) {
    esmt_output_file_abort(of);
    fprintf(stderr, PLOT_PREFIX "writing %s: %s\n", out, err);
    return 1;
  }
  if (esmt_output_file_commit(of)) {
    fprintf(stderr, PLOT_PREFIX "%s\n", esmt_last_error());
    return 1;
  }
  return 0;
}

/* A stop signal that came before the figure was begun. */
static int stopped(const char *out) {
  const int sig = cli_signal_caught();
  if (sig)
    fprintf(stderr, PLOT_PREFIX "stopped by %s: %s was not written\n", cli_signal_name(sig), out);
  return sig ? 128 + sig : 0;
}

static int plot_runs(const plot_args *a, plot_run *runs, int x_tokens, int svg) {
  plot_options o = {x_tokens, (int)a->smooth, a->log_y};
  plot_figure *fig = calloc(1, sizeof *fig);
  plot_pool pool = {0};
  int rc = 0;
  for (int k = 0; k < a->n_runs && !rc; k++)
    if (!(rc = load_run(a, k, &runs[k]))) rc = stopped(a->out);
  if (!rc && !fig) fprintf(stderr, PLOT_PREFIX "out of memory\n"), rc = 1;
  if (!rc && plot_build(fig, &pool, runs, a->n_runs, &o))
    fprintf(stderr, PLOT_PREFIX "out of memory\n"), rc = 1;
  if (!rc && !(rc = stopped(a->out))) {
    fig->width = (int)a->width;
    fig->height = (int)a->height;
    fig->svg = svg;
    if (a->title) snprintf(fig->title, sizeof fig->title, "%s", a->title);
    else if (a->n_runs == 1)
      snprintf(fig->title, sizeof fig->title, "esmtrain run %s", runs[0].name);
    else snprintf(fig->title, sizeof fig->title, "esmtrain, %d runs", a->n_runs);
    rc = write_figure(fig, a->out, a->force);
    if (!rc)
      fprintf(stderr, PLOT_PREFIX "wrote %s (%s, %dx%d, %d run%s)\n", a->out, svg ? "SVG" : "PNG",
              fig->width, fig->height, a->n_runs, a->n_runs == 1 ? "" : "s");
  }
  plot_pool_free(&pool);
  free(fig);
  return rc;
}

int cmd_plot(int argc, char **argv) {
  plot_args a = {.width = 1600, .height = 1000, .smooth = -1};
  int rc = parse(argc, argv, &a), x_tokens = 0, svg = 0;
  if (rc) return rc == 1 ? 0 : rc;
  if ((rc = check(&a, &x_tokens, &svg))) return rc;
  if (output_check(&a)) return 1;
  cli_signals_catch(NULL); /* Ctrl-C and kill end a plot, leaving nothing behind */
  plot_run *runs = calloc((size_t)a.n_runs, sizeof *runs);
  if (!runs) {
    fprintf(stderr, PLOT_PREFIX "out of memory\n");
    return 1;
  }
  rc = plot_runs(&a, runs, x_tokens, svg);
  for (int k = 0; k < a.n_runs; k++) cli_run_metrics_free(&runs[k].m);
  free(runs);
  return rc;
}

#else /* no cairo */

int cmd_plot(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout), 0;
  fprintf(stderr, PLOT_PREFIX "this build has no cairo (install libcairo2-dev and rebuild)\n");
  return 1;
}

#endif
