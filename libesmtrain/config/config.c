/* SPDX-License-Identifier: MIT */
/* The configuration handle: every key of the schema held as validated,
 * canonical text; setters check values, typed getters parse them. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

int esmt_config_key_count(void) { return esmt_config_nkeys; }

esmt_status esmt_config_key_info(int index, esmt_config_key *info) {
  const char *fn = "esmt_config_key_info";
  ESMT_CHECK_ARG(info, fn, "info is NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_config_key", info->struct_size, sizeof *info);
  if (st) return st;
  if (index < 0 || index >= esmt_config_nkeys)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: index %d out of range [0, %d)", fn, index,
                     esmt_config_nkeys);
  const esmt_key_def *k = &esmt_config_keys[index];
  info->name = k->name;
  info->type = k->type;
  info->default_value = k->def;
  info->choices = k->choices;
  info->min = k->min;
  info->max = k->max;
  info->doc = k->doc;
  return ESMT_OK;
}

int esmt_config_find(const char *key) {
  for (int i = 0; i < esmt_config_nkeys; i++)
    if (strcmp(esmt_config_keys[i].name, key) == 0) return i;
  return -1;
}

/* The key a typo most likely meant: one the text is a prefix of
 * ("schedule.warmup", "optimizer"), else the closest by edit distance -
 * against the last component when the text has no section ("lrr"). */
static const char *closest_key(const char *key) {
  size_t n = strlen(key);
  for (int i = 0; i < esmt_config_nkeys && n > 0; i++)
    if (strncmp(esmt_config_keys[i].name, key, n) == 0) return esmt_config_keys[i].name;
  const char *names[ESMT_CONFIG_MAX_KEYS] = {NULL};
  int leaf = strchr(key, '.') == NULL;
  for (int i = 0; i < esmt_config_nkeys; i++) {
    const char *dot = strchr(esmt_config_keys[i].name, '.');
    names[i] = leaf && dot ? dot + 1 : esmt_config_keys[i].name;
  }
  const char *best = esmt_closest(key, names, esmt_config_nkeys);
  for (int i = 0; best && i < esmt_config_nkeys; i++)
    if (names[i] == best) return esmt_config_keys[i].name;
  return NULL;
}

esmt_status esmt_config_unknown_key(const char *where, const char *key) {
  const char *best = closest_key(key);
  if (best && strncmp(best, key, strlen(key)) == 0 && best[strlen(key)] == '.')
    return esmt_fail(ESMT_ERR_CONFIG, "%s'%s' is a section, not a key: set one of its keys "
                     "(e.g. '%s')", where, key, best);
  if (!best) return esmt_fail(ESMT_ERR_CONFIG, "%sunknown key '%s'", where, key);
  return esmt_fail(ESMT_ERR_CONFIG, "%sunknown key '%s' (did you mean '%s'?)", where, key, best);
}

static esmt_status put(esmt_config *c, int i, const char *v, const char *where) {
  char *n = NULL;
  esmt_status st = esmt_config_normalise(&esmt_config_keys[i], v, where, &n);
  if (st) return st;
  free(c->value[i]);
  c->value[i] = n;
  return ESMT_OK;
}

esmt_status esmt_config_create(esmt_config **out) {
  ESMT_CHECK_ARG(out, "esmt_config_create", "out is NULL");
  *out = NULL;
  esmt_config *c = calloc(1, sizeof *c);
  if (c) c->value = calloc((size_t)esmt_config_nkeys, sizeof *c->value);
  if (!c || !c->value) {
    free(c);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_config_create: out of memory");
  }
  for (int i = 0; i < esmt_config_nkeys; i++) {
    esmt_status st = put(c, i, esmt_config_keys[i].def, "default ");
    if (st) {
      esmt_config_destroy(c);
      return st == ESMT_ERR_OUT_OF_MEMORY ? st : esmt_fail_prefix(ESMT_ERR_INTERNAL, "esmt_config_create: ");
    }
  }
  *out = c;
  return ESMT_OK;
}

void esmt_config_destroy(esmt_config *c) {
  if (!c) return;
  for (int i = 0; c->value && i < esmt_config_nkeys; i++) free(c->value[i]);
  free(c->value);
  free(c->preset_path);
  free(c);
}

/* model.preset fills the sizes; the name is checked before anything changes. */
static esmt_status set_model_preset(esmt_config *c, int idx, const char *value, const char *where) {
  char *name = NULL;
  esmt_status st = esmt_config_normalise(&esmt_config_keys[idx], value, where, &name);
  if (st) return st;
  esmt_model_config m = ESMT_MODEL_CONFIG_INIT;
  st = esmt_model_config_preset(name, &m);
  if (st) {
    free(name);
    return esmt_fail_prefix(ESMT_ERR_CONFIG, "%s", where);
  }
  const struct { const char *k; int v; } sizes[] = {
      {"model.num_layers", m.num_layers}, {"model.hidden_size", m.hidden_size},
      {"model.num_heads", m.num_heads}, {"model.ffn_size", m.ffn_size}};
  char *text[4] = {NULL};
  for (int k = 0; k < 4 && !st; k++) {
    char buf[32];
    snprintf(buf, sizeof buf, "%d", sizes[k].v);
    st = esmt_config_normalise(&esmt_config_keys[esmt_config_find(sizes[k].k)], buf, where, &text[k]);
  }
  if (st) {
    free(name);
    for (int k = 0; k < 4; k++) free(text[k]);
    return st;
  }
  for (int k = 0; k < 4; k++) {
    int i = esmt_config_find(sizes[k].k);
    free(c->value[i]);
    c->value[i] = text[k];
  }
  free(c->value[idx]);
  c->value[idx] = name;
  return ESMT_OK;
}

esmt_status esmt_config_set_at(esmt_config *c, const char *key, const char *value,
                               const char *where) {
  int i = esmt_config_find(key);
  if (i < 0) return esmt_config_unknown_key(where, key);
  if (strcmp(key, "model.preset") == 0) return set_model_preset(c, i, value, where);
  return put(c, i, value, where);
}

esmt_status esmt_config_set(esmt_config *c, const char *key, const char *value) {
  ESMT_CHECK_ARG(c && key && value, "esmt_config_set", "config, key and value must not be NULL");
  return esmt_config_set_at(c, key, value, "");
}

/* "key=value" as given to --set; spaces around the key and value ignored. */
esmt_status esmt_config_set_assignment(esmt_config *c, const char *a) {
  ESMT_CHECK_ARG(c && a, "esmt_config_set_assignment", "config and assignment must not be NULL");
  const char *eq = strchr(a, '=');
  const char *k0 = a, *k1 = eq;
  while (k0 < k1 && *k0 == ' ') k0++;
  while (k1 > k0 && k1[-1] == ' ') k1--;
  if (!eq || k1 == k0)
    return esmt_fail(ESMT_ERR_CONFIG, "'%s' is not of the form key=value", a);
  char key[128];
  if ((size_t)(k1 - k0) >= sizeof key)
    return esmt_fail(ESMT_ERR_CONFIG, "'%.40s...': key too long", a);
  snprintf(key, sizeof key, "%.*s", (int)(k1 - k0), k0);
  const char *v = eq + 1;
  while (*v == ' ') v++;
  size_t vn = strlen(v);
  while (vn > 0 && v[vn - 1] == ' ') vn--;
  char *value = strndup(v, vn);
  if (!value) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "config: out of memory");
  esmt_status st = esmt_config_set_at(c, key, value, "");
  free(value);
  return st;
}

static const char *const k_type_names[] = {"an integer", "a number", "a boolean", "a string",
                                           "an enum", "a byte size"};

static esmt_status lookup(const esmt_config *c, const char *key, const void *dst,
                          esmt_config_type want, const char **text) {
  ESMT_CHECK_ARG(c && key && dst, "esmt_config_get", "config, key and value must not be NULL");
  int i = esmt_config_find(key);
  if (i < 0) return esmt_config_unknown_key("", key);
  esmt_config_type t = esmt_config_keys[i].type;
  int ok = t == want || (want == ESMT_CONFIG_INT && t == ESMT_CONFIG_BYTES) ||
           (want == ESMT_CONFIG_STRING && t == ESMT_CONFIG_ENUM) ||
           (want == ESMT_CONFIG_DOUBLE && (t == ESMT_CONFIG_INT || t == ESMT_CONFIG_BYTES));
  if (!ok)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "config key '%s' is %s, not %s", key,
                     k_type_names[t], k_type_names[want]);
  *text = c->value[i];
  return ESMT_OK;
}

esmt_status esmt_config_get_int(const esmt_config *c, const char *key, int64_t *v) {
  const char *t = NULL;
  esmt_status st = lookup(c, key, v, ESMT_CONFIG_INT, &t);
  if (!st) *v = (int64_t)strtoll(t, NULL, 10);
  return st;
}

esmt_status esmt_config_get_double(const esmt_config *c, const char *key, double *v) {
  const char *t = NULL;
  esmt_status st = lookup(c, key, v, ESMT_CONFIG_DOUBLE, &t);
  if (!st) *v = strtod(t, NULL);
  return st;
}

esmt_status esmt_config_get_bool(const esmt_config *c, const char *key, int *v) {
  const char *t = NULL;
  esmt_status st = lookup(c, key, v, ESMT_CONFIG_BOOL, &t);
  if (!st) *v = strcmp(t, "true") == 0;
  return st;
}

esmt_status esmt_config_get_string(const esmt_config *c, const char *key, const char **v) {
  return lookup(c, key, v, ESMT_CONFIG_STRING, v);
}

esmt_status esmt_config_get_bytes(const esmt_config *c, const char *key, uint64_t *v) {
  const char *t = NULL;
  esmt_status st = lookup(c, key, v, ESMT_CONFIG_INT, &t);
  if (!st && esmt_config_keys[esmt_config_find(key)].type != ESMT_CONFIG_BYTES)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "config key '%s' is %s, not a byte size", key,
                     k_type_names[esmt_config_keys[esmt_config_find(key)].type]);
  if (!st) *v = (uint64_t)strtoull(t, NULL, 10);
  return st;
}

esmt_status esmt_config_set_preset_path(esmt_config *c, const char *dirs) {
  ESMT_CHECK_ARG(c, "esmt_config_set_preset_path", "config is NULL");
  char *copy = NULL;
  if (dirs && *dirs && !(copy = strdup(dirs)))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "config: out of memory");
  free(c->preset_path);
  c->preset_path = copy;
  return ESMT_OK;
}
