/* SPDX-License-Identifier: MIT */
/* See rank_runner.h. */
#define _GNU_SOURCE
#include "test_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void read_rank_text(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("no file at %s", path);
  buf[fread(buf, 1, cap - 1, f)] = '\0';
  fclose(f);
}

void assert_last_good_checkpoint(const char *run_dir, const char *step, esmt_model *m) {
  char ckdir[1024], path[1100], text[64];
  snprintf(ckdir, sizeof ckdir, "%s/checkpoints", run_dir);
  snprintf(path, sizeof path, "%s/latest", ckdir);
  read_rank_text(path, text, sizeof text);
  if (strncmp(text, step, strlen(step)) != 0) fail_msg("%s names %s, not %s", path, text, step);
  DIR *d = opendir(ckdir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "latest") &&
        strcmp(e->d_name, step))
      fail_msg("%s left in %s", e->d_name, ckdir);
  closedir(d);
  snprintf(path, sizeof path, "%s/%s", ckdir, step);
  assert_int_equal(esmt_checkpoint_load(m, path, 1, NULL), ESMT_OK);
}
