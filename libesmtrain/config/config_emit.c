/* SPDX-License-Identifier: MIT */
/* The resolved configuration as YAML: every key, grouped by section, with
 * its value, its one-line doc, choices and default as a comment. The
 * output loads back (esmt_config_load_yaml) to the same values. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

typedef struct sbuf {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) { b->oom = 1; return; }
    if ((size_t)n < b->cap - b->len) { b->len += (size_t)n; return; }
    size_t cap = b->cap * 2 + (size_t)n;
    char *q = realloc(b->p, cap);
    if (!q) { b->oom = 1; return; }
    b->p = q;
    b->cap = cap;
  }
}

/* A YAML double-quoted scalar (values hold no control characters). */
static void add_quoted(sbuf *b, const char *s) {
  add(b, "\"");
  for (const char *p = s; *p; p++) add(b, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
  add(b, "\"");
}

esmt_status esmt_config_to_yaml(const esmt_config *c, char **yaml) {
  ESMT_CHECK_ARG(c && yaml, "esmt_config_to_yaml", "config and yaml must not be NULL");
  *yaml = NULL;
  sbuf b = {malloc(8192), 0, 8192, 0};
  if (!b.p) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_config_to_yaml: out of memory");
  b.p[0] = '\0';
  add(&b, "# esmtrain configuration: every key with its resolved value.\n"
          "# Comments: what the key means, its choices, its default.\n");
  size_t section_len = 0;
  const char *section = NULL;
  for (int i = 0; i < esmt_config_nkeys; i++) {
    const esmt_key_def *k = &esmt_config_keys[i];
    const char *dot = strchr(k->name, '.');
    size_t sl = (size_t)(dot - k->name);
    if (!section || sl != section_len || strncmp(section, k->name, sl) != 0) {
      section = k->name;
      section_len = sl;
      add(&b, "\n%.*s:\n", (int)sl, k->name);
    }
    add(&b, "  %s: ", dot + 1);
    if (k->type == ESMT_CONFIG_STRING || k->type == ESMT_CONFIG_ENUM) add_quoted(&b, c->value[i]);
    else add(&b, "%s", c->value[i]);
    add(&b, "  # %s", k->doc);
    if (k->choices) add(&b, "; one of %s", k->choices);
    add(&b, " (default %s)\n", k->def[0] ? k->def : "\"\"");
  }
  if (b.oom) {
    free(b.p);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_config_to_yaml: out of memory");
  }
  *yaml = b.p;
  return ESMT_OK;
}
