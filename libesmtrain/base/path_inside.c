/* SPDX-License-Identifier: MIT */
/* esmt_path_inside: whether one path lies inside (or is) another, symbolic
 * links resolved, also for paths whose last components do not exist yet
 * (an output about to be created). */
#define _DEFAULT_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h" /* the run directories of trainer.h */
#include "path_inside.h"

/* The absolute path of p with symbolic links resolved; the components
 * that do not exist are appended as written. */
static int canonical(const char *p, char *out) {
  if (realpath(p, out)) return 0;
  char dir[PATH_MAX], base[PATH_MAX];
  const char *slash = strrchr(p, '/');
  if (!slash) { snprintf(dir, sizeof dir, "."); snprintf(base, sizeof base, "%s", p); }
  else if (slash == p) { snprintf(dir, sizeof dir, "/"); snprintf(base, sizeof base, "%s", p + 1); }
  else { snprintf(dir, sizeof dir, "%.*s", (int)(slash - p), p); snprintf(base, sizeof base, "%s", slash + 1); }
  if (!strcmp(dir, p) || canonical(dir, out) != 0) return -1;
  if (!*base || !strcmp(base, ".")) return 0;
  if (!strcmp(base, "..")) {
    char *s = strrchr(out, '/');
    if (s && s != out) *s = '\0';
    else snprintf(out, PATH_MAX, "/");
    return 0;
  }
  size_t n = strlen(out);
  if (n + 1 + strlen(base) >= PATH_MAX) return -1;
  snprintf(out + n, PATH_MAX - n, "%s%s", out[n - 1] == '/' ? "" : "/", base);
  return 0;
}

int esmt_path_canonical(const char *path, char *out, size_t cap) {
  char buf[PATH_MAX];
  if (!path || !out || canonical(path, buf) != 0 || strlen(buf) >= cap) return -1;
  memcpy(out, buf, strlen(buf) + 1);
  return 0;
}

int esmt_path_inside(const char *inner, const char *outer) {
  char a[PATH_MAX], b[PATH_MAX];
  if (!inner || !outer || canonical(inner, a) != 0 || canonical(outer, b) != 0) return 0;
  size_t n = strlen(b);
  if (n == 1) return 1; /* everything is inside "/" */
  return !strncmp(a, b, n) && (a[n] == '/' || a[n] == '\0');
}
