/* SPDX-License-Identifier: MIT */
/* esmt_contact_pairs_read (infer.h): a text file of contacts, one a line,
 * "ID I J" (whitespace-separated; I and J 1-based residue numbers of the
 * record ID), '#' comments and blank lines skipped, read under the
 * library's input policy (esmt_line_reader). Every error names the file
 * and the line. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

static int find_id(const char *id, size_t len, int count, const char *const *ids) {
  for (int p = 0; p < count; p++)
    if (strlen(ids[p]) == len && !memcmp(ids[p], id, len)) return p;
  return -1;
}

/* The next whitespace-separated field of *s: start and length (0: none). */
static size_t field(const char **s, const char **start) {
  while (**s == ' ' || **s == '\t' || **s == '\r') ++*s;
  *start = *s;
  while (**s && **s != ' ' && **s != '\t' && **s != '\r') ++*s;
  return (size_t)(*s - *start);
}

static int residue_number(const char *f, size_t len, long *out) {
  char buf[24];
  if (!len || len >= sizeof buf) return 0;
  memcpy(buf, f, len);
  buf[len] = 0;
  char *end = NULL;
  errno = 0;
  const long v = strtol(buf, &end, 10);
  if (errno || *end || v < 1) return 0;
  *out = v;
  return 1;
}

esmt_status esmt_contact_pairs_read(const char *path, int count, const char *const *ids,
                                    const int *lengths, esmt_contact_pair **out, size_t *n) {
  const char *fn = "esmt_contact_pairs_read";
  ESMT_CHECK_ARG(path && out && n && (count == 0 || (ids && lengths)), fn, "NULL argument");
  *out = NULL;
  *n = 0;
  esmt_line_reader_options o = ESMT_LINE_READER_OPTIONS_INIT;
  o.what = "contact pairs";
  esmt_line_reader *r = NULL;
  esmt_status st = esmt_line_reader_open(path, &o, &r);
  if (st) return st;
  esmt_contact_pair *list = NULL;
  size_t cap = 0;
  for (;;) {
    const char *line = NULL, *f[4];
    size_t len = 0, fl[4];
    int got = 0;
    if ((st = esmt_line_reader_next(r, &line, &len, &got)) || !got) break;
    const uint64_t ln = esmt_line_reader_line_number(r);
    const char *s = line;
    for (int k = 0; k < 4; k++) fl[k] = field(&s, &f[k]);
    if (!fl[0] || f[0][0] == '#') continue;
    long i = 0, j = 0;
    if (!fl[1] || !fl[2] || fl[3]) {
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu: expected 'ID I J' (a record id and two "
                     "1-based residue numbers)", path, (unsigned long long)ln);
      break;
    }
    const int p = find_id(f[0], fl[0], count, ids);
    if (p < 0) {
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu: no protein '%.*s' among the %d of the "
                     "input", path, (unsigned long long)ln, (int)(fl[0] < 200 ? fl[0] : 200), f[0],
                     count);
      break;
    }
    if (!residue_number(f[1], fl[1], &i) || !residue_number(f[2], fl[2], &j) ||
        i > lengths[p] || j > lengths[p] || i == j) {
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu: residues '%.*s' and '%.*s' of '%s' (%d "
                     "residues): two different numbers in 1..%d", path, (unsigned long long)ln,
                     (int)(fl[1] < 24 ? fl[1] : 24), f[1], (int)(fl[2] < 24 ? fl[2] : 24), f[2],
                     ids[p], lengths[p], lengths[p]);
      break;
    }
    if (*n == cap) {
      cap = cap ? 2 * cap : 256;
      esmt_contact_pair *grown = realloc(list, cap * sizeof *list);
      if (!grown) {
        st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory at line %llu", path,
                       (unsigned long long)ln);
        break;
      }
      list = grown;
    }
    list[(*n)++] = (esmt_contact_pair){p, (int)i - 1, (int)j - 1};
  }
  esmt_line_reader_close(r);
  if (st) {
    free(list);
    *n = 0;
    return st;
  }
  *out = list;
  return ESMT_OK;
}

void esmt_contact_pairs_free(esmt_contact_pair *pairs) { free(pairs); }
