/* SPDX-License-Identifier: MIT */
/* What the task-head suites (test_finetune, test_lora_dropout,
 * test_checkpoint_task, test_predict) build alike: a one-thread context on
 * the build's cpu backend, the small model they share, and LoRA B matrices
 * set nonzero so that the adapters change the outputs. */
#ifndef ESMT_HEAD_FIXTURE_H
#define ESMT_HEAD_FIXTURE_H

#include "esmtrain/esmtrain.h"

/* The cpu backend, one thread, warnings and errors only; fails the test
 * when it cannot be created. */
esmt_context *head_fixture_ctx(void);

/* 2 layers, width 32, 4 heads, 16 positions, fp32, `head` with
 * `num_labels` outputs; no LoRA, nothing frozen. */
esmt_model_config head_fixture_config(esmt_head_kind head, int num_labels);

/* Every ".lora_B" tensor of `m` (peft starts them at zero) set to
 * step * ((k * 7 + i) % period) - offset at element k of tensor i. */
void head_fixture_set_lora_b(esmt_model *m, float step, unsigned period, float offset);

#endif
