/* SPDX-License-Identifier: MIT */
/* `score --variants`: splitting CSV lines and parsing mutations such as
 * "A123G:L45P" (score_common.h). */
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

int score_parse_mutations(const char *text, score_mutation *out, int cap, char *msg,
                          size_t msg_cap) {
  int n = 0;
  const char *p = text;
  const int several = strchr(text, ':') != NULL; /* name the part in messages */
  if (!*p) {
    snprintf(msg, msg_cap, "the mutation is empty");
    return -1;
  }
  for (;;) {
    while (*p == ' ' || *p == '\t') p++;
    const char *start = p;
    const char *colon = strchr(p, ':');
    const size_t len = colon ? (size_t)(colon - p) : strlen(p);
    char one[64];
    size_t k = len;
    while (k > 0 && (p[k - 1] == ' ' || p[k - 1] == '\t')) k--;
    if (k == 0 || k >= sizeof one) {
      snprintf(msg, msg_cap, "'%.*s' is not a mutation: expected the wild-type letter, the "
               "position and the mutant letter (A123G), several joined by ':'", (int)len, start);
      return -1;
    }
    memcpy(one, p, k);
    one[k] = 0;
    char *end = NULL;
    const int ok_shape = k >= 3 && isalpha((unsigned char)one[0]) &&
                         isalpha((unsigned char)one[k - 1]) &&
                         (isdigit((unsigned char)one[1]) ||
                          (one[1] == '-' && isdigit((unsigned char)one[2])));
    errno = 0;
    const long long pos = ok_shape ? strtoll(one + 1, &end, 10) : 0;
    if (!ok_shape || end != one + k - 1 || errno == ERANGE) {
      snprintf(msg, msg_cap, "%s%s%snot a mutation: expected the wild-type letter, the "
               "position and the mutant letter (A123G), several joined by ':'",
               several ? "'" : "", several ? one : "", several ? "' is " : "");
      return -1;
    }
    const int wt = esmt_token_id(one[0]), mt = esmt_token_id(one[k - 1]);
    if (wt < 0 || mt < 0) {
      snprintf(msg, msg_cap, "%s%s%s'%c' is not a letter of the ESM-2 alphabet",
               several ? "'" : "", several ? one : "", several ? "': " : "",
               wt < 0 ? one[0] : one[k - 1]);
      return -1;
    }
    if (n == cap) {
      snprintf(msg, msg_cap, "too many mutations");
      return -1;
    }
    for (int j = 0; j < n; j++)
      if (out[j].pos == pos) {
        snprintf(msg, msg_cap, "position %lld is mutated twice", pos);
        return -1;
      }
    out[n].wt = wt;
    out[n].mt = mt;
    out[n].pos = pos;
    n++;
    if (!colon) return n;
    p = colon + 1;
  }
}
