/* SPDX-License-Identifier: MIT */
/* What `watch` shows, as lines of text: built from a run's metrics, the
 * state of its writer and a sample of the GPUs, with no terminal involved
 * (cmd_watch.c draws them; tests can compare them). */
#ifndef ESMT_CLI_WATCH_SCREEN_H
#define ESMT_CLI_WATCH_SCREEN_H

#include <stddef.h>

#include "esmtrain/esmtrain.h"
#include "common/run_metrics.h"

#define WATCH_MAX_GPUS 16
#define WATCH_MAX_LINES (24 + WATCH_MAX_GPUS)
#define WATCH_LINE_BYTES 2048

/* The process writing the run, from RUN/run.lock. */
typedef struct watch_run_state {
  int running;     /* a live writer (or one on another host, which cannot be checked) */
  long pid;        /* from run.lock, 0 when it names none (or none that can be) */
  char host[256];  /* "" when run.lock names none */
  char started[64];
  int other_host;  /* the writer runs on another machine than this one */
  char gone_why[96];  /* why the pid named is not the writer ("" : it is gone) */
  char damaged[160];  /* why the record cannot be read ("" when it can) */
} watch_run_state;

/* Read RUN/run.lock (watch_run_state.c): the writer is running when the
 * pid recorded is a process of this machine that has run.lock open (the
 * trainer holds its lock through that file for the whole run), so a pid
 * reused by another process is not taken for the writer. An empty or
 * absent file, a pid that does not exist, or a record that does not name
 * a valid pid (st->damaged says why) is no writer. */
void watch_run_state_read(const char *run_dir, watch_run_state *st);

/* One sample of this machine's GPUs (esmt_gpu_sample_all). */
typedef struct watch_gpus {
  esmt_status status;  /* ESMT_ERR_UNSUPPORTED: no NVML or no NVIDIA GPU */
  int count;           /* the GPUs NVML sees */
  esmt_gpu_sample s[WATCH_MAX_GPUS];
  char why[512];       /* esmt_last_error() when status is not ESMT_OK */
} watch_gpus;

void watch_gpus_sample(watch_gpus *g);

typedef struct watch_input {
  const char *run_dir;
  const cli_run_metrics *m;
  int have_file;        /* RUN/metrics.jsonl exists */
  const char *error;    /* the last poll's error, or NULL */
  double age_s;         /* seconds since metrics.jsonl was last written, NAN unknown */
  int restarts;         /* times it was replaced (resumes) while watched */
  watch_run_state state;
  const watch_gpus *gpus;
  int utf8;             /* Unicode blocks, else ASCII */
  int width;            /* columns the lines are meant for (sparklines fit them); 0: 80 */
  const char *hint;     /* shown after the title (keys), or NULL */
} watch_input;

typedef struct watch_screen {
  int n;
  char line[WATCH_MAX_LINES][WATCH_LINE_BYTES];
} watch_screen;

/* Every line of the view (not cut to the width: the terminal code does). */
void watch_screen_render(const watch_input *in, watch_screen *out);

/* The one-line forms of --plain: "step 120/400  loss 2.8123  lr 3.9e-04 ..."
 * and "eval step 120  loss ...". */
void watch_plain_train(const cli_train_point *p, char *buf, size_t cap);
void watch_plain_eval(const cli_eval_point *p, char *buf, size_t cap);

#endif
