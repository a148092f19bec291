/* The one table of configuration keys (config_schema.c). */
#ifndef ESMTRAIN_CONFIG_SCHEMA_H
#define ESMTRAIN_CONFIG_SCHEMA_H

#include "internal.h"

typedef struct esmt_key_def {
  const char *name;
  esmt_config_type type;
  const char *def;
  const char *choices;   /* enums: "a|b|c" */
  double min, max;
  const char *doc;
} esmt_key_def;

ESMT_HIDDEN extern const esmt_key_def esmt_config_keys[];
ESMT_HIDDEN extern const int esmt_config_nkeys;

#endif
