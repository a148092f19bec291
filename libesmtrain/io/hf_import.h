/* SPDX-License-Identifier: MIT */
/* Reading a Hugging Face ESM-2 directory (hf_import.c). */
#ifndef ESMTRAIN_HF_IMPORT_H
#define ESMTRAIN_HF_IMPORT_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

/* config.json's text (len bytes; `path` names it in messages) to a model
 * config: model_type esm, rotary positions, token dropout, the post-
 * embedding LayerNorm and exact gelu are required; the sizes must be
 * integers. Does not check the sizes against each other (model creation
 * does). */
ESMT_HIDDEN esmt_status esmt_hf_config_parse(const char *text, size_t len, const char *path,
                                             esmt_model_config *mc);

/* DIR/config.json read and parsed as above. */
ESMT_HIDDEN esmt_status esmt_hf_read_config(const char *dir, esmt_model_config *mc);

#endif
