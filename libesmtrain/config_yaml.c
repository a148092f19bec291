/* YAML files (libyaml events) and named presets for the configuration. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "config_internal.h"
#include "fs_util.h"

#ifndef ESMT_INSTALL_CONFIG_DIR
#define ESMT_INSTALL_CONFIG_DIR ""
#endif
#ifndef ESMT_SOURCE_CONFIG_DIR
#define ESMT_SOURCE_CONFIG_DIR ""
#endif

static esmt_status load_file(esmt_config *c, const char *path, int depth);

/* Directories searched for presets, in order, colon separated. */
static void preset_dirs(char *out, size_t cap) {
  const char *env = getenv("ESMTRAIN_CONFIG_PATH");
  snprintf(out, cap, "%s%s%s:%s", env && *env ? env : "", env && *env ? ":" : "",
           ESMT_INSTALL_CONFIG_DIR, ESMT_SOURCE_CONFIG_DIR);
}

static int find_preset(const char *name, char *path, size_t cap) {
  char dirs[4096];
  preset_dirs(dirs, sizeof dirs);
  char *save = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    if (!*d) continue;
    snprintf(path, cap, "%s/%s.yaml", d, name);
    if (access(path, R_OK) == 0) return 1;
  }
  return 0;
}

/* `include:` target: a path (relative to the including file) or a preset. */
static esmt_status include(esmt_config *c, const char *from, const char *what, int depth,
                           const char *where) {
  char path[4096];
  if (strchr(what, '/') || strstr(what, ".yaml") || strstr(what, ".yml")) {
    char dir[4096];
    esmt_dirname(from, dir, sizeof dir);
    if (what[0] == '/') snprintf(path, sizeof path, "%s", what);
    else snprintf(path, sizeof path, "%s/%s", dir, what);
  } else if (!find_preset(what, path, sizeof path)) {
    return esmt_fail(ESMT_ERR_CONFIG, "%sinclude: no preset named '%s' (see --list-presets)",
                     where, what);
  }
  return load_file(c, path, depth + 1);
}

typedef struct frame {
  char prefix[128];
  char key[128];
  int have_key;
} frame;

static esmt_status load_file(esmt_config *c, const char *path, int depth) {
  if (depth > 8) return esmt_fail(ESMT_ERR_CONFIG, "%s: includes nested too deeply (a cycle?)", path);
  FILE *f = fopen(path, "rb");
  if (!f) return esmt_fail(ESMT_ERR_IO, "%s: cannot open the configuration file", path);
  yaml_parser_t p;
  yaml_event_t ev;
  yaml_parser_initialize(&p);
  yaml_parser_set_input_file(&p, f);
  frame stack[16];
  int top = -1, in_include_list = 0, done = 0;
  esmt_status st = ESMT_OK;
  char where[4200];
  while (!st && !done) {
    if (!yaml_parser_parse(&p, &ev)) {
      st = esmt_fail(ESMT_ERR_CONFIG, "%s:%zu:%zu: YAML syntax error: %s", path,
                     p.problem_mark.line + 1, p.problem_mark.column + 1,
                     p.problem ? p.problem : "unknown");
      break;
    }
    snprintf(where, sizeof where, "%s:%zu: ", path, ev.start_mark.line + 1);
    frame *fr = top >= 0 ? &stack[top] : NULL;
    switch (ev.type) {
      case YAML_MAPPING_START_EVENT:
        if (top + 1 >= 16) { st = esmt_fail(ESMT_ERR_CONFIG, "%snesting too deep", where); break; }
        if (fr && !fr->have_key) { st = esmt_fail(ESMT_ERR_CONFIG, "%sa mapping cannot be a key", where); break; }
        stack[top + 1].prefix[0] = '\0';
        if (fr) {
          snprintf(stack[top + 1].prefix, sizeof stack[top + 1].prefix, "%s%s%s", fr->prefix,
                   fr->prefix[0] ? "." : "", fr->key);
          fr->have_key = 0;
        }
        stack[top + 1].have_key = 0;
        top++;
        break;
      case YAML_MAPPING_END_EVENT:
        top--;
        break;
      case YAML_SEQUENCE_START_EVENT:
        if (fr && fr->have_key && !fr->prefix[0] && !strcmp(fr->key, "include")) in_include_list = 1;
        else st = esmt_fail(ESMT_ERR_CONFIG, "%s'%s': lists are not configuration values", where,
                            fr && fr->have_key ? fr->key : "?");
        break;
      case YAML_SEQUENCE_END_EVENT:
        in_include_list = 0;
        if (fr) fr->have_key = 0;
        break;
      case YAML_SCALAR_EVENT: {
        const char *text = (const char *)ev.data.scalar.value;
        if (in_include_list) { st = include(c, path, text, depth, where); break; }
        if (!fr) break; /* a bare scalar document: ignore */
        if (!fr->have_key) {
          snprintf(fr->key, sizeof fr->key, "%s", text);
          fr->have_key = 1;
          break;
        }
        fr->have_key = 0;
        if (!fr->prefix[0] && !strcmp(fr->key, "include")) { st = include(c, path, text, depth, where); break; }
        char full[300];
        snprintf(full, sizeof full, "%s%s%s", fr->prefix, fr->prefix[0] ? "." : "", fr->key);
        if (esmt_config_find(full) < 0) { st = esmt_config_unknown_key(where, full); break; }
        st = esmt_config_set_at(c, full, text, where);
        break;
      }
      case YAML_STREAM_END_EVENT:
        done = 1;
        break;
      default:
        break;
    }
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&p);
  fclose(f);
  return st;
}

esmt_status esmt_config_load_yaml(esmt_config *c, const char *path) {
  ESMT_CHECK_ARG(c && path, "esmt_config_load_yaml", "config and path must not be NULL");
  return load_file(c, path, 0);
}

esmt_status esmt_config_apply_preset(esmt_config *c, const char *name) {
  ESMT_CHECK_ARG(c && name, "esmt_config_apply_preset", "config and name must not be NULL");
  char path[4096];
  if (!find_preset(name, path, sizeof path)) {
    char list[2048] = "";
    esmt_config_list_presets(list, sizeof list);
    for (char *p = list; *p; p++) if (*p == '\n') *p = ' ';
    return esmt_fail(ESMT_ERR_CONFIG, "no preset named '%s'; available: %s", name, list);
  }
  return load_file(c, path, 0);
}

esmt_status esmt_config_list_presets(char *buf, size_t cap) {
  ESMT_CHECK_ARG(buf && cap, "esmt_config_list_presets", "buf must not be NULL");
  buf[0] = '\0';
  char dirs[4096];
  preset_dirs(dirs, sizeof dirs);
  size_t len = 0;
  char *save = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    DIR *dh = *d ? opendir(d) : NULL;
    if (!dh) continue;
    struct dirent *de;
    while ((de = readdir(dh))) {
      size_t n = strlen(de->d_name);
      if (n < 6 || strcmp(de->d_name + n - 5, ".yaml") != 0) continue;
      char name[256];
      snprintf(name, sizeof name, "%.*s", (int)(n - 5), de->d_name);
      char needle[260];
      snprintf(needle, sizeof needle, "%s\n", name);
      if (strstr(buf, needle)) continue; /* earlier directories win */
      len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s\n", name);
    }
    closedir(dh);
  }
  return ESMT_OK;
}
