/* SPDX-License-Identifier: MIT */
/* Reading configuration keys inside the library. The key names in the code
 * must exist in the schema with the type read: a typo or a type mismatch is
 * a bug in esmtrain, and it fails loudly (ESMT_ERR_INTERNAL naming the key
 * and the closest real one) instead of reading as 0. A reader keeps the
 * first failure: a block of reads is followed by one esmt_cfg_status(). */
#ifndef ESMTRAIN_CONFIG_READ_H
#define ESMTRAIN_CONFIG_READ_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

typedef struct esmt_config_reader {
  const esmt_config *cfg;
  esmt_status status; /* ESMT_OK, or the first failed read's */
  char first_error[512];
} esmt_config_reader;

ESMT_HIDDEN void esmt_cfg_reader_init(esmt_config_reader *r, const esmt_config *cfg);

/* The key's value; after a failure (this read's or an earlier one) 0, "" or
 * false, and r->status set. */
ESMT_HIDDEN int64_t esmt_cfg_int(esmt_config_reader *r, const char *key);
ESMT_HIDDEN double esmt_cfg_double(esmt_config_reader *r, const char *key);
ESMT_HIDDEN const char *esmt_cfg_string(esmt_config_reader *r, const char *key);
ESMT_HIDDEN int esmt_cfg_bool(esmt_config_reader *r, const char *key);
ESMT_HIDDEN uint64_t esmt_cfg_bytes(esmt_config_reader *r, const char *key);

/* The model's shape (model.num_layers, hidden_size, num_heads, ffn_size,
 * max_positions) into mc: the trainer, fine-tuning and the planner read it
 * alike. */
ESMT_HIDDEN void esmt_cfg_model_shape(esmt_config_reader *r, esmt_model_config *mc);

/* offload.stream's value as an esmt_stream_level; -1 for "auto". */
ESMT_HIDDEN int esmt_config_stream_level(const char *value);

/* ESMT_OK, or the first failure again as the last error, "<fn>: internal
 * error: ..." (so that later calls cannot have overwritten its message). */
ESMT_HIDDEN esmt_status esmt_cfg_status(const esmt_config_reader *r, const char *fn);

#endif
