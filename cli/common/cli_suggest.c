/* SPDX-License-Identifier: MIT */
/* "did you mean" for commands and options: the near name is the library's
 * (esmt_suggest); a command's options are read from its own --help text,
 * so that the list cannot drift from what the command takes. */
#define _GNU_SOURCE /* open_memstream */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_OPTIONS 256

/* The "--name" and "-x" words of `text` (pointers into it, cut in place). */
static int option_words(char *text, const char **names, int cap) {
  int n = 0;
  for (char *p = text; *p && n < cap; p++) {
    const int starts = *p == '-' && (p == text || isspace((unsigned char)p[-1]) || p[-1] == '[' ||
                                     p[-1] == '(' || p[-1] == '|');
    if (!starts) continue;
    char *e = p + 1 + (p[1] == '-');
    if (!isalnum((unsigned char)*e)) continue;
    while (isalnum((unsigned char)*e) || *e == '-' || *e == '_') e++;
    const char end = *e;
    *e = 0;
    names[n++] = p;
    p = e;
    if (!end) break;
  }
  return n;
}

const char *cli_option_hint(const char *arg, void (*usage)(FILE *f)) {
  static char hint[160];
  hint[0] = 0;
  char *text = NULL;
  size_t len = 0;
  FILE *f = arg && arg[0] == '-' ? open_memstream(&text, &len) : NULL;
  if (!f) return hint;
  usage(f);
  if (fclose(f) == 0 && text) {
    const char *names[MAX_OPTIONS];
    const int n = option_words(text, names, MAX_OPTIONS);
    char word[128];
    snprintf(word, sizeof word, "%s", arg);
    word[strcspn(word, "=")] = 0; /* --flag=VALUE */
    const char *near = esmt_suggest(word, names, n);
    if (near && strcmp(near, word)) snprintf(hint, sizeof hint, "; did you mean '%s'?", near);
  }
  free(text);
  return hint;
}
