/* Shared by config.c (values) and config_yaml.c (files and presets). */
#ifndef ESMTRAIN_CONFIG_INTERNAL_H
#define ESMTRAIN_CONFIG_INTERNAL_H

#include "config_schema.h"

ESMT_HIDDEN int esmt_config_find(const char *key);
ESMT_HIDDEN esmt_status esmt_config_unknown_key(const char *where, const char *key);
/* Set with a location prefix for messages ("file.yaml:12: "). */
ESMT_HIDDEN esmt_status esmt_config_set_at(esmt_config *c, const char *key, const char *value,
                                           const char *where);
ESMT_HIDDEN int esmt_parse_bytes(const char *s, uint64_t *out);

#endif
