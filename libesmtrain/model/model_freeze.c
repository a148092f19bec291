/* SPDX-License-Identifier: MIT */
/* What trains (esmt_model_config.frozen_layers, docs/finetune.md). The flat
 * layout puts the embedding first, then the layers in order, the final
 * LayerNorm, the LM head and the task head last, so what trains is a
 * suffix [train_lo, total): the parameter memory holds the optimizer's
 * moments for that suffix only (esmt_param_env.opt_lo), backward stops
 * below the first layer that trains, and the optimizer steps only the
 * tensors that train (with a task head, the unused LM head is frozen).
 * LoRA's adapters come last, so with them what trains is still a suffix. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

static int is_lm_head(const esmt_tensor_info *t) { return !strncmp(t->name, "lm_head.", 8); }

uint64_t esmt_layout_train_lo(const esmt_model_config *c, const esmt_layout *ly) {
  /* LoRA: the adapters (after the task head) and the head train */
  if (c->lora_rank > 0 || c->frozen_layers == ESMT_FREEZE_ENCODER) return ly->cls_lo;
  /* part_bounds[1 + l] is layer l's first element, part_bounds[L + 1] the final LayerNorm's */
  return c->frozen_layers > 0 ? ly->part_bounds[1 + c->frozen_layers] : 0;
}

esmt_status esmt_model_setup_training(esmt_model *m) {
  const char *fn = "esmt_model_create";
  const esmt_layout *ly = &m->layout;
  const int frozen = m->cfg.frozen_layers;
  m->train_from_layer = frozen == ESMT_FREEZE_ENCODER ? m->L + 1 : frozen;
  m->train_lo = esmt_layout_train_lo(&m->cfg, ly);
  /* LoRA: backward runs through every layer for the adapters but no
   * encoder weight gets a gradient */
  m->base_frozen = m->cfg.lora_rank > 0;
  const int head = m->cfg.head != ESMT_HEAD_NONE;
  m->opt_tensors = malloc((size_t)ly->count * sizeof *m->opt_tensors);
  if (!m->opt_tensors) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  /* the encoder's (or the adapters') first, then the task head's, which
   * may have its own learning rate (esmt_optimizer_config.head_lr_scale) */
  m->n_opt_tensors = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < ly->count; i++) {
      const esmt_tensor_info *t = &ly->tensors[i];
      const int in_head = !strncmp(t->name, "classifier.", 11);
      if (t->offset >= m->train_lo && !(head && is_lm_head(t)) && in_head == pass)
        m->opt_tensors[m->n_opt_tensors++] = *t;
    }
    if (!pass) m->n_opt_body = m->n_opt_tensors;
  }
  return ESMT_OK;
}

void esmt_model_hold_encoder(esmt_model *m, int hold) { m->hold_encoder = hold != 0; }

int esmt_model_backward_from_layer(const esmt_model *m) {
  return m->hold_encoder ? m->L + 1 : m->train_from_layer;
}
