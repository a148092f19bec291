/* SPDX-License-Identifier: MIT */
/* Backend discovery, ABI checks, probing and choice. See registry.h. */
#define _GNU_SOURCE
#include "ops_table.h"
#include "registry.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef ESMT_INSTALL_BACKEND_DIR
#define ESMT_INSTALL_BACKEND_DIR ""
#endif

static void copy_str(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

static esmt_backend_entry *push_entry(esmt_registry *r) {
  if (r->count == r->cap) {
    int cap = r->cap ? r->cap * 2 : 8;
    esmt_backend_entry *e = realloc(r->entries, (size_t)cap * sizeof *e);
    if (!e) return NULL;
    r->entries = e;
    r->cap = cap;
  }
  esmt_backend_entry *e = &r->entries[r->count++];
  memset(e, 0, sizeof *e);
  return e;
}

static int has_so_suffix(const char *name) {
  size_t n = strlen(name);
  return n > 3 && strcmp(name + n - 3, ".so") == 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The loaded entry named `name`, or NULL. */
static const esmt_backend_entry *loaded_named(const esmt_registry *r, const char *name) {
  for (int i = 0; i < r->count; i++)
    if (r->entries[i].loaded && strcmp(r->entries[i].name, name) == 0) return &r->entries[i];
  return NULL;
}

/* dlopen's "libX.so.N: cannot open shared object file" for a library the
 * plugin needs, said so that a user can act on it. */
static void explain_load_error(const char *path, const char *why, char *out, size_t n) {
  const char *tail = why ? strstr(why, ": cannot open shared object file") : NULL;
  size_t len = tail ? (size_t)(tail - why) : 0;
  if (!tail || len == 0 || len >= 128 || (strlen(path) == len && !strncmp(path, why, len))) {
    snprintf(out, n, "cannot load: %s", why ? why : "unknown dlopen error");
    return;
  }
  char lib[128];
  memcpy(lib, why, len);
  lib[len] = 0;
  const char *ver = strstr(lib, ".so.");
  const char *what = !strncmp(lib, "libcublas", 9) ? "cuBLAS"
                     : !strncmp(lib, "libnccl", 7)  ? "NCCL"
                     : !strncmp(lib, "libcudart", 9) ? "the CUDA runtime"
                                                      : NULL;
  if (what)
    snprintf(out, n,
             "cannot load: it needs %s (%s%s%s), which is not on the loader path: install it (a "
             "CUDA toolkit or runtime package of that version) or add its directory to "
             "LD_LIBRARY_PATH", lib, what, ver ? ", version " : "", ver ? ver + 4 : "");
  else
    snprintf(out, n,
             "cannot load: it needs %s, which is not on the loader path: install it or add its "
             "directory to LD_LIBRARY_PATH", lib);
}

/* Load one backend file into a new entry; never fails the whole registry. */
static esmt_status load_one(esmt_registry *r, const char *path, const esmtb_job *job,
                            const esmt_logger *lg) {
  esmt_backend_entry *e = push_entry(r);
  if (!e) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "backend registry: out of memory");
  copy_str(e->path, sizeof e->path, path);
  const char *base = strrchr(path, '/');
  copy_str(e->name, sizeof e->name, base ? base + 1 : path);

  dlerror();
  /* NODELETE: CUDA runtimes register exit handlers; never unmap them. */
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    explain_load_error(path, dlerror(), e->reason, sizeof e->reason);
    esmt_logger_log(lg, ESMT_LOG_WARN, "backend %s skipped: %s", path, e->reason);
    return ESMT_OK;
  }
  esmtb_init_fn init = (esmtb_init_fn)(uintptr_t)dlsym(h, ESMTB_INIT_SYMBOL);
  esmtb_score_fn score = (esmtb_score_fn)(uintptr_t)dlsym(h, ESMTB_SCORE_SYMBOL);
  if (!init || !score) {
    snprintf(e->reason, sizeof e->reason, "not an esmtrain backend: symbol %s missing",
             !init ? ESMTB_INIT_SYMBOL : ESMTB_SCORE_SYMBOL);
    esmt_logger_log(lg, ESMT_LOG_WARN, "backend %s skipped: %s", path, e->reason);
    dlclose(h);
    return ESMT_OK;
  }
  const char *(*built_for)(void) =
      (const char *(*)(void))(uintptr_t)dlsym(h, ESMTB_LIBRARY_VERSION_SYMBOL);
  const char *mine = esmt_version_string();
  if (built_for && strcmp(built_for(), mine) != 0) {
    char lib[PATH_MAX] = "libesmtrain.so";
    Dl_info info;
    if (dladdr((void *)(uintptr_t)&esmt_registry_load, &info) && info.dli_fname)
      copy_str(lib, sizeof lib, info.dli_fname);
    snprintf(e->reason, sizeof e->reason, "refused: built for libesmtrain %.32s, and %.160s is "
             "%s: a plugin of another installation", built_for(), lib, mine);
    esmt_logger_log(lg, ESMT_LOG_WARN, "backend %s %s", path, e->reason);
    dlclose(h);
    return ESMT_OK;
  }
  esmt_clear_error();
  const esmtb_backend *b = init(esmt_backend_host());
  if (!b) {
    snprintf(e->reason, sizeof e->reason, "initialisation failed: %s",
             esmt_last_error()[0] ? esmt_last_error() : "no reason given");
    esmt_logger_log(lg, ESMT_LOG_WARN, "backend %s skipped: %s", path, e->reason);
    dlclose(h);
    return ESMT_OK;
  }
  esmtb_ops *ops = malloc(sizeof *ops);
  if (!ops) {
    dlclose(h);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "backend %s: out of memory", path);
  }
  if (esmt_ops_resolve(b, ops, e->reason, sizeof e->reason) != ESMT_OK) {
    esmt_logger_log(lg, ESMT_LOG_WARN, "backend %s %s", path, e->reason);
    free(ops);
    dlclose(h);
    return ESMT_OK;
  }
  const esmt_backend_entry *first = loaded_named(r, ops->name);
  if (first) { /* the earlier path wins; this file stays listed, unused, saying so */
    snprintf(e->reason, sizeof e->reason, "not used: shadowed by %s (the same backend name, "
             "earlier in the search path)", first->path);
    copy_str(e->name, sizeof e->name, ops->name);
    esmt_logger_log(lg, ESMT_LOG_WARN, "backend '%s': using %s; %s is shadowed (the same name, "
                    "later in the search path) and not used", ops->name, first->path, path);
    free(ops);
    dlclose(h);
    return ESMT_OK;
  }
  e->handle = h;
  e->ops = e->resolved = ops;
  e->loaded = 1;
  copy_str(e->name, sizeof e->name, ops->name);
  copy_str(e->description, sizeof e->description, ops->description);

  e->probe.struct_size = sizeof e->probe;
  esmt_clear_error();
  if (ops->probe(job, &e->probe) != 0) {
    e->probe.available = 0;
    snprintf(e->probe.reason, sizeof e->probe.reason, "probe failed: %s", esmt_last_error());
  }
  e->score = e->probe.available ? score(job) : 0;
  if (e->score <= 0) {
    e->score = 0;
    e->probe.available = 0;
  }
  copy_str(e->reason, sizeof e->reason, e->probe.available ? "" : e->probe.reason);
  esmt_logger_log(lg, ESMT_LOG_DEBUG, "backend %s from %s: %s, score %d", e->name, path,
                  e->probe.available ? "available" : "unavailable", e->score);
  return ESMT_OK;
}

/* Scan one directory. Returns the number of *.so files seen, -1 if missing. */
static int scan_dir(esmt_registry *r, const char *dir, const esmtb_job *job,
                    const esmt_logger *lg, esmt_status *st) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  char **names = NULL;
  int n = 0, cap = 0;
  struct dirent *de;
  const size_t only = strlen(r->only);
  while ((de = readdir(d)) != NULL) {
    if (!has_so_suffix(de->d_name)) continue;
    /* a forced backend: its plugin (NAME.so) and cpu.so, the host side of
     * optimizer offload and streaming (it maps no GPU library); no other */
    if (only && (strncmp(de->d_name, r->only, only) != 0 || strcmp(de->d_name + only, ".so") != 0) &&
        strcmp(de->d_name, "cpu.so") != 0)
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 8;
      char **nn = realloc(names, (size_t)cap * sizeof *nn);
      if (!nn) break;
      names = nn;
    }
    names[n] = strdup(de->d_name);
    if (names[n]) n++;
  }
  closedir(d);
  if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_names); /* deterministic order */
  for (int i = 0; i < n; i++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && *st == ESMT_OK)
      *st = load_one(r, path, job, lg);
    free(names[i]);
  }
  free(names);
  return n;
}

static void note_searched(esmt_registry *r, const char *dir, int found) {
  size_t len = strlen(r->searched);
  snprintf(r->searched + len, sizeof r->searched - len, "%s%s (%s)", len ? ", " : "", dir,
           found < 0 ? "missing" : found == 0 ? "no backends" : "searched");
}

static esmt_status scan_list(esmt_registry *r, const char *list, const esmtb_job *job,
                             const esmt_logger *lg) {
  char *copy = strdup(list);
  if (!copy) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "backend registry: out of memory");
  esmt_status st = ESMT_OK;
  char *save = NULL;
  for (char *dir = strtok_r(copy, ":", &save); dir && st == ESMT_OK;
       dir = strtok_r(NULL, ":", &save)) {
    if (dir[0] == '\0') continue;
    note_searched(r, dir, scan_dir(r, dir, job, lg, &st));
  }
  free(copy);
  return st;
}

void esmt_library_dir(char *out, size_t cap) {
  Dl_info info;
  out[0] = '\0';
  if (dladdr((void *)(uintptr_t)&esmt_registry_load, &info) && info.dli_fname) {
    char buf[PATH_MAX];
    copy_str(buf, sizeof buf, info.dli_fname);
    char *slash = strrchr(buf, '/');
    if (!slash) return;
    *slash = '\0';
    copy_str(out, cap, buf);
  }
}

void esmt_plugin_dir(const char *kind, char *out, size_t cap) {
  char dir[PATH_MAX];
  esmt_library_dir(dir, sizeof dir);
  out[0] = '\0';
  if (!dir[0]) return;
  struct stat sb;
  snprintf(out, cap, "%s/" ESMT_PLUGIN_DIR_NAME "/%s", dir, kind);
  if (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode)) return;
  snprintf(out, cap, "%s/esmtrain/%s", dir, kind); /* a build tree */
}

static void next_to_library(char *out, size_t cap) { esmt_plugin_dir("backends", out, cap); }

static esmt_status scan_all(esmt_registry *r, const char *path, const esmtb_job *job,
                            const esmt_logger *lg, const char **source_out);

esmt_status esmt_registry_load(esmt_registry *r, const char *path, const char *only,
                               const esmtb_job *job, const esmt_logger *lg) {
  memset(r, 0, sizeof *r);
  r->chosen = -1;
  if (only && strlen(only) < sizeof r->only) copy_str(r->only, sizeof r->only, only);
  const char *source = "the API";
  esmt_status st = scan_all(r, path, job, lg, &source);
  if (!st && r->only[0] && r->count == 0) {
    /* no plugin file carries that name: look at all (the choice then says
     * which backends there are) */
    r->only[0] = '\0';
    r->searched[0] = '\0';
    st = scan_all(r, path, job, lg, &source);
  }
  if (st) return st;
  int loaded = 0;
  for (int i = 0; i < r->count; i++) loaded += r->entries[i].loaded;
  if (!loaded) {
    char msg[1536];
    size_t len = (size_t)snprintf(msg, sizeof msg, "no esmtrain backend could be loaded from %s: %s",
                                  source, r->searched[0] ? r->searched : "(empty path)");
    for (int i = 0; i < r->count && len < sizeof msg; i++)
      len += (size_t)snprintf(msg + len, sizeof msg - len, "; %s: %s", r->entries[i].path,
                              r->entries[i].reason);
    return esmt_fail(ESMT_ERR_NO_BACKEND, "%s", msg);
  }
  return ESMT_OK;
}

static esmt_status scan_all(esmt_registry *r, const char *path, const esmtb_job *job,
                            const esmt_logger *lg, const char **source_out) {
  const char *source = "the API";
  if (!path || !*path) {
    path = getenv("ESMTRAIN_BACKEND_PATH");
    source = "ESMTRAIN_BACKEND_PATH";
  }
  esmt_status st;
  if (path && *path) {
    st = scan_list(r, path, job, lg);
  } else {
    source = "the default locations";
    char here[PATH_MAX], installed[PATH_MAX], real_here[PATH_MAX], real_inst[PATH_MAX];
    next_to_library(here, sizeof here);
    copy_str(installed, sizeof installed, ESMT_INSTALL_BACKEND_DIR);
    /* next to the loaded library first: a library installed, copied or
     * relocated elsewhere than its configured prefix uses its own plugins,
     * not another installation's */
    st = ESMT_OK;
    if (here[0]) st = scan_list(r, here, job, lg);
    int same = here[0] && installed[0] && realpath(here, real_here) &&
               realpath(installed, real_inst) && strcmp(real_here, real_inst) == 0;
    if (st == ESMT_OK && installed[0] && !same) st = scan_list(r, installed, job, lg);
  }
  *source_out = source;
  return st;
}

static void list_backends(const esmt_registry *r, char *out, size_t cap) {
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < r->count && len < cap; i++) {
    const esmt_backend_entry *e = &r->entries[i];
    if (!e->loaded) continue;
    len += (size_t)snprintf(out + len, cap - len, "%s%s (%s)", len ? ", " : "", e->name,
                            e->probe.available ? "available" : e->reason);
  }
}

esmt_status esmt_registry_choose(esmt_registry *r, const char *forced) {
  const char *source = "the API";
  if (!forced || !*forced) {
    forced = getenv("ESMTRAIN_BACKEND");
    source = "ESMTRAIN_BACKEND";
  }
  char list[1024];
  if (forced && *forced) {
    for (int i = 0; i < r->count; i++) {
      esmt_backend_entry *e = &r->entries[i];
      if (!e->loaded || strcmp(e->name, forced) != 0) continue;
      if (!e->probe.available) {
        list_backends(r, list, sizeof list);
        return esmt_fail(ESMT_ERR_NO_BACKEND,
                         "backend '%s' (forced by %s) is unavailable: %s. Backends: %s", forced,
                         source, e->reason, list);
      }
      r->chosen = i;
      return ESMT_OK;
    }
    list_backends(r, list, sizeof list);
    return esmt_fail(ESMT_ERR_NO_BACKEND, "backend '%s' (forced by %s) not found. Backends: %s",
                     forced, source, list);
  }
  int best = -1;
  for (int i = 0; i < r->count; i++) {
    const esmt_backend_entry *e = &r->entries[i];
    if (e->loaded && e->probe.available && (best < 0 || e->score > r->entries[best].score))
      best = i;
  }
  if (best < 0) {
    list_backends(r, list, sizeof list);
    return esmt_fail(ESMT_ERR_NO_BACKEND, "no backend can run on this machine. Backends: %s",
                     list);
  }
  r->chosen = best;
  return ESMT_OK;
}

void esmt_registry_release(esmt_registry *r) {
  if (!r) return;
  for (int i = 0; i < r->count; i++) {
    if (r->entries[i].handle) dlclose(r->entries[i].handle);
    free(r->entries[i].resolved);
  }
  free(r->entries);
  memset(r, 0, sizeof *r);
  r->chosen = -1;
}
