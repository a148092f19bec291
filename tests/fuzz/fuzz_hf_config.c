/* libFuzzer: a Hugging Face directory whose config.json is the input (the
 * model files are absent, so import stops after the config and sizes). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "esmtrain/esmtrain.h"
#include "fuzz_common.h"

static char g_dir[64];
static esmt_context *g_ctx;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  snprintf(g_dir, sizeof g_dir, "/tmp/esmt-fuzz-hf-%d", (int)getpid());
  mkdir(g_dir, 0755);
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend = "cpu";
  if (esmt_context_create(&o, &g_ctx) != ESMT_OK) abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char p[128];
  snprintf(p, sizeof p, "%s/config.json", g_dir);
  FILE *f = fopen(p, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  esmt_model *m = NULL;
  /* Bounded sizes only: a fuzzed config may ask for a 15B model. */
  if (size < 4096 && esmt_model_import_hf(g_ctx, g_dir, &m) == ESMT_OK) esmt_model_destroy(m);
  return 0;
}
