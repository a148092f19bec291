/* SPDX-License-Identifier: MIT */
/* Shared by the configuration's translation units: config.c (the handle,
 * set/get), config_value.c (one value's parsing), config_validate.c,
 * config_emit.c (YAML out), config_yaml.c (YAML in), config_presets.c. */
#ifndef ESMTRAIN_CONFIG_INTERNAL_H
#define ESMTRAIN_CONFIG_INTERNAL_H

#include "esmtrain/esmtrain.h"
#include "config_schema.h"

struct esmt_config {
  char **value;        /* esmt_config_nkeys normalised texts, one per schema key */
  char *preset_path;   /* colon-separated dirs searched before the defaults, or NULL */
};

/* Index of `key` in the schema, or -1. */
ESMT_HIDDEN int esmt_config_find(const char *key);

/* ESMT_ERR_CONFIG "<where>unknown key 'k' (did you mean 'x'?)". */
ESMT_HIDDEN esmt_status esmt_config_unknown_key(const char *where, const char *key);

/* Set with a location prefix for messages ("file.yaml:12: "). */
ESMT_HIDDEN esmt_status esmt_config_set_at(esmt_config *c, const char *key, const char *value,
                                           const char *where);

/* Check `text` against key k and return its canonical form (malloc'ed) in
 * *out; errors name the key, the value and what is allowed. */
ESMT_HIDDEN esmt_status esmt_config_normalise(const esmt_key_def *k, const char *text,
                                              const char *where, char **out);

/* Path of preset `name` (NAME.yaml in the search path of c; c may be NULL). */
ESMT_HIDDEN esmt_status esmt_config_find_preset(const esmt_config *c, const char *name,
                                                char *path, size_t cap);

/* Apply a YAML file; depth counts nested includes. */
ESMT_HIDDEN esmt_status esmt_config_load_file(esmt_config *c, const char *path, int depth);

#endif
