/* SPDX-License-Identifier: MIT */
/* YAML configuration files through libyaml's event parser. Nested mappings
 * become dotted keys (optimizer: {lr: 4e-4} -> optimizer.lr); a top-level
 * `include:` or `base:` (a preset name, a path relative to the file, or a
 * list of them) is applied before the file's own values, whatever its
 * position; within a file model.preset is applied before the explicit
 * model sizes, since YAML mappings have no order. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "config_internal.h"
#include "fs_util.h"
#include "input_reader.h"

#define MAX_DEPTH 16        /* nested mappings */
#define MAX_INCLUDES 8      /* nested includes (deeper is taken for a cycle) */
/* A configuration is a page of keys; 1 MiB is far past any real one, and
 * bounds a pipe (`--config -`) that never ends. */
#define ESMT_CONFIG_FILE_MAX ((uint64_t)1 << 20)

typedef struct frame {
  char prefix[128];         /* dotted path of this mapping ("" at the top) */
  char key[128];            /* the key whose value comes next */
  size_t key_line;
  int have_key;
} frame;

typedef struct assign {
  int key;                  /* schema index */
  char *value;
  size_t line;
} assign;

typedef struct reader {
  esmt_config *c;
  const char *path;
  int depth;
  assign *a;
  int n, cap;
  frame stack[MAX_DEPTH];
  int top;                  /* -1 outside any mapping */
  int in_include_list;
} reader;

static int is_include(const frame *fr) {
  return !fr->prefix[0] && (!strcmp(fr->key, "include") || !strcmp(fr->key, "base"));
}

/* `include:` target: a path (relative to the including file) or a preset. */
static esmt_status include(reader *r, const char *what, size_t line) {
  if (!*what)
    return esmt_fail(ESMT_ERR_CONFIG, "%s:%zu: include: needs a preset name or a YAML path",
                     r->path, line);
  char path[4096];
  esmt_status st;
  if (strchr(what, '/') || strstr(what, ".yaml") || strstr(what, ".yml")) {
    char dir[4096];
    esmt_dirname(r->path, dir, sizeof dir);
    if (what[0] == '/') snprintf(path, sizeof path, "%s", what);
    else snprintf(path, sizeof path, "%s/%s", dir, what);
  } else if ((st = esmt_config_find_preset(r->c, what, path, sizeof path))) {
    return esmt_fail_prefix(st, "%s:%zu: include: ", r->path, line);
  }
  if (r->depth + 1 > MAX_INCLUDES)
    return esmt_fail(ESMT_ERR_CONFIG, "%s:%zu: includes nested more than %d deep (a cycle?)",
                     r->path, line, MAX_INCLUDES);
  return esmt_config_load_file(r->c, path, r->depth + 1);
}

/* YAML's null (~, null, or nothing) is the empty string. */
static const char *scalar_text(const yaml_event_t *ev) {
  const char *t = (const char *)ev->data.scalar.value;
  if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
      (!strcmp(t, "~") || !strcasecmp(t, "null")))
    return "";
  return t;
}

/* A leaf: remember it (applied after the includes), refusing unknown keys
 * and a key given twice in one file. */
static esmt_status record(reader *r, frame *fr, const char *text) {
  char full[300], where[4200];
  snprintf(full, sizeof full, "%s%s%s", fr->prefix, fr->prefix[0] ? "." : "", fr->key);
  snprintf(where, sizeof where, "%s:%zu: ", r->path, fr->key_line);
  int k = esmt_config_find(full);
  if (k < 0 && !*text) { /* an empty section (`optimizer:`) sets nothing */
    size_t n = strlen(full);
    for (int i = 0; i < esmt_config_nkeys; i++)
      if (!strncmp(esmt_config_keys[i].name, full, n) && esmt_config_keys[i].name[n] == '.')
        return ESMT_OK;
  }
  if (k < 0) return esmt_config_unknown_key(where, full);
  for (int i = 0; i < r->n; i++)
    if (r->a[i].key == k)
      return esmt_fail(ESMT_ERR_CONFIG, "%s'%s' is set twice in this file (also line %zu)", where,
                       full, r->a[i].line);
  if (r->n == r->cap) {
    int cap = r->cap ? 2 * r->cap : 32;
    assign *a = realloc(r->a, (size_t)cap * sizeof *a);
    if (!a) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "config: out of memory");
    r->a = a;
    r->cap = cap;
  }
  char *v = strdup(text);
  if (!v) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "config: out of memory");
  r->a[r->n++] = (assign){k, v, fr->key_line};
  return ESMT_OK;
}

static esmt_status on_mapping_start(reader *r, size_t line) {
  frame *fr = r->top >= 0 ? &r->stack[r->top] : NULL;
  if (r->in_include_list || (fr && is_include(fr) && fr->have_key))
    return esmt_fail(ESMT_ERR_CONFIG, "%s:%zu: include: takes preset names or paths, not a "
                     "mapping", r->path, line);
  if (r->top + 1 >= MAX_DEPTH)
    return esmt_fail(ESMT_ERR_CONFIG, "%s:%zu: mappings nested too deep", r->path, line);
  if (fr && !fr->have_key)
    return esmt_fail(ESMT_ERR_CONFIG, "%s:%zu: a mapping cannot be a key", r->path, line);
  char prefix[sizeof fr->prefix] = "";
  if (fr) {
    snprintf(prefix, sizeof prefix, "%s%s%s", fr->prefix, fr->prefix[0] ? "." : "", fr->key);
    fr->have_key = 0;
  }
  frame *nf = &r->stack[r->top + 1];
  memcpy(nf->prefix, prefix, sizeof prefix);
  nf->have_key = 0;
  r->top++;
  return ESMT_OK;
}

static esmt_status on_sequence_start(reader *r, size_t line) {
  frame *fr = r->top >= 0 ? &r->stack[r->top] : NULL;
  if (!fr)
    return esmt_fail(ESMT_ERR_CONFIG, "%s:%zu: the top level must be a mapping of keys, not a "
                     "list", r->path, line);
  if (fr->have_key && is_include(fr) && !r->in_include_list) {
    r->in_include_list = 1;
    return ESMT_OK;
  }
  char full[300];
  snprintf(full, sizeof full, "%s%s%s", fr->prefix, fr->prefix[0] ? "." : "",
           fr->have_key ? fr->key : "?");
  return esmt_fail(ESMT_ERR_CONFIG, "%s:%zu: '%s': lists are not configuration values", r->path,
                   line, full);
}

static esmt_status on_scalar(reader *r, const yaml_event_t *ev) {
  const char *text = scalar_text(ev);
  size_t line = ev->start_mark.line + 1;
  frame *fr = r->top >= 0 ? &r->stack[r->top] : NULL;
  if (r->in_include_list) return include(r, text, line);
  if (!fr) {
    if (!*text) return ESMT_OK; /* an empty document */
    return esmt_fail(ESMT_ERR_CONFIG, "%s:%zu: the top level must be a mapping of keys "
                     "(key: value), not '%.40s'", r->path, line, text);
  }
  if (!fr->have_key) {
    snprintf(fr->key, sizeof fr->key, "%s", (const char *)ev->data.scalar.value);
    fr->key_line = line;
    fr->have_key = 1;
    return ESMT_OK;
  }
  fr->have_key = 0;
  if (is_include(fr)) return include(r, text, line);
  return record(r, fr, text);
}

/* Parse the whole file, applying includes as they come and collecting the
 * file's own values. */
static esmt_status parse(reader *r, yaml_parser_t *p) {
  esmt_status st = ESMT_OK;
  for (int done = 0; !st && !done;) {
    yaml_event_t ev;
    if (!yaml_parser_parse(p, &ev)) {
      if (p->error == YAML_READER_ERROR)
        return esmt_fail(ESMT_ERR_CONFIG, "%s: byte %zu: not valid YAML text: %s", r->path,
                         p->problem_offset, p->problem ? p->problem : "unreadable");
      return esmt_fail(ESMT_ERR_CONFIG, "%s:%zu:%zu: YAML syntax error: %s%s%s%s", r->path,
                       p->problem_mark.line + 1, p->problem_mark.column + 1,
                       p->problem ? p->problem : "unknown", p->context ? " (" : "",
                       p->context ? p->context : "", p->context ? ")" : "");
    }
    size_t line = ev.start_mark.line + 1;
    switch (ev.type) {
      case YAML_MAPPING_START_EVENT: st = on_mapping_start(r, line); break;
      case YAML_MAPPING_END_EVENT: r->top--; break;
      case YAML_SEQUENCE_START_EVENT: st = on_sequence_start(r, line); break;
      case YAML_SEQUENCE_END_EVENT:
        r->in_include_list = 0;
        if (r->top >= 0) r->stack[r->top].have_key = 0;
        break;
      case YAML_SCALAR_EVENT: st = on_scalar(r, &ev); break;
      case YAML_ALIAS_EVENT:
        st = esmt_fail(ESMT_ERR_CONFIG, "%s:%zu: YAML aliases (*%s) are not supported: write the "
                       "value", r->path, line, (const char *)ev.data.alias.anchor);
        break;
      case YAML_STREAM_END_EVENT: done = 1; break;
      default: break;
    }
    yaml_event_delete(&ev);
  }
  return st;
}

/* The file's values: model.preset first (it resets the sizes), then the rest. */
static esmt_status apply(reader *r) {
  const int preset = esmt_config_find("model.preset");
  esmt_status st = ESMT_OK;
  for (int pass = 0; pass < 2 && !st; pass++)
    for (int i = 0; i < r->n && !st; i++) {
      if ((r->a[i].key == preset) != (pass == 0)) continue;
      char where[4200];
      snprintf(where, sizeof where, "%s:%zu: ", r->path, r->a[i].line);
      st = esmt_config_set_at(r->c, esmt_config_keys[r->a[i].key].name, r->a[i].value, where);
    }
  return st;
}

esmt_status esmt_config_load_file(esmt_config *c, const char *path, int depth) {
  /* read whole and bounded first: a pipe or an endless stream ends at the
   * limit, a FIFO or device is refused at once */
  esmt_line_reader_options ro = ESMT_LINE_READER_OPTIONS_INIT;
  ro.what = "configuration file";
  ro.max_bytes = ro.max_line = ESMT_CONFIG_FILE_MAX;
  ro.allow_stdin = depth == 0; /* --config - (an include names a file) */
  char *text = NULL;
  size_t len = 0;
  esmt_status st = esmt_input_read_all(path, &ro, &text, &len);
  if (st) return st;
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p)) {
    free(text);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  reader r;
  memset(&r, 0, sizeof r);
  r.c = c;
  r.path = path;
  r.depth = depth;
  r.top = -1;
  st = parse(&r, &p);
  if (!st) st = apply(&r);
  for (int i = 0; i < r.n; i++) free(r.a[i].value);
  free(r.a);
  yaml_parser_delete(&p);
  free(text);
  return st;
}

/* A failed load leaves the configuration as it was. */
esmt_status esmt_config_load_yaml(esmt_config *c, const char *path) {
  ESMT_CHECK_ARG(c && path, "esmt_config_load_yaml", "config and path must not be NULL");
  char **saved = calloc((size_t)esmt_config_nkeys, sizeof *saved);
  if (!saved) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_config_load_yaml: out of memory");
  esmt_status st = ESMT_OK;
  for (int i = 0; i < esmt_config_nkeys && !st; i++)
    if (!(saved[i] = strdup(c->value[i])))
      st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_config_load_yaml: out of memory");
  if (!st) st = esmt_config_load_file(c, path, 0);
  for (int i = 0; i < esmt_config_nkeys; i++) {
    if (st && saved[i]) { /* roll back */
      free(c->value[i]);
      c->value[i] = saved[i];
    } else {
      free(saved[i]);
    }
  }
  free(saved);
  return st;
}

/* A named preset is a YAML file found on the preset search path
 * (config_presets.c). */
esmt_status esmt_config_apply_preset(esmt_config *c, const char *name) {
  ESMT_CHECK_ARG(c && name, "esmt_config_apply_preset", "config and name must not be NULL");
  char path[4096];
  esmt_status st = esmt_config_find_preset(c, name, path, sizeof path);
  if (st) return st;
  return esmt_config_load_yaml(c, path);
}
