/* SPDX-License-Identifier: MIT */
/* `esmtrain-example train`: the main job. Trains an ESM-2 model on a
 * dataset from `ingest`, evaluating before and after against an amino-acid
 * frequency baseline, writing checkpoints and a log (the library writes
 * metrics.jsonl and the TensorBoard event files into the run directory). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"

typedef struct run_io {
  FILE *log;
  int tty;
  int64_t max_steps;
  int quiet;         /* a data-parallel rank other than 0: errors only */
  /* lines for the log said before it opens (the run is taken, after a
   * resume and its warnings): written into it first */
  char early[8192];
  size_t early_len;
} run_io;

static esmt_trainer *volatile g_trainer;  /* set while esmt_trainer_run runs */
static volatile sig_atomic_t g_trained;   /* esmt_trainer_run has returned */

/* A stop signal (cli_signals_catch): while training, stop after this
 * update and save (async-signal-safe); before training starts there is
 * nothing to save, so end now with a message; afterwards it is only
 * remembered (the final checkpoint is written already). */
static void on_signal(int sig) {
  if (g_trainer) {
    esmt_trainer_request_stop(g_trainer);
    return;
  }
  if (g_trained) return;
  char msg[320] = "esmtrain-example: train: stopped by signal ", num[8];
  int n = 0, s = sig;
  do num[n++] = (char)('0' + s % 10); while ((s /= 10) && n < 7);
  size_t len = strlen(msg);
  while (n > 0) msg[len++] = num[--n];
  const char *parts[] = {", ", cli_signal_name(sig),
                         ", before training began: nothing to save, no checkpoint written\n"};
  for (int i = 0; i < 3; i++) {
    size_t k = strlen(parts[i]);
    if (len + k >= sizeof msg) break;
    memcpy(msg + len, parts[i], k);
    len += k;
  }
  if (write(STDERR_FILENO, msg, len) < 0) { /* nothing else can be done here */ }
  _exit(128 + sig);
}

static void stamp(char *buf, size_t cap) {
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
}

/* A line to stdout (unless the progress bar owns the terminal) and the log. */
/* RUN/train.log for appending; *created is 1 when this call made it. A
 * symbolic link there is not followed. NULL (no log) when it cannot open. */
static FILE *open_log(const char *path, int *created) {
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  *created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "[warn] train: cannot open %s: %s (no log file)\n", path, strerror(errno));
    return NULL;
  }
  FILE *f = fdopen(fd, "a");
  if (!f) close(fd);
  return f;
}

static void say(run_io *io, int to_stdout, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(run_io *io, int to_stdout, const char *fmt, ...) {
  char msg[1024], ts[32];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  stamp(ts, sizeof ts);
  if (io->log) { fprintf(io->log, "%s %s\n", ts, msg); fflush(io->log); }
  else if (io->early_len < sizeof io->early)
    io->early_len += (size_t)snprintf(io->early + io->early_len, sizeof io->early - io->early_len,
                                      "%s %s\n", ts, msg);
  if (!to_stdout || io->quiet) return;
  if (io->tty) printf("\r\033[K%s\n", msg);
  else printf("%s %s\n", ts, msg);
  fflush(stdout);
}

/* What the run samples and what validation holds, for the log (the library
 * decides the same from DATA/manifest.json's "clusters"; docs/formats.md). */
static void describe_sampling(const char *data, const char *want, char *out, size_t cap) {
  char path[4200];
  snprintf(path, sizeof path, "%s/manifest.json", data);
  json_t *m = json_load_file(path, 0, NULL);
  json_t *cl = json_object_get(m, "clusters");
  const json_int_t tc = json_integer_value(json_object_get(json_object_get(cl, "train"), "clusters"));
  const json_int_t vc = json_integer_value(json_object_get(json_object_get(cl, "valid"), "clusters"));
  if (tc > 0 && strcmp(want, "sequence"))
    snprintf(out, cap, "sampling a cluster, then a member (%lld clusters); validation holds out "
             "%lld whole clusters", (long long)tc, (long long)vc);
  else if (tc > 0)
    snprintf(out, cap, "sampling every protein (data.sampling: sequence; the dataset has %lld "
             "clusters); validation holds out %lld whole clusters", (long long)tc, (long long)vc);
  else
    snprintf(out, cap, "sampling every protein; validation is split by record and may hold "
             "near-duplicates of training proteins (ingest --clusters holds out whole clusters)");
  json_decref(m);
}

/* The library's messages: on stderr, and warnings also in the run's log
 * (a resume's changed settings among them). */
static void log_to_run(void *user, esmt_log_level level, const char *message) {
  run_io *io = user;
  cli_log_stderr(NULL, level, message);
  if (level >= ESMT_LOG_WARN) say(io, 0, "[warn] %s", message); /* kept until the log opens */
}

static double rss_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

static void on_metrics(void *user, const esmt_train_metrics *t, const esmt_eval_metrics *e) {
  run_io *io = user;
  if (t) {
    char line[640], dev[96] = "";
    if (t->device_memory_total_mib > 0) /* GPU backends: the device, as the trainer saw it */
      snprintf(dev, sizeof dev, " | GPU %.0f/%.0f MiB", t->device_memory_used_mib,
               t->device_memory_total_mib);
    if (t->device_util_percent >= 0)
      snprintf(dev + strlen(dev), sizeof dev - strlen(dev), " %.0f%% busy",
               t->device_util_percent);
    snprintf(line, sizeof line, "step %lld/%lld loss %.4f lr %.2e | %.0f tok/s MFU %.0f%% pad %.0f%% | "
             "%.0f ms/step | ETA %.0fs | RSS %.0f MiB%s%s", (long long)t->step,
             (long long)io->max_steps, t->loss, t->lr, t->tokens_per_s, 100 * t->mfu,
             100 * t->padding_fraction, t->step_ms,
             t->eta_s, rss_mib(), dev,
             t->overflows ? " | fp16 overflows skipped" : t->skipped ? " | skipped updates!" : "");
    if (io->quiet) {
    } else if (io->tty) {
      printf("\r\033[K%s", line);
      fflush(stdout);
      say(io, 0, "%s", line);
    } else {
      say(io, 1, "%s", line);
    }
  }
  if (e) {
    say(io, 1, "eval step %lld: loss %.4f, perplexity %.3f (amino-acid frequency model %.3f), "
        "masked accuracy %.1f%% over %llu positions", (long long)e->step, e->loss, e->perplexity,
        e->unigram_perplexity, 100 * e->accuracy, (unsigned long long)e->selected);
  }
}

/* The schema's default of `key`, for the help text (never out of date). */
static const char *dflt(const char *key) {
  for (int i = 0; i < esmt_config_key_count(); i++) {
    esmt_config_key k = ESMT_CONFIG_KEY_INIT;
    if (esmt_config_key_info(i, &k) == ESMT_OK && !strcmp(k.name, key)) return k.default_value;
  }
  return "?";
}

static void usage(FILE *f) {
  fprintf(f, "usage: esmtrain-example train --data DIR [options]\n");
  cli_config_usage(f);
  fprintf(f, 
      "  (the flags below are shorthands for keys and apply in that same order)\n"
      "  --no-mfu              skip measuring the GEMM ceiling (no MFU in the log)\n"
      "  --data DIR            dataset from `esmtrain-example ingest`\n"
      "  --out DIR             run directory (checkpoints, train.log, metrics.jsonl, TensorBoard\n"
      "                        event files) [%s]\n"
      "  --model NAME          esm2_t6_8M ... esm2_t48_15B [%s]\n"
      "  --layers L --width D --heads H   a custom size instead of --model\n"
      "  --steps N             updates to run [%s]\n"
      "  --batch-tokens N      padded tokens per micro-batch [%s]\n"
      "  --update-tokens N     tokens per update (accumulate micro-batches) [one micro-batch]\n"
      "  --max-len N           tokens per row incl. cls/eos (crops longer proteins) [%s]\n"
      "  --lr X --warmup N --schedule esm2|cosine|constant --weight-decay X --clip X\n"
      "  --eval-every N --eval-batches N --save-every N --keep N --log-every N\n"
      "  --threads N --backend NAME --seed N --max-time SECONDS\n"
      "  --resume latest|DIR   continue a run exactly (same options)\n"
      "  --init-from CKPT      start from a checkpoint's weights with a fresh optimizer;\n"
      "                        hf:DIR starts from a Hugging Face ESM-2 directory\n"
      "  --fast-dev-run N      N updates, no checkpoints, no evaluation: a smoke test\n"
      "  --overfit-batches N   train on the first N batches only (loss should approach 0)\n"
      "Ctrl-C (SIGINT), SIGTERM, SIGHUP, SIGPIPE (output closed) or SIGXFSZ saves a\n"
      "checkpoint and exits with status 128 + the signal (130, 143, 129, 141, 153).\n"
      "One process writes a run at a time (RUN/run.lock names the holder); a new run\n"
      "never starts in a directory that holds checkpoints (--resume latest continues them).\n",
      dflt("train.out_dir"), dflt("model.preset"), dflt("train.max_steps"),
      dflt("data.tokens_per_batch"), dflt("data.max_len"));
}

/* Command-line flags that are shorthands for configuration keys. */
static const struct { const char *flag, *key, *key2; } k_flags[] = {
    {"--data", "data.train_dir", NULL},          {"--out", "train.out_dir", NULL},
    {"--model", "model.preset", NULL},           {"--layers", "model.num_layers", NULL},
    {"--width", "model.hidden_size", NULL},      {"--heads", "model.num_heads", NULL},
    {"--steps", "train.max_steps", NULL},        {"--batch-tokens", "data.tokens_per_batch", NULL},
    {"--update-tokens", "train.tokens_per_update", NULL}, {"--max-len", "data.max_len", NULL},
    {"--lr", "optimizer.lr", NULL},              {"--warmup", "schedule.warmup_steps", NULL},
    {"--schedule", "schedule.kind", NULL},       {"--weight-decay", "optimizer.weight_decay", NULL},
    {"--clip", "train.grad_clip", NULL},         {"--eval-every", "train.eval_every", NULL},
    {"--eval-batches", "train.eval_batches", NULL}, {"--save-every", "train.save_every", NULL},
    {"--keep", "train.keep_last", NULL},         {"--log-every", "train.log_every", NULL},
    {"--threads", "backend.threads", NULL},      {"--backend", "backend.name", NULL},
    {"--seed", "train.seed", "data.seed"},       {"--max-time", "train.max_time", NULL},
    {"--fast-dev-run", "train.fast_dev_run", NULL}, {"--overfit-batches", "train.overfit_batches", NULL},
};

/* Applies one shorthand flag (k_flags[k]) with its value. */
static esmt_status apply_flag(esmt_config *cfg, size_t k, const char *v) {
  esmt_status st = esmt_config_set(cfg, k_flags[k].key, v);
  if (!st && k_flags[k].key2) st = esmt_config_set(cfg, k_flags[k].key2, v);
  if (!st && !strcmp(k_flags[k].flag, "--width")) { /* FFN follows the width */
    char ffn[32];
    snprintf(ffn, sizeof ffn, "%lld", 4 * (long long)atoll(v));
    st = esmt_config_set(cfg, "model.ffn_size", ffn);
  }
  return st;
}

/* The command line, in order: the shared configuration flags
 * (cli_config_arg: --config, --preset, --set, --print-config, --validate,
 * --list-presets, --keys), the shorthands of k_flags, --resume, --init-from
 * and --no-mfu; each flag with a value also as --flag=VALUE. Returns -1 to
 * go on, else the exit status (0 after --help). */
static int parse_args(int argc, char **argv, cli_config *cc, const char **resume,
                      const char **init_from, int *measure_ceiling) {
  const size_t nflags = sizeof k_flags / sizeof k_flags[0];
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
    if (!strcmp(a, "--no-mfu")) { *measure_ceiling = 0; continue; }
    const int r = cli_config_arg(cc, "train", argc, argv, &i);
    if (r < 0) return 2;
    if (r > 0) continue;
    const char **own = NULL;
    size_t k = nflags;
    if (cli_flag_value("--resume", argc, argv, &i, &v)) own = resume;
    else if (cli_flag_value("--init-from", argc, argv, &i, &v)) own = init_from;
    else
      for (k = 0; k < nflags && !cli_flag_value(k_flags[k].flag, argc, argv, &i, &v); k++) {}
    if (!own && k == nflags) {
      fprintf(stderr, "esmtrain-example: train: unknown option '%s'%s (try --help)\n", a,
              cli_option_hint(a, usage));
      return 2;
    }
    if (!v) {
      fprintf(stderr, "esmtrain-example: train: %s needs a value (try --help)\n", a);
      return 2;
    }
    if (own) {
      *own = v;
      continue;
    }
    esmt_status st = apply_flag(cc->cfg, k, v);
    if (st) {
      cli_error("train", st);
      return 2;
    }
  }
  return -1;
}

int cmd_train(int argc, char **argv) {
  const char *resume = NULL, *init_from = NULL;
  int measure_ceiling = 1;
  cli_signals_catch(on_signal);
  cli_config cc;
  if (cli_config_init(&cc, "train")) return 1;
  esmt_config *cfg = cc.cfg;
  int prc = parse_args(argc, argv, &cc, &resume, &init_from, &measure_ceiling);
  if (prc < 0 && (cc.list_presets || cc.list_keys)) {
    if (cc.list_presets) cli_config_print_presets(&cc, stdout);
    if (cc.list_keys) cli_config_print_keys(stdout);
    prc = 0;
  }
  if (prc >= 0) {
    cli_config_free(&cc);
    return prc;
  }
  esmt_status st = esmt_config_validate(cfg);
  if (st) { cli_error("train: invalid configuration", st); cli_config_free(&cc); return 2; }
  char *yaml = NULL;
  esmt_config_to_yaml(cfg, &yaml);
  if (cc.print_config) printf("%s", yaml ? yaml : "");
  if (cc.validate) {
    const int rc = cli_config_plan(cfg, "train", stdout);
    if (rc) { free(yaml); cli_config_free(&cc); return rc; }
  }
  if (cc.print_config || cc.validate) {
    free(yaml);
    cli_config_free(&cc);
    return 0;
  }
  const char *data = cli_cfg_str(cfg, "data.train_dir"), *out = cli_cfg_str(cfg, "train.out_dir");
  const char *backend = cli_cfg_str(cfg, "backend.name");
  const int fast_dev = (int)cli_cfg_int(cfg, "train.fast_dev_run");
  int64_t steps = fast_dev > 0 ? fast_dev : cli_cfg_int(cfg, "train.max_steps");
  if (!*data) {
    fprintf(stderr, "train: --data DIR (data.train_dir) is required (try --help)\n");
    free(yaml);
    cli_config_free(&cc);
    return 2;
  }
  int rank = 0, local_ranks = 1; /* data parallel under a launcher: the ranks share the cores */
  if ((st = esmt_launch_layout(&rank, NULL, NULL, &local_ranks))) {
    cli_error("train", st);
    free(yaml);
    cli_config_free(&cc);
    return 2;
  }
  esmt_context_options co = ESMT_CONTEXT_OPTIONS_INIT;
  co.backend = *backend ? backend : NULL;
  co.num_threads = (int)cli_cfg_int(cfg, "backend.threads");
  if (co.num_threads == 0 && local_ranks > 1) { /* ranks on one machine share its cores */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    co.num_threads = cores / local_ranks > 1 ? (int)(cores / local_ranks) : 1;
  }
  co.log = cli_log_stderr;
  co.log_level = ESMT_LOG_WARN;
  esmt_context *ctx = NULL;
  esmt_trainer *tr = NULL;
  run_io io = {NULL, isatty(STDOUT_FILENO), steps, rank > 0, "", 0};
  co.log = log_to_run;
  co.log_user = &io;
  int rc = 1, log_created = 0;
  int64_t start_step = 0;
  char log_path[4096];
  /* refused before any data is read; the trainer checks again when it
   * takes the run (rank 0 holds run.lock); the other ranks refuse what it
   * refuses, at once and without repeating its message */
  if (!fast_dev && cli_run_check(out, "train", resume, rank > 0)) goto done;
  if ((st = esmt_context_create(&co, &ctx))) goto fail;
  esmt_trainer_options base = ESMT_TRAINER_OPTIONS_INIT;
  /* measured by the trainer after the first update, at the run's precision and GEMM shape */
  base.gemm_ceiling_gflops = measure_ceiling ? ESMT_GEMM_CEILING_AUTO : 0;
  base.metrics = on_metrics;
  base.metrics_user = &io;
  base.config_text = yaml;
  if ((st = esmt_trainer_create_from_config(ctx, cfg, &base, &tr))) goto fail;
  esmt_model *model = esmt_trainer_model(tr);
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_model_get_config(model, &mc);
  /* The preset's name only when the model has exactly its shape: custom
   * sizes (--layers/--width/...) are "a custom model". */
  const char *model_name = cli_cfg_str(cfg, "model.preset");
  esmt_model_config pc = ESMT_MODEL_CONFIG_INIT;
  if (esmt_model_config_preset(model_name, &pc) != ESMT_OK || pc.num_layers != mc.num_layers ||
      pc.hidden_size != mc.hidden_size || pc.num_heads != mc.num_heads ||
      (pc.ffn_size ? pc.ffn_size : 4 * pc.hidden_size) !=
          (mc.ffn_size ? mc.ffn_size : 4 * mc.hidden_size) ||
      pc.max_positions != mc.max_positions)
    model_name = "a custom model";
  const int has_eval = !fast_dev && cli_cfg_int(cfg, "train.eval_every") > 0;
  if (resume) {
    const char *spec = strcmp(resume, "latest") ? resume : out;
    if ((st = esmt_trainer_resume(tr, spec))) goto fail;
  } else if (init_from && (st = esmt_trainer_init_from(tr, init_from))) {
    goto fail;
  }
  if (!fast_dev && rank == 0) { /* the run is this process's now: one log per run */
    if ((st = esmt_trainer_take_run(tr))) goto fail;
    snprintf(log_path, sizeof log_path, "%s/train.log", out);
    io.log = open_log(log_path, &log_created);
    if (io.log && io.early_len) {
      fwrite(io.early, 1, strlen(io.early), io.log);
      fflush(io.log);
    }
  }
  start_step = esmt_trainer_step_count(tr);
  uint64_t params = 0;
  int recompute = 0;
  esmt_model_param_count(model, &params);
  esmt_model_get_recompute(model, &recompute);
  /* one line (a reader such as `| head -1` sees it whole, and the next
   * write is a step's, after training began) */
  char sampling[320], parallel[800] = "";
  describe_sampling(data, cli_cfg_str(cfg, "data.sampling"), sampling, sizeof sampling);
  if (esmt_trainer_data_parallel(tr, parallel + 2, sizeof parallel - 2) > 1)
    memcpy(parallel, "; ", 2);
  else parallel[0] = '\0';
  say(&io, 1, "training %s: %d layer%s, d=%d, %d heads, %.2fM parameters on %s (%s, activation "
      "recompute %s); data %s (%s)%s; %lld steps from step %lld", model_name, mc.num_layers,
      mc.num_layers == 1 ? "" : "s", mc.hidden_size, mc.num_heads, (double)params / 1e6, esmt_context_backend_name(ctx),
      measure_ceiling ? "MFU against its own FFN GEMM" : "no MFU", recompute ? "on" : "off", data,
      sampling, parallel,
      (long long)steps,
      (long long)esmt_trainer_step_count(tr));
  esmt_eval_metrics before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
  if (has_eval && (st = esmt_trainer_evaluate(tr, &before))) goto fail;
  if (has_eval) on_metrics(&io, NULL, &before);

  g_trainer = tr; /* from now on a stop signal saves (before, on_signal has ended the process) */
  st = esmt_trainer_run(tr);
  g_trained = 1;
  g_trainer = NULL;
  if (io.tty) printf("\n");
  const int sig = cli_signal_caught();
  if (st == ESMT_ERR_CANCELLED && sig) {
    say(&io, 0, "interrupted by signal %d at step %lld: checkpoint saved", sig,
        (long long)esmt_trainer_step_count(tr));
    if (rank == 0) /* on stderr: with SIGPIPE, standard output is gone */
      fprintf(stderr, "esmtrain-example: train: interrupted by signal %d, %s, at step %lld: "
              "checkpoint saved in %s/checkpoints; continue with --resume latest\n", sig,
              cli_signal_name(sig), (long long)esmt_trainer_step_count(tr), out);
    rc = 128 + sig;
    goto done;
  }
  if (st) goto fail;
  if (has_eval && (st = esmt_trainer_evaluate(tr, &after))) goto fail;
  if (has_eval)
    say(&io, 1, "validation perplexity %.3f -> %.3f after %lld steps (amino-acid frequency model "
        "%.3f): %s", before.perplexity, after.perplexity, (long long)esmt_trainer_step_count(tr),
        after.unigram_perplexity,
        after.perplexity < after.unigram_perplexity ? "the model beats composition"
                                                    : "not yet better than composition");
  if (!fast_dev) say(&io, 1, "checkpoints in %s/checkpoints (latest and best kept)", out);
  rc = 0;
  goto done;
fail:
  if (io.tty) printf("\n");
  if (rank > 0) fprintf(stderr, "[rank %d] ", rank);
  cli_error("train", st);
  if (io.log) say(&io, 0, "error: %s", esmt_last_error());
done:
  if (io.log) fclose(io.log);
  /* a run that failed before its first step leaves nothing behind: the log
   * made here goes, and the trainer removes the run directory it made */
  if (log_created && rc != 0 && (!tr || esmt_trainer_step_count(tr) == start_step))
    unlink(log_path);
  esmt_trainer_destroy(tr);
  esmt_context_destroy(ctx);
  cli_config_free(&cc);
  free(yaml);
  return rc;
}
