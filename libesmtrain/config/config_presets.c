/* SPDX-License-Identifier: MIT */
/* Named presets: NAME.yaml files found in a search path - the handle's own
 * directories (esmt_config_set_preset_path), $ESMTRAIN_CONFIG_PATH, then
 * the presets of the library that is running, found from its own place
 * as its backends are: ${datadir}/esmtrain/configs of its prefix
 * (LIBDIR/ESMT_CONFIG_DIR_FROM_LIBDIR), and LIBDIR/esmtrain/configs, where
 * a build tree keeps them. No configure-time or source path is compiled
 * in: a moved installation finds its own presets, and nothing planted at
 * a path of the machine that built it is read. Earlier directories shadow
 * later ones. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_internal.h"

#include "registry.h"

#ifndef ESMT_CONFIG_DIR_FROM_LIBDIR
#define ESMT_CONFIG_DIR_FROM_LIBDIR "../share/esmtrain/configs"
#endif

typedef struct preset_list {
  int n, cap;
  esmt_config_preset *v;
} preset_list;

/* The search path, colon separated, into out. */
static void search_path(const esmt_config *c, char *out, size_t cap) {
  const char *own = c && c->preset_path ? c->preset_path : "";
  const char *env = getenv("ESMTRAIN_CONFIG_PATH");
  char lib[4096];
  esmt_library_dir(lib, sizeof lib);
  if (lib[0])
    snprintf(out, cap, "%s:%s:%s/%s:%s/esmtrain/configs", own, env ? env : "", lib,
             ESMT_CONFIG_DIR_FROM_LIBDIR, lib);
  else
    snprintf(out, cap, "%s:%s", own, env ? env : "");
}

static int valid_name(const char *name) {
  size_t n = strlen(name);
  return n > 0 && n < sizeof(((esmt_config_preset *)0)->name) && name[0] != '.' &&
         !strchr(name, '/');
}

/* The first line of the file when it is a comment, "# " removed (a
 * licence tag, "# SPDX-...", before it is passed over). */
static void describe(const char *path, char *out, size_t cap) {
  out[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[512];
  int got = fgets(line, sizeof line, f) != NULL;
  if (got && !strncmp(line, "# SPDX-", 7)) got = fgets(line, sizeof line, f) != NULL;
  if (got && line[0] == '#') {
    const char *p = line + 1;
    while (*p == ' ') p++;
    snprintf(out, cap, "%s", p);
    out[strcspn(out, "\r\n")] = '\0';
  }
  fclose(f);
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const esmt_config_preset *)a)->name, ((const esmt_config_preset *)b)->name);
}

/* Every preset in the search path, sorted by name, the first of a name kept. */
static esmt_status scan(const esmt_config *c, preset_list *l) {
  char dirs[8192];
  search_path(c, dirs, sizeof dirs);
  char *save = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    DIR *dh = opendir(d);
    if (!dh) continue;
    struct dirent *de;
    while ((de = readdir(dh))) {
      size_t n = strlen(de->d_name);
      if (n < 6 || strcmp(de->d_name + n - 5, ".yaml") != 0) continue;
      char name[256];
      snprintf(name, sizeof name, "%.*s", (int)(n - 5), de->d_name);
      int seen = !valid_name(name);
      for (int i = 0; i < l->n && !seen; i++) seen = strcmp(l->v[i].name, name) == 0;
      char path[sizeof l->v[0].path];
      struct stat sb;
      if (snprintf(path, sizeof path, "%s/%s", d, de->d_name) >= (int)sizeof path) continue;
      if (seen || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
      if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        esmt_config_preset *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) {
          closedir(dh);
          return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "config presets: out of memory");
        }
        l->v = v;
        l->cap = cap;
      }
      esmt_config_preset *p = &l->v[l->n++];
      memset(p, 0, sizeof *p);
      p->struct_size = sizeof *p;
      snprintf(p->name, sizeof p->name, "%s", name);
      snprintf(p->path, sizeof p->path, "%s", path);
      describe(path, p->description, sizeof p->description);
    }
    closedir(dh);
  }
  if (l->n > 1) qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_name);
  return ESMT_OK;
}

esmt_status esmt_config_preset_count(const esmt_config *c, int *count) {
  ESMT_CHECK_ARG(count, "esmt_config_preset_count", "count is NULL");
  preset_list l = {0, 0, NULL};
  esmt_status st = scan(c, &l);
  *count = st ? 0 : l.n;
  free(l.v);
  return st;
}

esmt_status esmt_config_preset_info(const esmt_config *c, int index, esmt_config_preset *info) {
  const char *fn = "esmt_config_preset_info";
  ESMT_CHECK_ARG(info, fn, "info is NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_config_preset", info->struct_size, sizeof *info);
  if (st) return st;
  preset_list l = {0, 0, NULL};
  if ((st = scan(c, &l))) return st;
  if (index < 0 || index >= l.n) st = esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: index %d out "
                                                "of range [0, %d)", fn, index, l.n);
  else *info = l.v[index];
  free(l.v);
  return st;
}

esmt_status esmt_config_list_presets(char *buf, size_t cap) {
  ESMT_CHECK_ARG(buf && cap, "esmt_config_list_presets", "buf must not be NULL");
  buf[0] = '\0';
  preset_list l = {0, 0, NULL};
  esmt_status st = scan(NULL, &l);
  size_t len = 0, need = 1;
  for (int i = 0; !st && i < l.n; i++) {
    size_t n = strlen(l.v[i].name) + 1;
    need += n;
    if (len + n < cap) len += (size_t)snprintf(buf + len, cap - len, "%s\n", l.v[i].name);
  }
  free(l.v);
  if (!st && need > cap)
    st = esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_config_list_presets: %zu bytes needed, "
                   "buffer has %zu", need, cap);
  return st;
}

esmt_status esmt_config_find_preset(const esmt_config *c, const char *name, char *path,
                                    size_t cap) {
  if (!valid_name(name))
    return esmt_fail(ESMT_ERR_CONFIG, "'%s' is not a preset name (a YAML file is loaded with "
                     "--config / esmt_config_load_yaml)", name);
  /* The first directory of the search path holding NAME.yaml, as scan()
   * would keep it, without listing (and opening) every preset. */
  char dirs[8192];
  search_path(c, dirs, sizeof dirs);
  char *save = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    struct stat sb;
    if ((size_t)snprintf(path, cap, "%s/%s.yaml", d, name) < cap && stat(path, &sb) == 0 &&
        S_ISREG(sb.st_mode))
      return ESMT_OK;
  }
  path[0] = '\0';
  preset_list l = {0, 0, NULL};
  esmt_status st = scan(c, &l);
  if (st) return st;
  /* not found: say what exists and where we looked */
  const char *names[64];
  char avail[1024] = "";
  size_t len = 0;
  int n = l.n < 64 ? l.n : 64;
  for (int i = 0; i < n; i++) {
    names[i] = l.v[i].name;
    if (len < sizeof avail)
      len += (size_t)snprintf(avail + len, sizeof avail - len, "%s%s", i ? " " : "", names[i]);
  }
  const char *best = n ? esmt_closest(name, names, n) : NULL;
  char shown[8192];
  search_path(c, dirs, sizeof dirs);
  size_t sl = 0;
  shown[0] = '\0';
  save = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save))
    if (sl < sizeof shown) sl += (size_t)snprintf(shown + sl, sizeof shown - sl, "%s%s", sl ? ":" : "", d);
  st = esmt_fail(ESMT_ERR_CONFIG, "no preset named '%s'%s%s%s; available: %s (searched %s)", name,
                 best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "",
                 n ? avail : "none", shown);
  free(l.v);
  return st;
}
