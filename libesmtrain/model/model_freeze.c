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

esmt_status esmt_model_setup_training(esmt_model *m) {
  const char *fn = "esmt_model_create";
  const esmt_layout *ly = &m->layout;
  const int frozen = m->cfg.frozen_layers;
  /* part_bounds[1 + l] is layer l's first element, part_bounds[L + 1] the final LayerNorm's */
  m->train_from_layer = frozen == ESMT_FREEZE_ENCODER ? m->L + 1 : frozen;
  m->train_lo = frozen == ESMT_FREEZE_ENCODER ? ly->cls_lo
                : frozen > 0                 ? ly->part_bounds[1 + frozen]
                                             : 0;
  /* LoRA: the adapters (after the task head) and the head train; backward
   * runs through every layer for the adapters but no encoder weight
   * gets a gradient */
  m->base_frozen = m->cfg.lora_rank > 0;
  if (m->base_frozen) m->train_lo = ly->cls_lo;
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
