/* SPDX-License-Identifier: MIT */
/* `esmtrain-example bench-adamw`: the AdamW update over a model's flat
 * buffers (the host optimizer the CPU backend and offloading use) against
 * the memory bandwidth a plain memcpy reaches in the same run. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct copy_job { char *dst; const char *src; size_t n; } copy_job;

static void *copy_part(void *arg) {
  copy_job *j = arg;
  memcpy(j->dst, j->src, j->n);
  return NULL;
}

/* Best-of-N memcpy bandwidth over `bytes` with `threads` threads (each a
 * contiguous part, as AdamW splits its work), counting bytes read + written. */
static double memcpy_gbs(size_t bytes, int reps, int threads) {
  char *a = malloc(bytes), *b = malloc(bytes);
  if (!a || !b) { free(a); free(b); return 0; }
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  pthread_t tid[64];
  copy_job jobs[64];
  double best = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = esmt_clock_seconds();
    for (int t = 0; t < threads; t++) {
      size_t lo = bytes / threads * t, hi = t == threads - 1 ? bytes : bytes / threads * (t + 1);
      jobs[t] = (copy_job){b + lo, a + lo, hi - lo};
      pthread_create(&tid[t], NULL, copy_part, &jobs[t]);
    }
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    double dt = esmt_clock_seconds() - t0;
    if (dt > 0 && 2.0 * bytes / dt / 1e9 > best) best = 2.0 * bytes / dt / 1e9;
  }
  volatile char sink = b[bytes / 2];
  (void)sink;
  free(a);
  free(b);
  return best;
}

int cmd_bench_adamw(int argc, char **argv) {
  int threads = 0, steps = 5, layers = 8, width = 1024;
  for (int i = 0; i < argc; i += 2) { /* a flag and its value */
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help")) {
      printf("usage: esmtrain-example bench-adamw [--threads N] [--steps N] [--layers L] "
             "[--width d]\nTimes AdamW over the flat buffers of an L x d model (default 8 x "
             "1024: ~101M parameters)\nand compares with memcpy bandwidth measured now "
             "(AdamW moves 28 bytes per parameter).\n");
      return 0;
    }
    if (!v) { fprintf(stderr, "bench-adamw: %s needs a value\n", a); return 2; }
    long long x = 0;
    if (!strcmp(a, "--threads") || !strcmp(a, "--steps") || !strcmp(a, "--layers") ||
        !strcmp(a, "--width")) {
      if (!cli_int_arg("bench-adamw", a, v, 0, 1 << 20, &x)) return 2;
      *(!strcmp(a, "--threads") ? &threads : !strcmp(a, "--steps") ? &steps
        : !strcmp(a, "--layers") ? &layers : &width) = (int)x;
    } else { fprintf(stderr, "bench-adamw: unknown argument '%s'\n", a); return 2; }
  }
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.num_threads = threads;
  o.log = cli_log_stderr;
  o.log_level = ESMT_LOG_WARN;
  esmt_context *ctx = NULL;
  esmt_model *m = NULL;
  esmt_status st = esmt_context_create(&o, &ctx);
  if (st) { cli_error("bench-adamw", st); return 1; }
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = layers;
  c.hidden_size = width;
  c.num_heads = width / 64 > 0 ? width / 64 : 1;
  if ((st = esmt_model_create(ctx, &c, 1, &m))) goto fail;
  uint64_t n = 0;
  esmt_model_param_count(m, &n);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double bw = memcpy_gbs((size_t)n * 4, 5, threads > 0 ? threads : (int)cores);
  esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
  double ac_lr = 4e-4; /* the learning rate is the step's argument */
  double best = 1e30, total = 0;
  for (int s = 1; s <= steps + 1; s++) {
    double t0 = esmt_clock_seconds();
    if ((st = esmt_model_optimizer_step(m, &ac, ac_lr, 1.0, s))) goto fail;
    double dt = esmt_clock_seconds() - t0;
    if (s == 1) continue; /* warm-up: first touch of the moments */
    total += dt;
    if (dt < best) best = dt;
  }
  double gbs = 28.0 * (double)n / best / 1e9;
  printf("adamw: %.1fM parameters, best %.1f ms, mean %.1f ms, %.1f GB/s; memcpy %.1f GB/s "
         "-> %.0f%% of memcpy bandwidth\n", (double)n / 1e6, best * 1e3, total / steps * 1e3, gbs,
         bw, 100.0 * gbs / bw);
  printf("ESMT_ADAMW_RESULT params=%llu threads=%d step_ms=%.3f gbs=%.2f memcpy_gbs=%.2f\n",
         (unsigned long long)n, threads, best * 1e3, gbs, bw);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return 0;
fail:
  cli_error("bench-adamw", st);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return 1;
}
