/* SPDX-License-Identifier: MIT */
/* A run's metrics.jsonl read back (docs/formats.md "Metrics files") for
 * `plot` and `watch`: the train and eval records as arrays, loaded whole or
 * followed as the file grows. A value a line lacks (older files, the CPU
 * backend's device fields, a null loss) is NAN. */
#ifndef ESMT_CLI_RUN_METRICS_H
#define ESMT_CLI_RUN_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct cli_train_point {
  int64_t step;
  double loss, lr, grad_norm, tokens, tokens_per_s, mfu, step_ms, elapsed_s, eta_s, padding,
      loss_scale, overflows, skipped, rss_mib;
  double max_steps;                                       /* 0: until the data ends */
  double device_util, device_mem_mib, device_mem_total_mib; /* GPU backends */
} cli_train_point;

typedef struct cli_eval_point {
  int64_t step;
  double loss, perplexity, accuracy, unigram_perplexity;
  double tokens; /* the tokens trained on at that step (from the train lines), else NAN */
} cli_eval_point;

typedef struct cli_run_metrics {
  cli_train_point *train;
  size_t n_train, cap_train;
  cli_eval_point *eval;
  size_t n_eval, cap_eval;
  size_t bad_lines; /* complete lines that were not a train or eval record */
  /* following: the file read so far (a replaced or shorter file is read again) */
  dev_t dev;
  ino_t ino;
  off_t offset;
  int have_file;
} cli_run_metrics;

/* Read every complete line of `path` into m (zeroed first by the caller).
 * Returns 0, or -1 with the reason in err (the file is missing or
 * unreadable). */
int cli_run_metrics_load(cli_run_metrics *m, const char *path, char *err, size_t cap);

/* Read the lines appended since the last call. When the file was replaced
 * (a resume rewrites it) or cut shorter, the records are dropped and the
 * whole file read again; *reset is then 1. A file that does not exist (yet)
 * is not an error: returns 0 with nothing read. Returns the number of new
 * records, or -1 with the reason in err. */
int cli_run_metrics_poll(cli_run_metrics *m, const char *path, int *reset, char *err, size_t cap);

void cli_run_metrics_free(cli_run_metrics *m);

#endif
