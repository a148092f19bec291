/* Configuration values: every key of the schema held as validated,
 * normalised text; typed getters parse it. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

struct esmt_config {
  char *value[128];
};

int esmt_config_key_count(void) { return esmt_config_nkeys; }

esmt_status esmt_config_key_info(int index, esmt_config_key *info) {
  const char *fn = "esmt_config_key_info";
  ESMT_CHECK_ARG(info, fn, "info is NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_config_key", info->struct_size, sizeof *info);
  if (st) return st;
  if (index < 0 || index >= esmt_config_nkeys)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: index %d out of range", fn, index);
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

esmt_status esmt_config_unknown_key(const char *where, const char *key) {
  const char *names[128];
  for (int i = 0; i < esmt_config_nkeys; i++) names[i] = esmt_config_keys[i].name;
  return esmt_fail(ESMT_ERR_CONFIG, "%sunknown key '%s' (did you mean '%s'?)", where, key,
                   esmt_closest(key, names, esmt_config_nkeys));
}

/* "8GiB", "512MiB", "1.5G", "1000" -> bytes. */
int esmt_parse_bytes(const char *s, uint64_t *out) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0) || !isfinite(v)) return 0;
  while (*end == ' ') end++;
  static const struct { const char *u; double m; } units[] = {
      {"", 1}, {"B", 1}, {"K", 1024.0}, {"KiB", 1024.0}, {"KB", 1e3}, {"M", 1048576.0},
      {"MiB", 1048576.0}, {"MB", 1e6}, {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9},
      {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strcasecmp(end, units[i].u) == 0) {
      double bytes = v * units[i].m;
      if (!(bytes < 18446744073709551616.0)) return 0; /* beyond uint64: reject, don't wrap */
      *out = (uint64_t)bytes;
      return 1;
    }
  return 0;
}

static int parse_bool(const char *s, int *out) {
  static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) { *out = 1; return 1; }
    if (strcasecmp(s, no[i]) == 0) { *out = 0; return 1; }
  }
  return 0;
}

static int in_choices(const char *choices, const char *v) {
  size_t n = strlen(v);
  for (const char *p = choices; p && *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, v, n) == 0) return 1;
    p = bar ? bar + 1 : NULL;
  }
  return 0;
}

/* Validate and normalise `v` for key k into a new string. */
static esmt_status normalise(const esmt_key_def *k, const char *v, const char *where, char **out) {
  char buf[64];
  const char *norm = v;
  char *end = NULL;
  switch (k->type) {
    case ESMT_CONFIG_INT: {
      long long x = strtoll(v, &end, 10);
      if (!*v || *end || x < k->min || (double)x > k->max)
        return esmt_fail(ESMT_ERR_CONFIG, "%s%s = '%s': expected an integer in [%.0f, %.0f]", where,
                         k->name, v, k->min, k->max);
      snprintf(buf, sizeof buf, "%lld", x);
      norm = buf;
      break;
    }
    case ESMT_CONFIG_DOUBLE: {
      double x = strtod(v, &end);
      if (!*v || *end || !isfinite(x) || x < k->min || x > k->max)
        return esmt_fail(ESMT_ERR_CONFIG, "%s%s = '%s': expected a number in [%g, %g]", where,
                         k->name, v, k->min, k->max);
      snprintf(buf, sizeof buf, "%.17g", x);
      norm = buf;
      break;
    }
    case ESMT_CONFIG_BOOL: {
      int b;
      if (!parse_bool(v, &b))
        return esmt_fail(ESMT_ERR_CONFIG, "%s%s = '%s': expected true or false", where, k->name, v);
      norm = b ? "true" : "false";
      break;
    }
    case ESMT_CONFIG_ENUM:
      if (!in_choices(k->choices, v))
        return esmt_fail(ESMT_ERR_CONFIG, "%s%s = '%s': expected one of %s", where, k->name, v,
                         k->choices);
      break;
    case ESMT_CONFIG_BYTES: {
      uint64_t b;
      if (!esmt_parse_bytes(v, &b) || (double)b > k->max)
        return esmt_fail(ESMT_ERR_CONFIG, "%s%s = '%s': expected a size such as 8GiB, 512MiB or "
                         "1000000", where, k->name, v);
      snprintf(buf, sizeof buf, "%llu", (unsigned long long)b);
      norm = buf;
      break;
    }
    case ESMT_CONFIG_STRING:
      break;
  }
  *out = strdup(norm);
  return *out ? ESMT_OK : esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "config: out of memory");
}

static esmt_status put(esmt_config *c, int i, const char *v, const char *where) {
  char *n = NULL;
  esmt_status st = normalise(&esmt_config_keys[i], v, where, &n);
  if (st) return st;
  free(c->value[i]);
  c->value[i] = n;
  return ESMT_OK;
}

esmt_status esmt_config_create(esmt_config **out) {
  ESMT_CHECK_ARG(out, "esmt_config_create", "out is NULL");
  *out = NULL;
  esmt_config *c = calloc(1, sizeof *c);
  if (!c) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_config_create: out of memory");
  for (int i = 0; i < esmt_config_nkeys; i++) {
    esmt_status st = put(c, i, esmt_config_keys[i].def, "default ");
    if (st) {
      esmt_config_destroy(c);
      return esmt_fail_prefix(ESMT_ERR_INTERNAL, "esmt_config_create: ");
    }
  }
  *out = c;
  return ESMT_OK;
}

void esmt_config_destroy(esmt_config *c) {
  if (!c) return;
  for (int i = 0; i < esmt_config_nkeys; i++) free(c->value[i]);
  free(c);
}

esmt_status esmt_config_set_at(esmt_config *c, const char *key, const char *value,
                               const char *where) {
  int i = esmt_config_find(key);
  if (i < 0) return esmt_config_unknown_key(where, key);
  esmt_status st = put(c, i, value, where);
  if (st || strcmp(key, "model.preset") != 0) return st;
  /* a preset name fills the sizes */
  esmt_model_config m = ESMT_MODEL_CONFIG_INIT;
  if ((st = esmt_model_config_preset(value, &m))) return esmt_fail_prefix(ESMT_ERR_CONFIG, "%s", where);
  char buf[32];
  const struct { const char *k; int v; } sizes[] = {
      {"model.num_layers", m.num_layers}, {"model.hidden_size", m.hidden_size},
      {"model.num_heads", m.num_heads}, {"model.ffn_size", m.ffn_size}};
  for (size_t k = 0; k < 4 && !st; k++) {
    snprintf(buf, sizeof buf, "%d", sizes[k].v);
    st = put(c, esmt_config_find(sizes[k].k), buf, where);
  }
  return st;
}

esmt_status esmt_config_set(esmt_config *c, const char *key, const char *value) {
  ESMT_CHECK_ARG(c && key && value, "esmt_config_set", "config, key and value must not be NULL");
  return esmt_config_set_at(c, key, value, "");
}

esmt_status esmt_config_set_assignment(esmt_config *c, const char *a) {
  ESMT_CHECK_ARG(c && a, "esmt_config_set_assignment", "config and assignment must not be NULL");
  const char *eq = strchr(a, '=');
  if (!eq || eq == a)
    return esmt_fail(ESMT_ERR_CONFIG, "'%s' is not of the form key=value", a);
  char key[128];
  snprintf(key, sizeof key, "%.*s", (int)(eq - a), a);
  return esmt_config_set_at(c, key, eq + 1, "");
}

static esmt_status lookup(const esmt_config *c, const char *key, esmt_config_type want,
                          const char **text) {
  ESMT_CHECK_ARG(c && key, "esmt_config_get", "config and key must not be NULL");
  int i = esmt_config_find(key);
  if (i < 0) return esmt_config_unknown_key("", key);
  esmt_config_type t = esmt_config_keys[i].type;
  int ok = t == want || (want == ESMT_CONFIG_INT && t == ESMT_CONFIG_BYTES) ||
           (want == ESMT_CONFIG_STRING && t == ESMT_CONFIG_ENUM) ||
           (want == ESMT_CONFIG_DOUBLE && (t == ESMT_CONFIG_INT || t == ESMT_CONFIG_BYTES));
  if (!ok) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "config key '%s' has another type", key);
  *text = c->value[i];
  return ESMT_OK;
}

esmt_status esmt_config_get_int(const esmt_config *c, const char *key, int64_t *v) {
  const char *t;
  esmt_status st = lookup(c, key, ESMT_CONFIG_INT, &t);
  if (!st) *v = strtoll(t, NULL, 10);
  return st;
}

esmt_status esmt_config_get_double(const esmt_config *c, const char *key, double *v) {
  const char *t;
  esmt_status st = lookup(c, key, ESMT_CONFIG_DOUBLE, &t);
  if (!st) *v = strtod(t, NULL);
  return st;
}

esmt_status esmt_config_get_bool(const esmt_config *c, const char *key, int *v) {
  const char *t;
  esmt_status st = lookup(c, key, ESMT_CONFIG_BOOL, &t);
  if (!st) *v = strcmp(t, "true") == 0;
  return st;
}

esmt_status esmt_config_get_string(const esmt_config *c, const char *key, const char **v) {
  return lookup(c, key, ESMT_CONFIG_STRING, v);
}

static int64_t geti(const esmt_config *c, const char *k) {
  int64_t v = 0;
  esmt_config_get_int(c, k, &v);
  return v;
}

esmt_status esmt_config_validate(const esmt_config *c) {
  ESMT_CHECK_ARG(c, "esmt_config_validate", "config is NULL");
  int64_t d = geti(c, "model.hidden_size"), h = geti(c, "model.num_heads");
  if (d % h != 0)
    return esmt_fail(ESMT_ERR_CONFIG, "model.hidden_size (%lld) must be divisible by "
                     "model.num_heads (%lld)", (long long)d, (long long)h);
  if ((d / h) % 2)
    return esmt_fail(ESMT_ERR_CONFIG, "model.hidden_size / model.num_heads = %lld must be even "
                     "(rotary embeddings)", (long long)(d / h));
  if (geti(c, "data.max_len") > geti(c, "model.max_positions"))
    return esmt_fail(ESMT_ERR_CONFIG, "data.max_len (%lld) exceeds model.max_positions (%lld)",
                     (long long)geti(c, "data.max_len"), (long long)geti(c, "model.max_positions"));
  if (geti(c, "data.micro_batch") == 0 && geti(c, "data.tokens_per_batch") < geti(c, "data.max_len"))
    return esmt_fail(ESMT_ERR_CONFIG, "data.tokens_per_batch (%lld) must hold at least one row of "
                     "data.max_len (%lld) tokens", (long long)geti(c, "data.tokens_per_batch"),
                     (long long)geti(c, "data.max_len"));
  int64_t steps = geti(c, "train.max_steps"), warm = geti(c, "schedule.warmup_steps");
  if (steps > 0 && warm >= steps && geti(c, "train.fast_dev_run") == 0)
    return esmt_fail(ESMT_ERR_CONFIG, "schedule.warmup_steps (%lld) must be below "
                     "train.max_steps (%lld): set schedule.warmup_steps (--warmup)", (long long)warm,
                     (long long)steps);
  const char *prec = "", *backend = "";
  esmt_config_get_string(c, "backend.precision", &prec);
  esmt_config_get_string(c, "backend.name", &backend);
  if (!strcmp(backend, "cpu") && strcmp(prec, "auto") && strcmp(prec, "fp32"))
    return esmt_fail(ESMT_ERR_CONFIG, "backend.precision %s needs a GPU backend; backend.name is "
                     "cpu (fp32 only)", prec);
  if (!strcmp(prec, "bf16") && !strcmp(backend, "turing_fp16"))
    return esmt_fail(ESMT_ERR_CONFIG, "backend.precision bf16 needs ampere_bf16 (sm_80+), not "
                     "turing_fp16");
  double lr_end = 0;
  esmt_config_get_double(c, "schedule.final_lr_fraction", &lr_end);
  (void)lr_end;
  return ESMT_OK;
}

esmt_status esmt_config_to_yaml(const esmt_config *c, char **yaml) {
  ESMT_CHECK_ARG(c && yaml, "esmt_config_to_yaml", "config and yaml must not be NULL");
  size_t cap = 16384, len = 0;
  char *out = malloc(cap);
  if (!out) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "config: out of memory");
  char section[64] = "";
  for (int i = 0; i < esmt_config_nkeys; i++) {
    const esmt_key_def *k = &esmt_config_keys[i];
    const char *dot = strchr(k->name, '.');
    char line[512];
    int n = 0;
    if (strncmp(section, k->name, (size_t)(dot - k->name)) != 0 ||
        section[dot - k->name] != '\0') {
      snprintf(section, sizeof section, "%.*s", (int)(dot - k->name), k->name);
      n += snprintf(line + n, sizeof line - (size_t)n, "%s%s:\n", i ? "\n" : "", section);
    }
    int quote = k->type == ESMT_CONFIG_STRING || k->type == ESMT_CONFIG_ENUM;
    char val[300];
    size_t v = 0;
    for (const char *p = c->value[i]; *p && v + 3 < sizeof val; p++) { /* YAML double-quoted */
      if (quote && (*p == '"' || *p == '\\')) val[v++] = '\\';
      val[v++] = *p;
    }
    val[v] = '\0';
    n += snprintf(line + n, sizeof line - (size_t)n, "  %s: %s%s%s  # %s (default %s)\n", dot + 1,
                  quote ? "\"" : "", val, quote ? "\"" : "", k->doc, k->def[0] ? k->def : "\"\"");
    if (len + (size_t)n + 1 > cap) {
      cap *= 2;
      char *o2 = realloc(out, cap);
      if (!o2) { free(out); return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "config: out of memory"); }
      out = o2;
    }
    memcpy(out + len, line, (size_t)n + 1);
    len += (size_t)n;
  }
  *yaml = out;
  return ESMT_OK;
}

esmt_status esmt_parse_size(const char *text, uint64_t *bytes) {
  ESMT_CHECK_ARG(text && bytes, "esmt_parse_size", "text and bytes must not be NULL");
  if (!esmt_parse_bytes(text, bytes))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "'%s' is not a size such as 8GiB, 512MiB or "
                     "1000000", text);
  return ESMT_OK;
}
