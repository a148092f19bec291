/* libFuzzer: a dataset whose one training shard is the input (corrupted
 * shards through the verifier and mmap), then a few batches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "esmtrain/esmtrain.h"
#include "fuzz_common.h"

static char g_dir[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  snprintf(g_dir, sizeof g_dir, "/tmp/esmt-fuzz-shard-%d", (int)getpid());
  mkdir(g_dir, 0755);
  char p[128];
  snprintf(p, sizeof p, "%s/manifest.json", g_dir);
  FILE *f = fopen(p, "w");
  fputs("{\"format\":\"esmtrain-dataset\",\"version\":1,\"shards\":[{\"file\":\"train-00000.shard\","
        "\"split\":\"train\"}]}", f);
  fclose(f);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char p[128];
  snprintf(p, sizeof p, "%s/train-00000.shard", g_dir);
  FILE *f = fopen(p, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  esmt_loader_options o = ESMT_LOADER_OPTIONS_INIT;
  o.dir = g_dir;
  o.max_len = 64;
  o.tokens_per_batch = 256;
  o.prefetch = 0;
  esmt_loader *l = NULL;
  if (esmt_loader_create(&o, &l) == ESMT_OK) {
    for (int i = 0; i < 4; i++) {
      esmt_batch b = ESMT_BATCH_INIT;
      if (esmt_loader_next(l, &b) != ESMT_OK) break;
    }
    esmt_loader_destroy(l);
  }
  return 0;
}
