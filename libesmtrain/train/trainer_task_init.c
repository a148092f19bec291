/* SPDX-License-Identifier: MIT */
/* esmt_trainer_init_from for a model with a task head or LoRA adapters:
 * a pre-trained checkpoint or Hugging Face directory holds the encoder
 * (and the masked-LM head) but no classifier or adapters. Its weights are
 * loaded into a plain model of the same shape, then copied tensor by
 * tensor into the task model, whose head and adapters keep their fresh
 * initialisation. A checkpoint of the task model itself (a fine-tuning
 * run's) is loaded whole. Host memory: the weights twice, while it runs. */
#include <stdlib.h>
#include <string.h>

#include "trainer_finetune.h"

static esmt_status copy_tensors(esmt_model *from, esmt_model *to) {
  int n = 0;
  esmt_status st = esmt_model_tensor_count(from, &n);
  float *buf = NULL;
  uint64_t cap = 0;
  for (int i = 0; !st && i < n; i++) {
    esmt_tensor_info info = ESMT_TENSOR_INFO_INIT;
    if ((st = esmt_model_tensor_info(from, i, &info))) break;
    if (info.numel > cap) {
      float *p = realloc(buf, info.numel * sizeof *p);
      if (!p) { st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory copying %s", info.name); break; }
      buf = p;
      cap = info.numel;
    }
    st = esmt_model_read_tensor(from, info.name, ESMT_BUF_PARAMS, buf, info.numel);
    if (!st) st = esmt_model_write_tensor(to, info.name, ESMT_BUF_PARAMS, buf, info.numel);
  }
  free(buf);
  return st;
}

esmt_status esmt_trainer_init_encoder(esmt_trainer *t, const char *spec) {
  const int hf = strncmp(spec, "hf:", 3) == 0;
  /* a checkpoint of this very model (a fine-tuning run's): head and all */
  if (!hf && esmt_model_load(t->m, spec, 0, NULL) == ESMT_OK) {
    esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_INFO, "weights loaded from %s, its task head "
                    "and adapters included", spec);
    return ESMT_OK;
  }
  esmt_model_config base = ESMT_MODEL_CONFIG_INIT;
  esmt_status st = esmt_model_get_config(t->m, &base);
  if (st) return st;
  base.head = ESMT_HEAD_NONE; /* the pre-trained model's own shape */
  base.num_labels = 0;
  base.frozen_layers = 0;
  base.lora_rank = 0;
  base.lora_targets = 0;
  esmt_model *plain = NULL;
  if ((st = esmt_model_create(t->m->ctx, &base, 0, &plain))) return st;
  st = hf ? esmt_model_load_hf(plain, spec + 3) : esmt_model_load(plain, spec, 0, NULL);
  if (!st) st = copy_tensors(plain, t->m);
  esmt_model_destroy(plain);
  if (st) return st;
  esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_INFO, "encoder weights loaded from %s (the task "
                  "head and adapters start fresh)", hf ? spec + 3 : spec);
  return ESMT_OK;
}
