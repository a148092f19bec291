/* SPDX-License-Identifier: MIT */
/* The one table of configuration keys (config_schema.c). */
#ifndef ESMTRAIN_CONFIG_SCHEMA_H
#define ESMTRAIN_CONFIG_SCHEMA_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

/* The model sizes esmt_model_config_preset knows (model.preset's choices). */
#define ESMT_MODEL_PRESETS \
  "esm2_t6_8M|esm2_t12_35M|esm2_t30_150M|esm2_t33_650M|esm2_t36_3B|esm2_t48_15B"

/* Capacity of per-key scratch arrays; config_schema.c checks the table fits. */
#define ESMT_CONFIG_MAX_KEYS 128

/* Schema bounds at or above this mean "unbounded" in messages. */
#define ESMT_CONFIG_UNBOUNDED 1e18

typedef struct esmt_key_def {
  const char *name;
  esmt_config_type type;
  const char *def;       /* default, as text */
  const char *choices;   /* enums: "a|b|c" */
  double min, max;       /* numbers and sizes: inclusive bounds */
  const char *doc;       /* one line */
} esmt_key_def;

ESMT_HIDDEN extern const esmt_key_def esmt_config_keys[];
ESMT_HIDDEN extern const int esmt_config_nkeys;

#endif
