/* SPDX-License-Identifier: MIT */
/* PEFT LoRA adapter directories (peft_export.c writes, peft_import.c
 * reads): adapter_config.json (peft 0.12's LoraConfig fields) and
 * adapter_model.safetensors (peft's key names, the adapter name dropped:
 * base_model.model.esm.encoder.layer.L.<module>.lora_A.weight, and the
 * task head as base_model.model.classifier.*). */
#ifndef ESMTRAIN_PEFT_H
#define ESMTRAIN_PEFT_H

#include <stddef.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"
#include "model.h"

/* The adapter file's metadata key recording which base it was trained on. */
#define ESMT_PEFT_BASE_KEY "esmtrain.base_fingerprint"
/* The prefix peft gives the wrapped model's tensors. */
#define ESMT_PEFT_PREFIX "base_model.model."

/* "crc32:XXXXXXXX/N": the zlib crc32 of the encoder's tensors (the word
 * embedding, every layer, the final LayerNorm: names and fp32 values, N in
 * all) in `host` (the flat weights): the frozen base an adapter adapts. */
ESMT_HIDDEN void esmt_peft_base_fingerprint(const esmt_model *m, const float *host, char *out,
                                            size_t cap);

#endif
