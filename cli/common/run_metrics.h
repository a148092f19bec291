/* SPDX-License-Identifier: MIT */
/* A run's metrics.jsonl for `plot` and `watch`, through the library's
 * reader (esmt_metrics_reader, trainer.h): the train and eval records as
 * arrays, loaded whole or followed as the file grows. */
#ifndef ESMT_CLI_RUN_METRICS_H
#define ESMT_CLI_RUN_METRICS_H

#include <stddef.h>

#include <esmtrain/esmtrain.h>

typedef esmt_metrics_train cli_train_point;
typedef esmt_metrics_eval cli_eval_point;

typedef struct cli_run_metrics {
  const cli_train_point *train; /* the reader's arrays, valid until the next poll */
  size_t n_train;
  const cli_eval_point *eval;
  size_t n_eval;
  size_t bad_lines;
  esmt_metrics_reader *reader;
} cli_run_metrics;

/* Read every complete line of `path` into m (zeroed first by the caller).
 * Returns 0, or -1 with the reason in err (the file is missing or
 * unreadable). */
int cli_run_metrics_load(cli_run_metrics *m, const char *path, char *err, size_t cap);

/* Read the lines appended since the last call (esmt_metrics_reader_poll:
 * a missing file is no error; *reset 1 when the file was read again).
 * Returns the number of new records, or -1 with the reason in err. */
int cli_run_metrics_poll(cli_run_metrics *m, const char *path, int *reset, char *err, size_t cap);

void cli_run_metrics_free(cli_run_metrics *m);

#endif
