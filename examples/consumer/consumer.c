/* SPDX-License-Identifier: MIT */
/* The smallest program that uses an installed libesmtrain: create a
 * context, print the chosen backend and where it came from. The install
 * test builds it out of tree with pkg-config and with find_package. */
#include <esmtrain/esmtrain.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  esmt_context *ctx = NULL;
  esmt_status st = esmt_context_create(NULL, &ctx);
  if (st != ESMT_OK) {
    fprintf(stderr, "consumer: %s (%s)\n", esmt_last_error(), esmt_status_string(st));
    return 1;
  }
  int n = 0;
  esmt_context_backend_count(ctx, &n);
  for (int i = 0; i < n; i++) {
    esmt_backend_info info;
    info.struct_size = sizeof info;
    if (esmt_context_backend_info(ctx, i, &info) == ESMT_OK && info.chosen)
      printf("libesmtrain %s: backend %s from %s\n", esmt_version_string(), info.name, info.path);
  }
  /* Optionally require the backend to come from a given prefix. */
  int ok = 1;
  if (argc > 1) {
    for (int i = 0; i < n; i++) {
      esmt_backend_info info;
      info.struct_size = sizeof info;
      if (esmt_context_backend_info(ctx, i, &info) == ESMT_OK && info.chosen &&
          strncmp(info.path, argv[1], strlen(argv[1])) != 0) {
        fprintf(stderr, "consumer: backend %s is not under %s\n", info.path, argv[1]);
        ok = 0;
      }
    }
  }
  esmt_context_destroy(ctx);
  return ok ? 0 : 1;
}
