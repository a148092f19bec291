/* SPDX-License-Identifier: MIT */
/* libFuzzer: the Hugging Face config.json reader. The text goes to the
 * parser; a config it accepts with bounded sizes is also checked the way
 * model creation checks it (parameter count), and every 64th input goes
 * through the whole import of a directory holding it (no weights there,
 * so the import stops after the config and a model of that shape). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "esmtrain/esmtrain.h"
#include "fuzz_common.h"
#include "hf_import.h"

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
  static unsigned n;
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  if (esmt_hf_config_parse((const char *)data, size, "config.json", &mc) == ESMT_OK) {
    uint64_t params = 0;
    esmt_model_config_param_count(&mc, &params);
  }
  if (n++ % 64 || size >= 4096) return 0; /* bounded sizes: a config may ask for 15B */
  char p[128];
  snprintf(p, sizeof p, "%s/config.json", g_dir);
  FILE *f = fopen(p, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  esmt_model *m = NULL;
  if (esmt_model_import_hf(g_ctx, g_dir, &m) == ESMT_OK) esmt_model_destroy(m);
  return 0;
}
