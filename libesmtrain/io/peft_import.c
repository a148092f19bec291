/* SPDX-License-Identifier: MIT */
/* esmt_model_import_peft: a transformers base directory and a PEFT LoRA
 * adapter on it into one model with lora_* set (peft.h). Everything is
 * checked before the model is returned: the adapter's config (only what
 * esmtrain computes: plain LoRA on all layers), its tensors (known modules,
 * the base's shapes) and, when the adapter records one, the fingerprint of
 * the base it was trained on. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "hf_import.h"
#include "json_input.h"
#include "peft.h"
#include "safetensors.h"

#define PATH_CAP 4200

/* peft's rule for a list entry: the module's name, or its dotted suffix. */
static int matches_target(const char *entry, const esmt_model_config *c) {
  for (int t = 0; t < ESMT_LORA_TARGETS; t++) {
    int in, out;
    char key[96];
    snprintf(key, sizeof key, "layer.0.%s", esmt_lora_target(c, t, &in, &out));
    const size_t kl = strlen(key), el = strlen(entry);
    if (el < kl && key[kl - el - 1] == '.' && !strcmp(key + kl - el, entry)) return 1;
  }
  return 0;
}

/* adapter_config.json into the lora_* fields (targets come from the
 * tensors); what esmtrain does not compute is refused by name. */
static esmt_status read_adapter_config(const char *path, esmt_model_config *c) {
  json_t *j = NULL;
  esmt_status st = esmt_json_load_input(path, "PEFT adapter config", &j);
  if (st) return st;
  const char *type = json_string_value(json_object_get(j, "peft_type"));
  json_t *r = json_object_get(j, "r"), *alpha = json_object_get(j, "lora_alpha");
  json_t *drop = json_object_get(j, "lora_dropout"), *targets = json_object_get(j, "target_modules");
  const char *bias = json_string_value(json_object_get(j, "bias"));
  static const char *const k_false[] = {"use_rslora", "use_dora", "fan_in_fan_out"};
  static const char *const k_empty[] = {"layers_to_transform", "rank_pattern", "alpha_pattern",
                                        "layer_replication"};
  if (!type || strcmp(type, "LORA"))
    st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: peft_type is '%s', not LORA", path,
                   type ? type : "missing");
  else if (!json_is_integer(r) || json_integer_value(r) < 1 || json_integer_value(r) > 65536)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: r is missing or not a rank in 1..65536", path);
  else if (!json_is_number(alpha))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: lora_alpha is missing or not a number", path);
  else if (drop && !json_is_number(drop))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: lora_dropout is not a number", path);
  else if (bias && strcmp(bias, "none"))
    st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: bias '%s': esmtrain's LoRA trains no biases "
                   "(bias \"none\")", path, bias);
  for (int i = 0; i < 3 && !st; i++)
    if (json_is_true(json_object_get(j, k_false[i])))
      st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: %s true is not supported (plain LoRA only)", path,
                     k_false[i]);
  for (int i = 0; i < 4 && !st; i++) {
    json_t *v = json_object_get(j, k_empty[i]);
    if (v && !json_is_null(v) && !(json_is_object(v) && !json_object_size(v)))
      st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: %s is set: esmtrain adapts every layer with one "
                     "rank and alpha", path, k_empty[i]);
  }
  size_t i;
  json_t *entry;
  if (!st && json_is_array(targets))
    json_array_foreach(targets, i, entry) {
      const char *name = json_string_value(entry);
      if (!name || !matches_target(name, c)) {
        st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: unknown target module '%s' (esmtrain adapts "
                       "attention.self.query, .key, .value, attention.output.dense, "
                       "intermediate.dense and output.dense)", path, name ? name : "not a string");
        break;
      }
    }
  if (!st) {
    c->lora_rank = (int)json_integer_value(r);
    c->lora_alpha = (float)json_number_value(alpha);
    c->lora_dropout = drop ? (float)json_number_value(drop) : 0.0f;
  }
  json_decref(j);
  return st;
}

/* The adapter file's tensors name the adapted modules: lora_targets from
 * them, every other name refused. */
static esmt_status adapter_targets(const esmt_st_file *f, const char *path, esmt_model_config *c) {
  unsigned targets = 0;
  const size_t pl = strlen(ESMT_PEFT_PREFIX);
  for (int i = 0; i < f->count; i++) {
    const char *name = f->tensors[i].name;
    if (!strncmp(name, ESMT_PEFT_PREFIX "classifier.", pl + 11)) continue;
    int layer = -1, used = 0, t = 0;
    if (!strncmp(name, ESMT_PEFT_PREFIX, pl))
      sscanf(name + pl, "esm.encoder.layer.%d.%n", &layer, &used);
    for (; used && t < ESMT_LORA_TARGETS; t++) {
      int in, out;
      const char *mod = esmt_lora_target(c, t, &in, &out);
      const char *rest = name + pl + used;
      if (!strncmp(rest, mod, strlen(mod)) && (!strcmp(rest + strlen(mod), ".lora_A.weight") ||
                                               !strcmp(rest + strlen(mod), ".lora_B.weight")))
        break;
    }
    if (!used || layer < 0 || layer >= c->num_layers || t == ESMT_LORA_TARGETS)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: tensor '%s' is not a LoRA adapter esmtrain knows "
                       "(lora_A/lora_B of attention.self.query, .key, .value, "
                       "attention.output.dense, intermediate.dense or output.dense in layers "
                       "0..%d, or the classifier)", path, name, c->num_layers - 1);
    targets |= 1u << t;
  }
  if (!targets) return esmt_fail(ESMT_ERR_FORMAT, "%s: holds no LoRA adapter", path);
  c->lora_targets = targets;
  return ESMT_OK;
}

/* Adapters (every one the config implies must be there) and the
 * classifier, if the file has it, over the base's values in `host`. */
static int optional_in_adapter(const esmt_model *m, const char *name) {
  (void)m;
  return strncmp(name, ESMT_PEFT_PREFIX, strlen(ESMT_PEFT_PREFIX)) != 0; /* base or head */
}

static esmt_status load_adapter(esmt_model *m, const esmt_st_file *f, const char *path) {
  float *host = malloc(m->layout.total * sizeof *host);
  if (!host) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  esmt_status st = esmt_flat_download(m, host, m->mem.master);
  char have[64], want[64];
  const char *recorded = esmt_st_meta_get(f, ESMT_PEFT_BASE_KEY);
  if (!st && recorded) {
    esmt_peft_base_fingerprint(m, host, have, sizeof have);
    snprintf(want, sizeof want, "%s", recorded);
    if (strcmp(have, want))
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: the adapter was trained on another base model (its "
                     "base's weights are %s, this base's %s): load it on the base it was "
                     "exported with", path, want, have);
  }
  /* the adapters by their own names; the head under peft's prefix */
  if (!st) st = esmt_read_flat_keep(m, f, path, "", host, 0, optional_in_adapter);
  for (int i = 0; i < m->layout.count && !st; i++) {
    const esmt_tensor_info *t = &m->layout.tensors[i];
    if (t->offset < m->layout.cls_lo || !optional_in_adapter(m, t->name)) continue;
    char key[160];
    snprintf(key, sizeof key, "%s%s", ESMT_PEFT_PREFIX, t->name);
    const esmt_st_tensor *s = esmt_st_find(f, key);
    if (!s) continue; /* the base's head stays */
    if (s->numel != t->numel || s->shape[0] != t->shape[0])
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: tensor '%s' has %llu values, the base's %s has "
                     "%llu (shape [%lld, ...]): the head does not match the base", path, key,
                     (unsigned long long)s->numel, t->name, (unsigned long long)t->numel,
                     (long long)t->shape[0]);
    else esmt_st_to_f32(s, host + t->offset);
  }
  if (!st) st = esmt_flat_upload(m, host, m->mem.master);
  free(host);
  return st;
}

esmt_status esmt_model_import_peft(esmt_context *ctx, const char *base_dir,
                                   const char *adapter_dir, esmt_model **out) {
  const char *fn = "esmt_model_import_peft";
  ESMT_CHECK_ARG(out, fn, "out is NULL");
  *out = NULL;
  ESMT_CHECK_ARG(ctx && base_dir && adapter_dir, fn, "ctx, base_dir and adapter_dir must not be NULL");
  char path[PATH_CAP], cfg_path[PATH_CAP];
  snprintf(path, sizeof path, "%s/adapter_model.safetensors", adapter_dir);
  snprintf(cfg_path, sizeof cfg_path, "%s/adapter_config.json", adapter_dir);
  esmt_model_config mc;
  esmt_status st = esmt_hf_read_config(base_dir, &mc);
  if (!st) st = read_adapter_config(cfg_path, &mc);
  esmt_st_file f;
  memset(&f, 0, sizeof f);
  if (!st) st = esmt_st_open(path, &f);
  if (!st) st = adapter_targets(&f, path, &mc);
  esmt_model *m = NULL;
  if (!st) st = esmt_model_create(ctx, &mc, 0, &m);
  if (!st) st = esmt_model_load_hf(m, base_dir);
  if (!st) st = load_adapter(m, &f, path);
  esmt_st_close(&f);
  if (st) {
    esmt_model_destroy(m);
    return esmt_fail_prefix(st, "%s: ", fn);
  }
  *out = m;
  return ESMT_OK;
}
