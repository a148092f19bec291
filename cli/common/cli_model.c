/* SPDX-License-Identifier: MIT */
/* A trained model for inference commands (embed, score): an esmtrain
 * checkpoint ("RUN_DIR", ".../latest", a checkpoint directory) or a
 * Hugging Face ESM-2 directory (config.json beside model.safetensors or
 * its index), on the backend asked for or the probe's choice. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static int exists(const char *dir, const char *name) {
  char path[4096];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &sb) == 0;
}

int cli_model_is_hf(const char *source) {
  return exists(source, "config.json") &&
         (exists(source, "model.safetensors") || exists(source, "model.safetensors.index.json") ||
          exists(source, "pytorch_model.bin"));
}

int cli_model_open(const char *cmd, const char *source, const char *backend, int threads,
                   esmt_context **ctx, esmt_model **model) {
  *ctx = NULL;
  *model = NULL;
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend = backend; /* NULL: $ESMTRAIN_BACKEND, else the probe's best */
  o.num_threads = threads;
  o.log = cli_log_stderr;
  o.log_level = ESMT_LOG_WARN;
  esmt_status st = esmt_context_create(&o, ctx);
  if (st) {
    cli_error(cmd, st);
    return 1;
  }
  st = cli_model_is_hf(source) ? esmt_model_import_hf(*ctx, source, model)
                               : esmt_model_create_from_checkpoint(*ctx, source, model);
  if (st) {
    char what[4200];
    snprintf(what, sizeof what, "%s: model %s", cmd, source);
    cli_error(what, st);
    esmt_context_destroy(*ctx);
    *ctx = NULL;
    return 1;
  }
  return 0;
}
