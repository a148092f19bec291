/* SPDX-License-Identifier: MIT */
/* metrics.jsonl read back for plot and watch (run_metrics.h): the
 * library's reader, its message into err. */
#include "run_metrics.h"

#include <stdio.h>
#include <string.h>

static int read_more(cli_run_metrics *m, const char *path, int must_exist, int *reset,
                     char *err, size_t cap) {
  esmt_status st = m->reader ? ESMT_OK : esmt_metrics_reader_open(path, &m->reader);
  size_t added = 0;
  esmt_metrics_view v = ESMT_METRICS_VIEW_INIT;
  if (!st) st = esmt_metrics_reader_poll(m->reader, must_exist, &added, reset);
  if (!st) st = esmt_metrics_reader_view(m->reader, &v);
  if (st) {
    snprintf(err, cap, "%s", esmt_last_error());
    return -1;
  }
  m->train = v.train;
  m->n_train = v.n_train;
  m->eval = v.eval;
  m->n_eval = v.n_eval;
  m->bad_lines = v.bad_lines;
  return (int)added;
}

int cli_run_metrics_poll(cli_run_metrics *m, const char *path, int *reset, char *err,
                         size_t cap) {
  return read_more(m, path, 0, reset, err, cap);
}

int cli_run_metrics_load(cli_run_metrics *m, const char *path, char *err, size_t cap) {
  return read_more(m, path, 1, NULL, err, cap) < 0 ? -1 : 0;
}

void cli_run_metrics_free(cli_run_metrics *m) {
  esmt_metrics_reader_close(m->reader);
  memset(m, 0, sizeof *m);
}
