/* SPDX-License-Identifier: MIT */
/* See config_read.h. */
#include "config_read.h"

#include <stdio.h>
#include <string.h>

void esmt_cfg_reader_init(esmt_config_reader *r, const esmt_config *cfg) {
  memset(r, 0, sizeof *r);
  r->cfg = cfg;
}

/* Record the first failure (the getter's message) and keep going. */
static int failed(esmt_config_reader *r, esmt_status st, const char *key) {
  if (!st) return 0;
  if (!r->status) {
    r->status = ESMT_ERR_INTERNAL;
    snprintf(r->first_error, sizeof r->first_error, "reading config key '%s': %s", key,
             esmt_last_error());
  }
  return 1;
}

int64_t esmt_cfg_int(esmt_config_reader *r, const char *key) {
  int64_t v = 0;
  if (r->status || failed(r, esmt_config_get_int(r->cfg, key, &v), key)) return 0;
  return v;
}

double esmt_cfg_double(esmt_config_reader *r, const char *key) {
  double v = 0;
  if (r->status || failed(r, esmt_config_get_double(r->cfg, key, &v), key)) return 0;
  return v;
}

const char *esmt_cfg_string(esmt_config_reader *r, const char *key) {
  const char *v = "";
  if (r->status || failed(r, esmt_config_get_string(r->cfg, key, &v), key)) return "";
  return v;
}

int esmt_cfg_bool(esmt_config_reader *r, const char *key) {
  int v = 0;
  if (r->status || failed(r, esmt_config_get_bool(r->cfg, key, &v), key)) return 0;
  return v;
}

uint64_t esmt_cfg_bytes(esmt_config_reader *r, const char *key) {
  uint64_t v = 0;
  if (r->status || failed(r, esmt_config_get_bytes(r->cfg, key, &v), key)) return 0;
  return v;
}

esmt_status esmt_cfg_status(const esmt_config_reader *r, const char *fn) {
  if (!r->status) return ESMT_OK;
  return esmt_fail(r->status, "%s: internal error (please report it): %s", fn, r->first_error);
}

void esmt_cfg_model_shape(esmt_config_reader *r, esmt_model_config *mc) {
  mc->num_layers = (int)esmt_cfg_int(r, "model.num_layers");
  mc->hidden_size = (int)esmt_cfg_int(r, "model.hidden_size");
  mc->num_heads = (int)esmt_cfg_int(r, "model.num_heads");
  mc->ffn_size = (int)esmt_cfg_int(r, "model.ffn_size");
  mc->max_positions = (int)esmt_cfg_int(r, "model.max_positions");
}
