/* `esmtrain-example train`: the main job. Trains an ESM-2 model on a
 * dataset from `ingest`, evaluating before and after against an amino-acid
 * frequency baseline, writing checkpoints, a log and metrics.jsonl. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
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

#include "cli.h"

typedef struct run_io {
  FILE *log, *metrics;
  int tty;
  int64_t max_steps;
  int quiet;         /* a data-parallel rank other than 0: errors only */
} run_io;

/* Data parallel under a launcher: this process's rank and the ranks on
 * this machine (they share its cores). */
static int env_int(const char *a, const char *b, const char *c, int dflt) {
  const char *names[] = {a, b, c};
  for (int i = 0; i < 3; i++) {
    const char *v = names[i] ? getenv(names[i]) : NULL;
    if (v && *v) return atoi(v);
  }
  return dflt;
}

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
static void say(run_io *io, int to_stdout, const char *fmt, ...) {
  char msg[1024], ts[32];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  stamp(ts, sizeof ts);
  if (io->log) { fprintf(io->log, "%s %s\n", ts, msg); fflush(io->log); }
  if (!to_stdout || io->quiet) return;
  if (io->tty) printf("\r\033[K%s\n", msg);
  else printf("%s %s\n", ts, msg);
  fflush(stdout);
}

/* The library's messages: on stderr, and warnings also in the run's log
 * (a resume's changed settings among them). */
static void log_to_run(void *user, esmt_log_level level, const char *message) {
  run_io *io = user;
  cli_log_stderr(NULL, level, message);
  if (level >= ESMT_LOG_WARN && io->log) say(io, 0, "[warn] %s", message);
}

static double rss_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

static void on_metrics(void *user, const esmt_train_metrics *t, const esmt_eval_metrics *e) {
  run_io *io = user;
  if (t) {
    if (io->metrics)
      fprintf(io->metrics, "{\"kind\":\"train\",\"step\":%lld,\"loss\":%.6f,\"lr\":%.3e,"
              "\"grad_norm\":%.4f,\"tokens\":%llu,\"tokens_per_s\":%.1f,\"mfu\":%.4f,"
              "\"step_ms\":%.1f,\"data_ms\":%.2f,\"overhead_ms\":%.2f,\"skipped\":%lld,"
              "\"loss_scale\":%g,\"overflows\":%lld,\"elapsed_s\":%.1f,\"padding\":%.4f}\n",
              (long long)t->step, t->loss, t->lr, t->grad_norm, (unsigned long long)t->tokens,
              t->tokens_per_s, t->mfu, t->step_ms, t->data_ms, t->overhead_ms, (long long)t->skipped,
              t->loss_scale, (long long)t->overflows, t->elapsed_s, t->padding_fraction);
    char line[512];
    snprintf(line, sizeof line, "step %lld/%lld loss %.4f lr %.2e | %.0f tok/s MFU %.0f%% pad %.0f%% | "
             "%.0f ms/step | ETA %.0fs | RSS %.0f MiB%s", (long long)t->step,
             (long long)io->max_steps, t->loss, t->lr, t->tokens_per_s, 100 * t->mfu,
             100 * t->padding_fraction, t->step_ms,
             t->eta_s, rss_mib(),
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
    if (io->metrics)
      fprintf(io->metrics, "{\"kind\":\"eval\",\"step\":%lld,\"loss\":%.6f,\"perplexity\":%.4f,"
              "\"accuracy\":%.4f,\"unigram_perplexity\":%.4f,\"selected\":%llu}\n",
              (long long)e->step, e->loss, e->perplexity, e->accuracy, e->unigram_perplexity,
              (unsigned long long)e->selected);
    say(io, 1, "eval step %lld: loss %.4f, perplexity %.3f (amino-acid frequency model %.3f), "
        "masked accuracy %.1f%% over %llu positions", (long long)e->step, e->loss, e->perplexity,
        e->unigram_perplexity, 100 * e->accuracy, (unsigned long long)e->selected);
  }
  if (io->metrics) fflush(io->metrics);
}

static void usage(void) {
  printf(
      "usage: esmtrain-example train --data DIR [options]\n"
      "  --config FILE.yaml    settings (nested keys; `include:` presets or files)\n"
      "  --preset NAME         apply configs/NAME.yaml (see --list-presets)\n"
      "  --set key=value       any key (e.g. --set optimizer.beta2=0.99)\n"
      "  --print-config        print every key's resolved value and exit\n"
      "  --validate            check the configuration and exit\n"
      "  --no-mfu              skip measuring the GEMM ceiling (no MFU in the log)\n"
      "  (flags, presets, files and --set apply in command-line order; later wins)\n"
      "  --data DIR            dataset from `esmtrain-example ingest`\n"
      "  --out DIR             run directory (checkpoints, train.log, metrics.jsonl) [runs/esmtrain]\n"
      "  --model NAME          esm2_t6_8M ... esm2_t48_15B [esm2_t6_8M]\n"
      "  --layers L --width D --heads H   a custom size instead of --model\n"
      "  --steps N             updates to run [1000]\n"
      "  --batch-tokens N      padded tokens per micro-batch [4096]\n"
      "  --update-tokens N     tokens per update (accumulate micro-batches) [one micro-batch]\n"
      "  --max-len N           tokens per row incl. cls/eos (crops longer proteins) [512]\n"
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
      "never starts in a directory that holds checkpoints (--resume latest continues them).\n");
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

static int64_t cfg_int(const esmt_config *c, const char *k) {
  int64_t v = 0;
  esmt_config_get_int(c, k, &v);
  return v;
}
static const char *cfg_str(const esmt_config *c, const char *k) {
  const char *v = "";
  esmt_config_get_string(c, k, &v);
  return v;
}

int cmd_train(int argc, char **argv) {
  const char *resume = NULL, *init_from = NULL;
  int print_config = 0, validate_only = 0, measure_ceiling = 1;
  esmt_config *cfg = NULL;
  cli_signals_catch(on_signal);
  esmt_status st = esmt_config_create(&cfg);
  if (st) { cli_error("train", st); return 1; }
  /* Presets, files, --set and flags apply in command-line order. */
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help")) { usage(); esmt_config_destroy(cfg); return 0; }
    if (!strcmp(a, "--print-config")) { print_config = 1; continue; }
    if (!strcmp(a, "--validate")) { validate_only = 1; continue; }
    if (!strcmp(a, "--no-mfu")) { measure_ceiling = 0; continue; }
    if (!strcmp(a, "--list-presets")) {
      char list[4096];
      esmt_config_list_presets(list, sizeof list);
      printf("%s", list);
      esmt_config_destroy(cfg);
      return 0;
    }
    if (!v) { fprintf(stderr, "train: %s needs a value (try --help)\n", a); esmt_config_destroy(cfg); return 2; }
    i++;
    if (!strcmp(a, "--resume")) { resume = v; continue; }
    if (!strcmp(a, "--init-from")) { init_from = v; continue; }
    if (!strcmp(a, "--config")) st = esmt_config_load_yaml(cfg, v);
    else if (!strcmp(a, "--preset")) st = esmt_config_apply_preset(cfg, v);
    else if (!strcmp(a, "--set")) st = esmt_config_set_assignment(cfg, v);
    else {
      size_t k = 0, n = sizeof k_flags / sizeof k_flags[0];
      while (k < n && strcmp(a, k_flags[k].flag) != 0) k++;
      if (k == n) {
        fprintf(stderr, "train: unknown option '%s' (try --help)\n", a);
        esmt_config_destroy(cfg);
        return 2;
      }
      st = esmt_config_set(cfg, k_flags[k].key, v);
      if (!st && k_flags[k].key2) st = esmt_config_set(cfg, k_flags[k].key2, v);
      if (!st && !strcmp(a, "--width")) { /* FFN follows the width */
        char ffn[32];
        snprintf(ffn, sizeof ffn, "%lld", 4 * (long long)atoll(v));
        st = esmt_config_set(cfg, "model.ffn_size", ffn);
      }
    }
    if (st) { cli_error("train", st); esmt_config_destroy(cfg); return 2; }
  }
  if (!st) st = esmt_config_validate(cfg);
  if (st) { cli_error("train: invalid configuration", st); esmt_config_destroy(cfg); return 2; }
  char *yaml = NULL;
  esmt_config_to_yaml(cfg, &yaml);
  if (print_config) printf("%s", yaml ? yaml : "");
  if (validate_only) {
    const int rc = cli_config_plan(cfg, "train", stdout);
    if (rc) { free(yaml); esmt_config_destroy(cfg); return rc; }
  }
  if (print_config || validate_only) {
    free(yaml);
    esmt_config_destroy(cfg);
    return 0;
  }
  const char *data = cfg_str(cfg, "data.train_dir"), *out = cfg_str(cfg, "train.out_dir");
  const char *backend = cfg_str(cfg, "backend.name");
  const int fast_dev = (int)cfg_int(cfg, "train.fast_dev_run");
  int64_t steps = fast_dev > 0 ? fast_dev : cfg_int(cfg, "train.max_steps");
  if (!*data) {
    fprintf(stderr, "train: --data DIR (data.train_dir) is required (try --help)\n");
    free(yaml);
    esmt_config_destroy(cfg);
    return 2;
  }
  const int rank = env_int("ESMTRAIN_RANK", "RANK", "SLURM_PROCID", 0);
  const int local_ranks = env_int("ESMTRAIN_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", NULL, 1);
  esmt_context_options co = ESMT_CONTEXT_OPTIONS_INIT;
  co.backend = *backend ? backend : NULL;
  co.num_threads = (int)cfg_int(cfg, "backend.threads");
  if (co.num_threads == 0 && local_ranks > 1) { /* ranks on one machine share its cores */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    co.num_threads = cores / local_ranks > 1 ? (int)(cores / local_ranks) : 1;
  }
  co.log = cli_log_stderr;
  co.log_level = ESMT_LOG_WARN;
  esmt_context *ctx = NULL;
  esmt_trainer *tr = NULL;
  run_io io = {NULL, NULL, isatty(STDOUT_FILENO), steps, rank > 0};
  co.log = log_to_run;
  co.log_user = &io;
  int rc = 1, lock_fd = -1;
  double ceiling = 0;
  /* rank 0 writes the run: it alone holds the lock (checked before and
   * after taking it: a run may have appeared meanwhile); the other ranks
   * refuse what it refuses, at once and without repeating its message */
  if (!fast_dev && cli_run_check(out, "train", resume, rank > 0)) goto done;
  if (!fast_dev && rank == 0 &&
      ((lock_fd = cli_run_lock(out, "train")) < 0 || cli_run_check(out, "train", resume, 0)))
    goto done;
  if ((st = esmt_context_create(&co, &ctx))) goto fail;
  if (measure_ceiling) esmt_context_gemm_ceiling(ctx, 2048, 2048, 2048, 6, &ceiling);
  char path[4096];
  if (!fast_dev && rank == 0) { /* one log and one metrics file per run */
    snprintf(path, sizeof path, "%s/train.log", out);
    io.log = fopen(path, "a");
    snprintf(path, sizeof path, "%s/metrics.jsonl", out);
    io.metrics = fopen(path, "a");
  }
  esmt_trainer_options base = ESMT_TRAINER_OPTIONS_INIT;
  base.gemm_ceiling_gflops = ceiling;
  base.metrics = on_metrics;
  base.metrics_user = &io;
  base.config_text = yaml;
  if ((st = esmt_trainer_create_from_config(ctx, cfg, &base, &tr))) goto fail;
  esmt_model *model = esmt_trainer_model(tr);
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_model_get_config(model, &mc);
  /* The preset's name only when the model has exactly its shape: custom
   * sizes (--layers/--width/...) are "a custom model". */
  const char *model_name = cfg_str(cfg, "model.preset");
  esmt_model_config pc = ESMT_MODEL_CONFIG_INIT;
  if (esmt_model_config_preset(model_name, &pc) != ESMT_OK || pc.num_layers != mc.num_layers ||
      pc.hidden_size != mc.hidden_size || pc.num_heads != mc.num_heads ||
      (pc.ffn_size ? pc.ffn_size : 4 * pc.hidden_size) !=
          (mc.ffn_size ? mc.ffn_size : 4 * mc.hidden_size) ||
      pc.max_positions != mc.max_positions)
    model_name = "a custom model";
  const int has_eval = !fast_dev && cfg_int(cfg, "train.eval_every") > 0;
  if (resume) {
    const char *spec = strcmp(resume, "latest") ? resume : out;
    if ((st = esmt_trainer_resume(tr, spec))) goto fail;
  } else if (init_from && (st = esmt_trainer_init_from(tr, init_from))) {
    goto fail;
  }
  uint64_t params = 0;
  int recompute = 0;
  esmt_model_param_count(model, &params);
  esmt_model_get_recompute(model, &recompute);
  say(&io, 1, "training %s: %d layer%s, d=%d, %d heads, %.2fM parameters on %s (%s, activation "
      "recompute %s); data %s; %lld steps from step %lld", model_name, mc.num_layers,
      mc.num_layers == 1 ? "" : "s", mc.hidden_size, mc.num_heads, (double)params / 1e6, esmt_context_backend_name(ctx),
      ceiling > 0 ? "GEMM ceiling measured" : "no ceiling", recompute ? "on" : "off", data,
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
  esmt_trainer_destroy(tr);
  esmt_context_destroy(ctx);
  esmt_config_destroy(cfg);
  free(yaml);
  if (io.log) fclose(io.log);
  if (io.metrics) fclose(io.metrics);
  cli_run_unlock(lock_fd);
  return rc;
}
