/* SPDX-License-Identifier: MIT */
/* ESM-2 size presets and config validation. */
#include <math.h>

#include "model.h"

#include <string.h>

typedef struct preset {
  const char *name;
  int L, d, H;
} preset;

/* From the ESM-2 paper / fair-esm pretrained configs (FFN = 4d). */
static const preset k_presets[] = {
    {"esm2_t6_8M", 6, 320, 20},      {"esm2_t12_35M", 12, 480, 20},
    {"esm2_t30_150M", 30, 640, 20},  {"esm2_t33_650M", 33, 1280, 20},
    {"esm2_t36_3B", 36, 2560, 40},   {"esm2_t48_15B", 48, 5120, 40},
};
#define N_PRESETS ((int)(sizeof k_presets / sizeof k_presets[0]))

const char *esmt_model_preset_name(int i) {
  return i >= 0 && i < N_PRESETS ? k_presets[i].name : NULL;
}

esmt_status esmt_model_config_preset(const char *name, esmt_model_config *cfg) {
  const char *fn = "esmt_model_config_preset";
  ESMT_CHECK_ARG(name && cfg, fn, "name and cfg must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_model_config", cfg->struct_size,
                                     ESMT_MODEL_CONFIG_MIN_SIZE);
  if (st) return st;
  for (int i = 0; i < N_PRESETS; i++) {
    if (strcmp(name, k_presets[i].name) != 0) continue;
    esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
    c.num_layers = k_presets[i].L;
    c.hidden_size = k_presets[i].d;
    c.num_heads = k_presets[i].H;
    c.ffn_size = 4 * k_presets[i].d;
    uint32_t size = cfg->struct_size; /* an older caller's struct may end before precision */
    memcpy(cfg, &c, size < sizeof c ? size : sizeof c);
    cfg->struct_size = size;
    return ESMT_OK;
  }
  const char *names[N_PRESETS];
  for (int i = 0; i < N_PRESETS; i++) names[i] = k_presets[i].name;
  return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: unknown model '%s' (did you mean '%s'?)", fn,
                   name, esmt_closest(name, names, N_PRESETS));
}

esmt_status esmt_model_config_validate(const esmt_model_config *c) {
  const char *fn = "model config";
  if (c->num_layers < 1 || c->num_layers > 1024)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: num_layers %d is outside [1, 1024]", fn, c->num_layers);
  if (c->hidden_size < 2 || c->hidden_size > 65536)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: hidden_size %d is outside [2, 65536]", fn,
                     c->hidden_size);
  if (c->num_heads < 1 || c->hidden_size % c->num_heads != 0)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: hidden_size %d is not divisible by num_heads %d", fn,
                     c->hidden_size, c->num_heads);
  if ((c->hidden_size / c->num_heads) % 2 != 0)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: head dim %d must be even for rotary embeddings", fn,
                     c->hidden_size / c->num_heads);
  if (c->ffn_size < 0 || c->ffn_size > 1 << 20)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: ffn_size %d is invalid", fn, c->ffn_size);
  if (c->vocab_size != ESMT_VOCAB_SIZE)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: vocab_size must be %d (the ESM-2 alphabet), got %d",
                     fn, ESMT_VOCAB_SIZE, c->vocab_size);
  if (c->max_positions < 3 || c->max_positions > 1 << 16)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: max_positions %d is outside [3, 65536]", fn,
                     c->max_positions);
  if (!(c->layer_norm_eps > 0.0f) || c->layer_norm_eps > 1e-2f)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: layer_norm_eps %g is outside (0, 0.01]", fn,
                     (double)c->layer_norm_eps);
  if (!(c->mask_ratio_train >= 0.0f && c->mask_ratio_train < 1.0f))
    return esmt_fail(ESMT_ERR_CONFIG, "%s: mask_ratio_train %g is outside [0, 1)", fn,
                     (double)c->mask_ratio_train);
  if (c->struct_size < offsetof(esmt_model_config, frozen_layers) + sizeof c->frozen_layers)
    return ESMT_OK; /* a caller from before the task heads: the masked-LM model */
  if (c->head < ESMT_HEAD_NONE || c->head > ESMT_HEAD_RESIDUE_CLASS)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: head %d is not an esmt_head_kind", fn, (int)c->head);
  if (c->head != ESMT_HEAD_NONE && (c->num_labels < 1 || c->num_labels > 1 << 20))
    return esmt_fail(ESMT_ERR_CONFIG, "%s: num_labels %d is outside [1, %d]", fn, c->num_labels,
                     1 << 20);
  if ((c->head == ESMT_HEAD_SEQ_CLASS || c->head == ESMT_HEAD_RESIDUE_CLASS) && c->num_labels < 2)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: a classification head needs num_labels >= 2 (got %d)",
                     fn, c->num_labels);
  if (c->pooling != ESMT_POOL_CLS && c->pooling != ESMT_POOL_MEAN)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: pooling %d is neither ESMT_POOL_CLS nor "
                     "ESMT_POOL_MEAN", fn, (int)c->pooling);
  if (c->frozen_layers < ESMT_FREEZE_ENCODER || c->frozen_layers > c->num_layers)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: frozen_layers %d is outside [%d, num_layers %d]", fn,
                     c->frozen_layers, ESMT_FREEZE_ENCODER, c->num_layers);
  if (c->frozen_layers == ESMT_FREEZE_ENCODER && c->head == ESMT_HEAD_NONE)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: frozen_layers ESMT_FREEZE_ENCODER needs a task head "
                     "(nothing else would train)", fn);
  if (c->struct_size < offsetof(esmt_model_config, lora_targets) + sizeof c->lora_targets)
    return ESMT_OK; /* a caller from before LoRA */
  if (c->lora_rank == 0) return ESMT_OK;
  if (c->lora_rank < 0 || c->lora_rank > c->hidden_size)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: lora_rank %d is outside [0, hidden_size %d]", fn,
                     c->lora_rank, c->hidden_size);
  if (!(c->lora_alpha > 0.0f) || !isfinite(c->lora_alpha))
    return esmt_fail(ESMT_ERR_CONFIG, "%s: lora_alpha %g must be > 0", fn, (double)c->lora_alpha);
  if (!(c->lora_dropout >= 0.0f && c->lora_dropout < 1.0f))
    return esmt_fail(ESMT_ERR_CONFIG, "%s: lora_dropout %g is outside [0, 1)", fn,
                     (double)c->lora_dropout);
  const unsigned all = ESMT_LORA_QUERY | ESMT_LORA_KEY | ESMT_LORA_VALUE | ESMT_LORA_ATTN_OUT |
                       ESMT_LORA_FFN_DOWN | ESMT_LORA_FFN_UP;
  if (!c->lora_targets || (c->lora_targets & ~all))
    return esmt_fail(ESMT_ERR_CONFIG, "%s: lora_targets 0x%x must be a non-empty set of "
                     "ESMT_LORA_* bits (0x%x)", fn, c->lora_targets, all);
  if (c->frozen_layers != 0)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: LoRA freezes the encoder itself: frozen_layers must "
                     "be 0 (got %d)", fn, c->frozen_layers);
  return ESMT_OK;
}

esmt_status esmt_model_config_param_count(const esmt_model_config *cfg, uint64_t *count) {
  const char *fn = "esmt_model_config_param_count";
  ESMT_CHECK_ARG(cfg && count, fn, "cfg and count must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_model_config", cfg->struct_size,
                                     ESMT_MODEL_CONFIG_MIN_SIZE);
  if (st) return st;
  st = esmt_model_config_validate(cfg);
  if (st) return st;
  uint64_t d = (uint64_t)cfg->hidden_size, V = (uint64_t)cfg->vocab_size;
  uint64_t F = cfg->ffn_size ? (uint64_t)cfg->ffn_size : 4 * d;
  uint64_t layer = 2 * d + 3 * d * d + 3 * d + d * d + d + 2 * d + F * d + F + d * F + d;
  *count = V * d + (uint64_t)cfg->num_layers * layer + 2 * d + d * d + d + 2 * d + V;
  if (cfg->struct_size >= offsetof(esmt_model_config, num_labels) + sizeof cfg->num_labels &&
      cfg->head != ESMT_HEAD_NONE) { /* the task head (model_layout.c) */
    const uint64_t C = (uint64_t)cfg->num_labels;
    *count += cfg->head == ESMT_HEAD_RESIDUE_CLASS ? C * d + C : d * d + d + C * d + C;
  }
  if (cfg->struct_size >= offsetof(esmt_model_config, lora_targets) + sizeof cfg->lora_targets &&
      cfg->lora_rank > 0) /* LoRA's A [r, in] and B [out, r] (model_lora.c) */
    *count += (uint64_t)cfg->num_layers * esmt_lora_layer_params(cfg);
  return ESMT_OK;
}

esmt_status esmt_model_train_flops(const esmt_model_config *cfg, int batch, int seq_len,
                                   double *flops) {
  const char *fn = "esmt_model_train_flops";
  ESMT_CHECK_ARG(cfg && flops, fn, "cfg and flops must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_model_config", cfg->struct_size,
                                     ESMT_MODEL_CONFIG_MIN_SIZE);
  if (st) return st;
  if (batch < 0 || seq_len < 0)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: negative batch or seq_len", fn);
  double d = cfg->hidden_size, F = cfg->ffn_size ? cfg->ffn_size : 4 * d, L = cfg->num_layers;
  double matmul = L * (4 * d * d + 2 * d * F) + d * d + d * cfg->vocab_size;
  double B = batch, T = seq_len;
  *flops = 6.0 * matmul * B * T + 12.0 * L * d * T * T * B;
  return ESMT_OK;
}
