/* SPDX-License-Identifier: MIT */
/* esmt_trainer_init_from for a model with a task head or LoRA adapters:
 * a pre-trained checkpoint or Hugging Face directory holds the encoder
 * (and the masked-LM head) but no classifier or adapters. Its weights are
 * loaded into a plain model of the same shape, then copied tensor by
 * tensor into the task model, whose head and adapters keep their fresh
 * initialisation. A checkpoint of the task model itself (a fine-tuning
 * run's) is loaded whole; one of another task (its head and LoRA as
 * trainer.model records them, io/model_record.h) gives every tensor the
 * new model has in the same size, its LoRA adapters merged first when the
 * new model has others.
 * Host memory: the weights twice, while it runs. */
#include <stdlib.h>
#include <string.h>

#include "trainer_finetune.h"

/* Copy each of from's tensors that `to` has in the same size; the others
 * (a classifier of another task, adapters `to` lacks) are left out. */
static esmt_status copy_tensors(esmt_model *from, esmt_model *to) {
  int n = 0;
  esmt_status st = esmt_model_tensor_count(from, &n);
  float *buf = NULL;
  uint64_t cap = 0;
  for (int i = 0; !st && i < n; i++) {
    esmt_tensor_info info = ESMT_TENSOR_INFO_INIT, mine = ESMT_TENSOR_INFO_INIT;
    int at = -1;
    if ((st = esmt_model_tensor_info(from, i, &info))) break;
    if (esmt_model_find_tensor(to, info.name, &at) || esmt_model_tensor_info(to, at, &mine) ||
        mine.numel != info.numel) {
      esmt_clear_error(); /* not in `to`: a tensor the new task has not */
      continue;
    }
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

/* The table's label names back on the model after a whole load, with a
 * word when the checkpoint named its outputs otherwise. */
static esmt_status keep_table_names(esmt_trainer *t, const char *spec) {
  const esmt_labelled *data = esmt_finetune_owned_data(t->finetune_owned);
  if (!data) return ESMT_OK;
  const int n = esmt_labelled_num_labels(data);
  const char **names = calloc((size_t)(n > 0 ? n : 1), sizeof *names);
  if (!names) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
  int same = 1;
  for (int i = 0; i < n; i++) {
    names[i] = esmt_labelled_label_name(data, i);
    const char *was = esmt_model_label_name(t->m, i);
    same &= !was || !strcmp(was, names[i]);
  }
  if (!same)
    esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_WARN, "%s named the head's outputs otherwise "
                    "than this table; they are renamed to the table's", spec);
  esmt_status st = esmt_model_set_label_names(t->m, names, n);
  free(names);
  return st;
}

/* A LoRA checkpoint into a model without the same adapters: fold them into
 * the weights first, so that what they learnt is kept. */
static esmt_status merge_foreign_adapters(esmt_model *from, const esmt_model *to) {
  if (from->cfg.lora_rank == 0) return ESMT_OK;
  if (from->cfg.lora_rank == to->cfg.lora_rank && from->cfg.lora_targets == to->cfg.lora_targets)
    return ESMT_OK;
  return esmt_model_lora_merge(from);
}

esmt_status esmt_trainer_init_encoder(esmt_trainer *t, const char *spec) {
  const int hf = strncmp(spec, "hf:", 3) == 0;
  /* a checkpoint of this very model (a fine-tuning run's): head and all */
  if (!hf && esmt_model_load(t->m, spec, 0, NULL) == ESMT_OK) {
    esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_INFO, "weights loaded from %s, its task head "
                    "and adapters included", spec);
    return keep_table_names(t, spec);
  }
  esmt_clear_error();
  esmt_model *from = NULL;
  esmt_status st = ESMT_OK;
  if (hf) {
    esmt_model_config base = ESMT_MODEL_CONFIG_INIT;
    if ((st = esmt_model_get_config(t->m, &base))) return st;
    base.head = ESMT_HEAD_NONE; /* the pre-trained model's own shape */
    base.num_labels = 0;
    base.frozen_layers = 0;
    base.lora_rank = 0;
    base.lora_targets = 0;
    if ((st = esmt_model_create(t->m->ctx, &base, 0, &from))) return st;
    st = esmt_model_load_hf(from, spec + 3);
  } else { /* the checkpoint as it was trained (its task record), head and adapters */
    st = esmt_model_create_from_checkpoint(t->m->ctx, spec, &from);
  }
  if (!st && (from->L != t->m->L || from->d != t->m->d || from->H != t->m->H ||
              from->F != t->m->F))
    st = esmt_fail(ESMT_ERR_STATE, "%s is a %d-layer d=%d H=%d FFN %d model, this one is "
                   "%d-layer d=%d H=%d FFN %d", spec, from->L, from->d, from->H, from->F,
                   t->m->L, t->m->d, t->m->H, t->m->F);
  if (!st) st = merge_foreign_adapters(from, t->m);
  if (!st) st = copy_tensors(from, t->m);
  esmt_model_destroy(from);
  if (st) return st;
  esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_INFO, "encoder weights loaded from %s (the task "
                  "head and adapters start fresh unless it had the same)", hf ? spec + 3 : spec);
  return ESMT_OK;
}
