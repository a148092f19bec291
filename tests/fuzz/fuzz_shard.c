/* SPDX-License-Identifier: MIT */
/* libFuzzer: a dataset whose one training shard is the input (corrupted
 * shards through the verifier and mmap), then a few batches. The manifest
 * is written for each input from the input's own header (version, dataset
 * id, records, tokens, crc32), so that the fuzzer gets past the manifest
 * comparison into the shard checks. */
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
  return 0;
}

/* The header fields at their offsets (docs/formats.md), little-endian. */
static uint64_t field(const uint8_t *d, size_t size, size_t off, size_t n) {
  uint64_t v = 0;
  for (size_t k = 0; k < n && off + k < size; k++) v |= (uint64_t)d[off + k] << (8 * k);
  return v;
}

static void write_manifest(const uint8_t *d, size_t size) {
  char p[128], id[33];
  for (int k = 0; k < 16; k++) snprintf(id + 2 * k, 3, "%02x", (unsigned)field(d, size, 48 + k, 1));
  int version = field(d, size, 8, 4) == 1 ? 1 : 2;
  snprintf(p, sizeof p, "%s/manifest.json", g_dir);
  FILE *f = fopen(p, "w");
  if (!f) return;
  fprintf(f, "{\"format\":\"esmtrain-dataset\",\"version\":%d,%s%s%s\"shards\":[{\"file\":"
          "\"train-00000.shard\",\"split\":\"train\",\"records\":%llu,\"tokens\":%llu,"
          "\"crc32\":%llu}]}", version, version == 2 ? "\"dataset_id\":\"" : "",
          version == 2 ? id : "", version == 2 ? "\"," : "",
          (unsigned long long)(field(d, size, 16, 8) & 0xffffffffffffull),
          (unsigned long long)(field(d, size, 24, 8) & 0xffffffffffffull),
          (unsigned long long)field(d, size, 40, 4));
  fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char p[128];
  snprintf(p, sizeof p, "%s/train-00000.shard", g_dir);
  FILE *f = fopen(p, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  write_manifest(data, size);
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
