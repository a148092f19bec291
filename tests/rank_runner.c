/* SPDX-License-Identifier: MIT */
/* See rank_runner.h. */
#define _GNU_SOURCE
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint.h"
#include "model.h"
#include "rank_runner.h"

void run_ranks_forked(rank_fn fn, const void *specs, size_t spec_size, int n, int *status) {
  pid_t pid[16];
  assert_true(n <= 16);
  for (int i = 0; i < n; i++) {
    pid[i] = fork();
    if (pid[i] == 0) _exit((int)fn((const char *)specs + (size_t)i * spec_size));
  }
  for (int i = 0; i < n; i++) {
    int ws;
    waitpid(pid[i], &ws, 0);
    status[i] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  }
}

void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

void write_weights(esmt_model *m, const char *path) {
  float *w = calloc(m->layout.total, sizeof *w);
  FILE *f = fopen(path, "wb");
  const esmt_param_memory *p = &m->mem;
  /* the master this rank holds (ZeRO-2/3: its shard) in place, zeros elsewhere */
  const esmt_status got = !w ? ESMT_ERR_OUT_OF_MEMORY
      : esmt_master_copy(m, w + p->master_lo, p->master,
                         (p->master_hi - p->master_lo) * sizeof *w, 0);
  if (w && f && !got) fwrite(w, sizeof *w, m->layout.total, f);
  if (f) fclose(f);
  free(w);
}

float *read_weights(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("no weights at %s", path);
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  float *w = malloc((size_t)bytes + 1);
  assert_non_null(w);
  *n = fread(w, sizeof *w, (size_t)bytes / sizeof *w, f);
  fclose(f);
  return w;
}
