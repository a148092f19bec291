/* SPDX-License-Identifier: MIT */
/* `score --variants`: splitting CSV lines (score_common.h); mutations
 * such as "A123G:L45P" are parsed by esmt_mutations_parse. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "score_common.h"

static char *trim(char *s, char **end) {
  while (*s == ' ' || *s == '\t') s++;
  char *e = *end;
  while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
  *end = e;
  return s;
}

static int push(char ***fields, int *cap, int n, char *f) {
  if (n == *cap) {
    const int c = *cap ? 2 * *cap : 16;
    char **g = realloc(*fields, (size_t)c * sizeof *g);
    if (!g) return 1;
    *fields = g;
    *cap = c;
  }
  (*fields)[n] = f;
  return 0;
}

int score_csv_split(char *line, char ***fields, int *cap) {
  int n = 0;
  char *p = line;
  for (;;) {
    while (*p == ' ' || *p == '\t') p++;
    char *start = p, *w = p;
    if (*p == '"') { /* quoted: unescape in place, up to the closing quote */
      p++;
      for (;;) {
        if (!*p) return -1;
        if (*p == '"' && p[1] == '"') { *w++ = '"'; p += 2; continue; }
        if (*p == '"') { p++; break; }
        *w++ = *p++;
      }
      while (*p == ' ' || *p == '\t') p++;
      if (*p && *p != ',') return -1; /* text after the closing quote */
    } else {
      while (*p && *p != ',') p++;
      w = p;
      start = trim(start, &w);
    }
    const int last = *p != ',';
    if (!last) p++;
    *w = 0;
    if (push(fields, cap, n, start)) return -1;
    n++;
    if (last) return n;
  }
}
