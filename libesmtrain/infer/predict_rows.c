/* SPDX-License-Identifier: MIT */
/* The proteins esmt_predict_table reads (predict_rows.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predict_rows.h"

struct predict_rows {
  const char *path;
  esmt_table_reader *table;    /* a table, or */
  esmt_sequence_reader *fasta; /* FASTA */
  int seq_col;
  const char *const *first;    /* a table's first row, read with its header */
  int first_count, first_got, pending;
  char *header, *fields;       /* CSV text */
  size_t fields_len, fields_cap;
  int32_t *ids;
  size_t ids_cap;
  uint64_t record;
};

esmt_status predict_csv_field(char **buf, size_t *len, size_t *cap, const char *s, char sep) {
  const int quote = strpbrk(s, ",\"\r\n") != NULL;
  const size_t need = *len + 2 * strlen(s) + 4;
  if (need > *cap) {
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *p = realloc(*buf, c);
    if (!p) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory");
    *buf = p;
    *cap = c;
  }
  char *o = *buf + *len;
  if (sep) *o++ = sep;
  if (quote) *o++ = '"';
  for (; *s; s++) {
    if (*s == '"') *o++ = '"';
    *o++ = *s;
  }
  if (quote) *o++ = '"';
  *o = '\0';
  *len = (size_t)(o - *buf);
  return ESMT_OK;
}

/* fields joined by commas, as CSV */
static esmt_status join(char **buf, size_t *len, size_t *cap, const char *const *f, int n) {
  esmt_status st = ESMT_OK;
  *len = 0;
  for (int i = 0; i < n && !st; i++) st = predict_csv_field(buf, len, cap, f[i], i ? ',' : 0);
  if (!st && n == 0) st = predict_csv_field(buf, len, cap, "", 0);
  return st;
}

static int is_fasta_name(const char *path) {
  static const char *const ext[] = {".fasta", ".fa", ".faa", ".fas", ".fna"};
  const size_t n = strlen(path);
  const size_t gz = n > 3 && !strcmp(path + n - 3, ".gz") ? 3 : 0;
  for (size_t k = 0; k < sizeof ext / sizeof *ext; k++) {
    const size_t e = strlen(ext[k]);
    if (n - gz > e && !strncmp(path + n - gz - e, ext[k], e)) return 1;
  }
  return 0;
}

esmt_status predict_rows_open(const char *path, const char *seq_column, predict_rows **out) {
  predict_rows *r = calloc(1, sizeof *r);
  if (!r) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory");
  r->path = path;
  esmt_status st;
  if (is_fasta_name(path)) {
    st = esmt_sequence_reader_open(path, NULL, &r->fasta);
    if (!st && !(r->header = strdup("id,sequence")))
      st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory");
  } else {
    const char *want = seq_column ? seq_column : "sequence";
    /* the header is known once the first row is asked for: that row is
     * kept (valid until the next read) for the first predict_rows_next */
    st = esmt_table_reader_open(path, ESMT_TABLE_BY_NAME, &r->table);
    if (!st) st = esmt_table_reader_next(r->table, &r->first, &r->first_count, &r->first_got);
    const char *const *names = NULL;
    const int nc = st ? 0 : esmt_table_reader_columns(r->table, &names);
    r->pending = 1;
    if (!st && nc == 0) st = esmt_fail(ESMT_ERR_FORMAT, "%s: no header row", path);
    if (!st && (r->seq_col = esmt_table_reader_column(r->table, want)) < 0) {
      char list[1024] = "";
      for (int i = 0, at = 0; i < nc && at < (int)sizeof list; i++)
        at += snprintf(list + at, sizeof list - (size_t)at, "%s%s", i ? ", " : "", names[i]);
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: %s column '%s' (its columns: %s; --seq-col names "
                     "another)", path, r->seq_col == -2 ? "more than one" : "no sequence", want,
                     list);
    }
    size_t len = 0, cap = 0;
    if (!st) st = join(&r->header, &len, &cap, names, nc);
  }
  if (st) {
    predict_rows_close(r);
    return st;
  }
  *out = r;
  return ESMT_OK;
}

const char *predict_rows_header(const predict_rows *r) { return r->header; }

const char *predict_rows_unit(const predict_rows *r) { return r->fasta ? "record" : "line"; }

int predict_rows_has_column(const predict_rows *r, const char *name) {
  if (r->fasta) return !strcmp(name, "id") || !strcmp(name, "sequence");
  return esmt_table_reader_column(r->table, name) != -1;
}

static esmt_status grow_ids(predict_rows *r, size_t n) {
  if (n <= r->ids_cap) return ESMT_OK;
  int32_t *p = realloc(r->ids, n * sizeof *p);
  if (!p) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory");
  r->ids = p;
  r->ids_cap = n;
  return ESMT_OK;
}

static esmt_status next_fasta(predict_rows *r, int64_t *n, int *got) {
  esmt_sequence seq = ESMT_SEQUENCE_INIT;
  esmt_status st = esmt_sequence_reader_next(r->fasta, &seq, got);
  if (st || !*got) return st;
  if ((st = grow_ids(r, seq.length + 1))) return st;
  memcpy(r->ids, seq.tokens, seq.length * sizeof *r->ids);
  char *letters = malloc(seq.length + 1);
  if (!letters) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory");
  for (uint64_t i = 0; i < seq.length; i++) {
    const char *t = esmt_token_string(seq.tokens[i]);
    letters[i] = t && strlen(t) == 1 ? t[0] : 'X'; /* <unk> */
  }
  letters[seq.length] = '\0';
  const char *f[2] = {seq.id, letters};
  st = join(&r->fields, &r->fields_len, &r->fields_cap, f, 2);
  free(letters);
  *n = (int64_t)seq.length;
  return st;
}

esmt_status predict_rows_next(predict_rows *r, const char **fields, const int32_t **ids,
                              int64_t *n, uint64_t *line, int *got) {
  esmt_status st;
  r->record++;
  if (r->fasta) {
    st = next_fasta(r, n, got);
    *line = r->record; /* FASTA: the record's number */
  } else {
    const char *const *f = NULL;
    int count = 0;
    if (r->pending) {
      f = r->first;
      count = r->first_count;
      *got = r->first_got;
      r->pending = 0;
      st = ESMT_OK;
    } else {
      st = esmt_table_reader_next(r->table, &f, &count, got);
    }
    if (!st && *got) {
      *line = esmt_table_reader_line(r->table);
      const char *seq = f[r->seq_col];
      const size_t len = strlen(seq);
      st = grow_ids(r, len + 1);
      if (!st && (st = esmt_tokenize(seq, len, r->ids, r->ids_cap, NULL)))
        esmt_fail_prefix(st, "%s: line %llu: ", r->path, (unsigned long long)*line);
      if (!st) st = join(&r->fields, &r->fields_len, &r->fields_cap, f, count);
      *n = (int64_t)len;
    }
  }
  if (st || !*got) return st;
  *fields = r->fields;
  *ids = r->ids;
  return ESMT_OK;
}

void predict_rows_close(predict_rows *r) {
  if (!r) return;
  esmt_table_reader_close(r->table);
  esmt_sequence_reader_close(r->fasta);
  free(r->header);
  free(r->fields);
  free(r->ids);
  free(r);
}
