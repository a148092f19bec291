// SPDX-License-Identifier: MIT
/* An embedder that forces the cpu backend (the API's `backend`, or
 * ESMTRAIN_BACKEND=cpu with "env" as argument) maps no other plugin and no
 * CUDA library (cuBLASLt, NCCL, the CUDA runtime), and finds its environment
 * as it was after creating the context. Exit 0 when so. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <esmtrain/esmtrain.h>

extern char **environ;

static size_t environment_hash(void) {
  size_t h = 5381;
  for (char **e = environ; *e; e++)
    for (const char *p = *e; *p; p++) h = h * 33 + (unsigned char)*p;
  return h;
}

int main(int argc, char **argv) {
  const int by_env = argc > 1 && !strcmp(argv[1], "env");
  if (by_env) setenv("ESMTRAIN_BACKEND", "cpu", 1);
  const size_t env_before = environment_hash();
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  if (!by_env) o.backend = "cpu";
  esmt_context *ctx = NULL;
  if (esmt_context_create(&o, &ctx) != ESMT_OK) {
    fprintf(stderr, "forced_cpu: %s\n", esmt_last_error());
    return 1;
  }
  int bad = 0;
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  static const char *const unwanted[] = {"libcublas", "libnccl", "libcudart", "libcuda.so",
                                         "turing_fp16.so", "ampere_bf16.so", "nccl_dp.so"};
  while (f && fgets(line, sizeof line, f))
    for (size_t i = 0; i < sizeof unwanted / sizeof unwanted[0]; i++)
      if (strstr(line, unwanted[i])) {
        fprintf(stderr, "forced_cpu: %s is mapped: %s", unwanted[i], line);
        bad = 1;
      }
  if (f) fclose(f);
  if (environment_hash() != env_before) {
    fprintf(stderr, "forced_cpu: the environment changed in esmt_context_create\n");
    bad = 1;
  }
  printf("forced cpu (%s): backend %s, %s\n", by_env ? "ESMTRAIN_BACKEND" : "the API",
         esmt_context_backend_name(ctx), bad ? "FAILED" : "no other plugin or CUDA library mapped");
  esmt_context_destroy(ctx);
  return bad;
}
