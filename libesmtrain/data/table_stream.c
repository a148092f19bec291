/* SPDX-License-Identifier: MIT */
/* See table_stream.h. The input is fed to the parser one line at a time
 * (a segment ends at a '\n' or at the end of the read buffer), so that
 * every message knows its line: the row's first line for row-level
 * problems, the current line for parse errors.
 *
 * CSV: libcsv (Debian libcsv-dev) in strict mode, RFC 4180: a field that
 * holds the delimiter, a quote or a line break is quoted, inner quotes
 * doubled; a quote inside an unquoted field, text after a closing quote,
 * and a quote left open at the end of the input are errors. Rows end at
 * '\n' only ("\r\n" too: '\r' counts as trailing space and is trimmed), so
 * a row ends on the last byte of a segment. Spaces around unquoted fields
 * are trimmed (libcsv's rule).
 *
 * TSV: no quoting: a row is a line, its fields are split at tabs, and '"'
 * is an ordinary character. That is the text/tab-separated-values
 * convention (fields hold no tab or line break) and what UniProt, BioMart
 * and `cut` write; their descriptions hold quotes that a quoting parser
 * would misread. A trailing '\r' is dropped. */
#define _POSIX_C_SOURCE 200809L
#include "table_stream.h"

#include <csv.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <zlib.h>

#include "fasta_magic.h"
#include "gz_input.h"
#include "input_file.h"

typedef struct sbuf {
  char *p;
  size_t len, cap;
} sbuf;

struct esmt_table {
  gzFile gz;
  char *path;                /* for messages: the file, or "standard input" */
  const char *name;          /* as given: "-" for standard input */
  int stream;
  int filled;                /* the first bytes were read (and sniffed) */
  esmt_table_kind kind;
  struct csv_parser csv;
  int csv_ready;
  unsigned char buf[1 << 16];
  int pos, len, eof, finished;
  uint64_t line;             /* of the byte at pos */
  /* the header */
  char *seq_name, *id_name;
  int id_given;              /* id_column named by the caller: it must exist */
  char **names;
  int ncols, names_cap;
  size_t names_bytes;
  int header_done;
  uint64_t header_line;
  int seq_col, id_col;       /* -1: none */
  /* the row being read */
  int field;                 /* index of the field being read */
  int at_row_start;          /* nothing of the next row seen yet */
  uint64_t row_line;         /* the line where it starts */
  uint64_t rows;             /* data rows completed */
  sbuf seq, id;
  sbuf cur;                  /* TSV: the field being read (kept for wanted columns only) */
  size_t cur_len;            /* TSV: its length */
  char row_id[32];           /* "row<N>" */
  int ready;                 /* a data row is complete */
  int failed;                /* the message is set */
  esmt_status status;        /* its status */
  /* every field of each row kept (esmt_table_open_rows) */
  int all_fields;
  sbuf *row;                 /* row[k]: field k of the row being read */
  const char **row_ptrs;     /* row[k].p, for the caller */
  int row_cap;
  esmt_progress_fn progress; /* asked after each read; non-zero cancels */
  void *progress_user;
  double t0;
};

static int sbuf_put(sbuf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return 0;
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 1;
}

static void fail(esmt_table *t, esmt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(esmt_table *t, esmt_status st, const char *fmt, ...) {
  if (t->failed) return; /* the first problem is the one reported */
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  esmt_fail(st, "%s: %s", t->path, msg);
  t->failed = 1;
  t->status = st;
}

static void oom(esmt_table *t) {
  fail(t, ESMT_ERR_OUT_OF_MEMORY, "line %llu: out of memory", (unsigned long long)t->line);
}

/* "id, sequence, description" (shortened when long). */
static void list_columns(const esmt_table *t, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  for (int i = 0; i < t->ncols && n + 8 < cap; i++) {
    int w = snprintf(out + n, cap - n, "%s'%s'", i ? ", " : "", t->names[i]);
    if (w < 0 || (size_t)w >= cap - n) {
      snprintf(out + (n < cap - 5 ? n : cap - 5), 5, "...");
      return;
    }
    n += (size_t)w;
  }
}

static const char *kind_name(const esmt_table *t) { return t->kind == ESMT_TABLE_TSV ? "TSV" : "CSV"; }

static void bad_char(esmt_table *t, unsigned char c, const char *what, int col) {
  const char *kind = c == 0 ? "a NUL byte" : c > 127 ? "a non-ASCII byte" : "a control character";
  fail(t, ESMT_ERR_FORMAT, "line %llu: %s (0x%02x) in the %s (column '%s') of data row %llu",
       (unsigned long long)t->row_line, kind, (unsigned)c, what, t->names[col],
       (unsigned long long)t->rows + 1);
}

/* The sequence: whitespace removed (as in FASTA), printable ASCII kept;
 * the residue policies are the ingest's business. */
static void set_seq(esmt_table *t, const char *s, size_t n) {
  t->seq.len = 0;
  if (!sbuf_put(&t->seq, "", 0) || (n && !sbuf_put(&t->seq, s, n))) { oom(t); return; }
  char *dst = t->seq.p;
  for (size_t i = 0; i < n; i++) {
    unsigned char b = (unsigned char)s[i];
    if (b > 32 && b < 127) { *dst++ = (char)b; continue; }
    if (b == ' ' || b == '\t' || b == '\r' || b == '\n') continue;
    bad_char(t, b, "sequence", t->seq_col);
    return;
  }
  t->seq.len = (size_t)(dst - t->seq.p);
  t->seq.p[t->seq.len] = '\0';
}

/* The id: the value up to its first whitespace (leading whitespace
 * skipped), as a FASTA header's first word; printable ASCII. */
static void set_id(esmt_table *t, const char *s, size_t n) {
  size_t i = 0;
  while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
  size_t j = i;
  for (; j < n; j++) {
    unsigned char b = (unsigned char)s[j];
    if (b == ' ' || b == '\t' || b == '\r' || b == '\n') break;
    if (b < 32 || b > 126) { bad_char(t, b, "id", t->id_col); return; }
  }
  t->id.len = 0;
  if (!sbuf_put(&t->id, s + i, j - i)) oom(t);
}

static void field_too_long(esmt_table *t, int quoted) {
  fail(t, ESMT_ERR_FORMAT, "line %llu: a field longer than %zu bytes in the row that starts on "
       "line %llu%s", (unsigned long long)t->line, ESMT_TABLE_FIELD_MAX,
       (unsigned long long)t->row_line,
       quoted ? " (a quote that is never closed?)" : " (not a table of proteins?)");
}

static void on_field(esmt_table *t, const char *s, size_t n) {
  if (t->failed) return;
  int k = t->field++;
  if (n > ESMT_TABLE_FIELD_MAX) { field_too_long(t, 0); return; }
  if (!t->header_done) {
    t->names_bytes += n;
    if (t->ncols >= ESMT_TABLE_MAX_COLUMNS || t->names_bytes > ESMT_TABLE_FIELD_MAX) {
      fail(t, ESMT_ERR_FORMAT, "line %llu: the header has more than %d columns or %zu bytes (not "
           "a %s table?)", (unsigned long long)t->row_line, ESMT_TABLE_MAX_COLUMNS,
           ESMT_TABLE_FIELD_MAX, kind_name(t));
      return;
    }
    if (t->ncols == t->names_cap) {
      int cap = t->names_cap ? 2 * t->names_cap : 16;
      char **nn = realloc(t->names, (size_t)cap * sizeof *nn);
      if (!nn) { oom(t); return; }
      t->names = nn;
      t->names_cap = cap;
    }
    while (n && (*s == ' ' || *s == '\t')) { s++; n--; }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    char *name = malloc(n + 1);
    if (!name) { oom(t); return; }
    memcpy(name, s, n);
    name[n] = '\0';
    t->names[t->ncols++] = name;
    return;
  }
  if (t->all_fields) {
    if (k < t->ncols) {
      t->row[k].len = 0;
      if (!sbuf_put(&t->row[k], s, n)) oom(t);
    }
    return;
  }
  if (k == t->seq_col) set_seq(t, s, n);
  if (k == t->id_col && !t->failed) set_id(t, s, n);
}

/* all_fields: one buffer per column, made when the header is complete. */
static void make_row(esmt_table *t) {
  t->row = calloc((size_t)t->ncols + 1, sizeof *t->row);
  t->row_ptrs = calloc((size_t)t->ncols + 1, sizeof *t->row_ptrs);
  if (!t->row || !t->row_ptrs) oom(t);
  t->row_cap = t->row ? t->ncols : 0;
}

/* The column named `want`: an exact match, else the only one equal
 * ignoring case; -1 when none, -2 (with *other) when named twice. */
static int find_column(const esmt_table *t, const char *want, int *first, int *other) {
  int hit = -1, ci = -1, nci = 0;
  for (int i = 0; i < t->ncols; i++) {
    if (!strcmp(t->names[i], want)) {
      if (hit >= 0) { *first = hit; *other = i; return -2; }
      hit = i;
    } else if (!strcasecmp(t->names[i], want)) {
      ci = i;
      nci++;
    }
  }
  if (hit >= 0) return hit;
  return nci == 1 ? ci : -1;
}

static int resolve_column(esmt_table *t, const char *want, const char *what, const char *option,
                          int required) {
  int first = 0, other = 0;
  int c = find_column(t, want, &first, &other);
  if (c == -2) {
    fail(t, ESMT_ERR_FORMAT, "line %llu: the header names column '%s' twice (columns %d and %d)",
         (unsigned long long)t->header_line, want, first + 1, other + 1);
    return -1;
  }
  if (c == -1 && required) {
    char cols[400];
    list_columns(t, cols, sizeof cols);
    const char *near = esmt_closest(want, (const char *const *)t->names, t->ncols);
    /* one column holding the other format's delimiter: the wrong format */
    const char *other_delim = t->kind == ESMT_TABLE_TSV ? "," : "\t";
    const char *hint = t->ncols == 1 && strstr(t->names[0], other_delim)
                           ? (t->kind == ESMT_TABLE_TSV ? "; a CSV file read as TSV? (--format csv)"
                                                        : "; a TSV file read as CSV? (--format tsv)")
                           : "";
    fail(t, ESMT_ERR_FORMAT, "line %llu: no %s column '%s' in the header; its columns are %s%s%s%s "
         "(%s NAME chooses another)%s", (unsigned long long)t->header_line, what, want, cols,
         near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "", option, hint);
  }
  return c;
}

static void on_row_end(esmt_table *t) {
  if (t->failed) return;
  int fields = t->field;
  t->field = 0;
  t->at_row_start = 1;
  if (!t->header_done) {
    t->header_done = 1;
    t->header_line = t->row_line;
    if (t->all_fields) {
      make_row(t);
      return;
    }
    t->seq_col = resolve_column(t, t->seq_name, "sequence", "--seq-column", 1);
    if (!t->failed)
      t->id_col = resolve_column(t, t->id_name, "id", "--id-column", t->id_given);
    if (t->id_col < 0) t->id_col = -1; /* ids row<N> */
    return;
  }
  if (fields != t->ncols) {
    char cols[400];
    list_columns(t, cols, sizeof cols);
    fail(t, ESMT_ERR_FORMAT, "line %llu: data row %llu has %d field%s, the header (line %llu) has "
         "%d (%s)%s", (unsigned long long)t->row_line, (unsigned long long)t->rows + 1, fields,
         fields == 1 ? "" : "s", (unsigned long long)t->header_line, t->ncols, cols,
         fields < t->ncols ? (t->kind == ESMT_TABLE_TSV ? ": a tab too few?"
                                                         : ": a field or a comma too few?")
                           : (t->kind == ESMT_TABLE_TSV ? ": a tab inside a field?"
                                                         : ": an unquoted comma inside a field?"));
    return;
  }
  t->rows++;
  snprintf(t->row_id, sizeof t->row_id, "row%llu", (unsigned long long)t->rows);
  t->ready = 1;
}

static void csv_cb_field(void *s, size_t n, void *data) { on_field(data, s, n); }
static void csv_cb_row(int c, void *data) { (void)c; on_row_end(data); }
/* '\r' is trailing space (trimmed, so "\r\n" ends rows); rows end at '\n' */
static int csv_is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\r'; }
static int csv_is_term(unsigned char c) { return c == '\n'; }

static int tsv_wanted(const esmt_table *t) {
  return t->all_fields || !t->header_done || t->field == t->seq_col || t->field == t->id_col;
}

static void tsv_end_field(esmt_table *t, int last) {
  size_t n = t->cur.len;
  if (last && n && t->cur.p[n - 1] == '\r') n--;
  on_field(t, t->cur.p ? t->cur.p : "", n);
  t->cur.len = 0;
  t->cur_len = 0;
}

static void tsv_feed(esmt_table *t, const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n && !t->failed) {
    size_t j = i;
    while (j < n && p[j] != '\t' && p[j] != '\n') j++;
    if (j > i) {
      if (t->cur_len + (j - i) > ESMT_TABLE_FIELD_MAX) { field_too_long(t, 0); return; }
      t->cur_len += j - i;
      if (tsv_wanted(t) && !sbuf_put(&t->cur, (const char *)p + i, j - i)) { oom(t); return; }
    }
    if (j == n) return;
    if (p[j] == '\t') {
      tsv_end_field(t, 0);
    } else if (t->at_row_start) { /* a blank line */
      t->cur.len = 0;
      t->cur_len = 0;
    } else {
      tsv_end_field(t, 1);
      on_row_end(t);
    }
    i = j + 1;
  }
}

static void csv_feed(esmt_table *t, const unsigned char *p, size_t n) {
  size_t done = csv_parse(&t->csv, p, n, csv_cb_field, csv_cb_row, t);
  if (t->failed) return;
  if (done < n) {
    int e = csv_error(&t->csv);
    if (e == CSV_EPARSE)
      fail(t, ESMT_ERR_FORMAT, "line %llu: malformed quoting: a '\"' inside an unquoted field, or "
           "text after a closing quote (RFC 4180: quote the whole field and double the quotes "
           "inside it)", (unsigned long long)t->line);
    else if (e == CSV_ENOMEM)
      oom(t);
    else
      fail(t, ESMT_ERR_FORMAT, "line %llu: %s", (unsigned long long)t->line, csv_strerror(e));
    return;
  }
  if (t->csv.entry_pos > ESMT_TABLE_FIELD_MAX) field_too_long(t, t->csv.quoted);
}

/* The end of the input: the last row when no line break ends it. */
static void finish(esmt_table *t) {
  t->finished = 1;
  if (t->kind == ESMT_TABLE_CSV) {
    int rc = csv_fini(&t->csv, csv_cb_field, csv_cb_row, t);
    if (!t->failed && (rc != 0 || csv_error(&t->csv) == CSV_EPARSE))
      fail(t, ESMT_ERR_FORMAT, "line %llu: unterminated quote: a quoted field of the row that "
           "starts here is still open at the end of the file", (unsigned long long)t->row_line);
  } else if (!t->at_row_start) {
    tsv_end_field(t, 1);
    on_row_end(t);
  }
  if (!t->failed && !t->header_done)
    fail(t, ESMT_ERR_FORMAT, "line %llu: no header row (an empty %s table); the header names the "
         "columns, e.g. id%ssequence", (unsigned long long)t->line, kind_name(t),
         t->kind == ESMT_TABLE_TSV ? "<TAB>" : ",");
}

/* 1 with bytes in the buffer, 0 at the end, -1 on an error (message set). */
static int refill(esmt_table *t) {
  int n = gzread(t->gz, t->buf, sizeof t->buf);
  int zerr = Z_OK;
  const char *msg = n <= 0 ? gzerror(t->gz, &zerr) : NULL;
  if (n < 0) {
    fail(t, ESMT_ERR_FORMAT, "line %llu: cannot read: %s", (unsigned long long)t->line,
         zerr == Z_ERRNO ? strerror(errno) : msg);
    return -1;
  }
  if (n == 0) {
    if (zerr != Z_OK && zerr != Z_STREAM_END) {
      fail(t, ESMT_ERR_FORMAT, "line %llu: corrupt or truncated compressed data (%s)",
           (unsigned long long)t->line, msg);
      return -1;
    }
    return 0;
  }
  t->pos = 0;
  t->len = n;
  if (!t->filled) {
    t->filled = 1;
    if (esmt_fasta_check_magic(t->name, t->buf, (size_t)n, !gzdirect(t->gz))) {
      t->failed = 1;
      return -1;
    }
    if (n >= 3 && !memcmp(t->buf, "\xef\xbb\xbf", 3)) t->pos = 3; /* a UTF-8 byte order mark */
  }
  return 1;
}

static void emit(esmt_table *t, esmt_fasta_record *rec) {
  rec->id = t->id_col >= 0 && t->id.len ? t->id.p : t->row_id;
  rec->seq = t->seq.p ? t->seq.p : "";
  rec->len = t->seq.len;
  rec->header_line = t->row_line;
}

int esmt_table_next(esmt_table *t, esmt_fasta_record *rec) {
  if (t->failed) return -1;
  t->ready = 0;
  t->seq.len = t->id.len = 0;
  for (int k = 0; k < t->row_cap; k++) t->row[k].len = 0;
  if (t->seq.p) t->seq.p[0] = '\0';
  for (;;) {
    if (t->pos == t->len) {
      if (t->finished) return 0;
      int r = t->eof ? 0 : refill(t);
      if (r < 0) return -1;
      if (r == 0) {
        t->eof = 1;
        finish(t);
        if (t->failed) return -1;
        if (t->ready) { emit(t, rec); return 1; }
        return 0;
      }
      if (t->progress) {
        esmt_progress pr = {sizeof pr, "read", esmt_table_offset(t), 0, "bytes",
                            esmt_now_s() - t->t0, t->rows};
        if (t->progress(t->progress_user, &pr)) {
          fail(t, ESMT_ERR_CANCELLED, "line %llu: reading cancelled", (unsigned long long)t->line);
          return -1;
        }
      }
      if (t->pos == t->len) continue; /* only a byte order mark */
    }
    const unsigned char *p = t->buf + t->pos, *end = t->buf + t->len;
    const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = (size_t)((nl ? nl + 1 : end) - p);
    if (memchr(p, 0, n)) {
      fail(t, ESMT_ERR_FORMAT, "line %llu: a NUL byte (0x00): not a text table (a binary "
           "file?)", (unsigned long long)t->line);
      return -1;
    }
    if (t->at_row_start) /* the next row starts at its first non-blank byte */
      for (size_t i = 0; i < n; i++) {
        unsigned char b = p[i];
        if (b == ' ' || b == '\r' || b == '\n' || (b == '\t' && t->kind == ESMT_TABLE_CSV)) continue;
        t->at_row_start = 0;
        t->row_line = t->line;
        break;
      }
    if (t->kind == ESMT_TABLE_CSV) csv_feed(t, p, n);
    else tsv_feed(t, p, n);
    t->pos += (int)n;
    if (t->failed) return -1;
    if (nl) t->line++;
    if (t->ready) { emit(t, rec); return 1; }
  }
}

esmt_status esmt_table_open(const char *path, esmt_table_kind kind, const char *seq_column,
                            const char *id_column, esmt_table **out) {
  *out = NULL;
  const int is_stdin = !strcmp(path, "-");
  const char *what = kind == ESMT_TABLE_TSV ? "TSV input" : "CSV input";
  esmt_table *t = calloc(1, sizeof *t);
  if (!t || !(t->path = strdup(is_stdin ? "standard input" : path)) ||
      !(t->seq_name = strdup(seq_column ? seq_column : "sequence")) ||
      !(t->id_name = strdup(id_column ? id_column : "id"))) {
    if (t) { free(t->path); free(t->seq_name); }
    free(t);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  t->name = is_stdin ? "-" : t->path;
  t->stream = is_stdin;
  t->kind = kind;
  t->id_given = id_column != NULL;
  t->seq_col = t->id_col = -1;
  t->line = 1;
  t->at_row_start = 1;
  esmt_status st = esmt_gz_input_open(path, what, "pipe the table in (zcat x.csv.gz | "
                                      "esmtrain-example ingest - --format csv -o DIR)", &t->gz);
  if (st) {
    esmt_table_close(t);
    return st;
  }
  if (kind == ESMT_TABLE_CSV) {
    if (csv_init(&t->csv, CSV_STRICT | CSV_STRICT_FINI) != 0) {
      esmt_table_close(t);
      return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory (libcsv)", path);
    }
    t->csv_ready = 1;
    csv_set_space_func(&t->csv, csv_is_space);
    csv_set_term_func(&t->csv, csv_is_term);
    csv_set_blk_size(&t->csv, 1 << 16); /* its field buffer grows by this much */
  }
  *out = t;
  return ESMT_OK;
}

void esmt_table_close(esmt_table *t) {
  if (!t) return;
  if (t->gz) gzclose(t->gz);
  if (t->csv_ready) csv_free(&t->csv);
  for (int i = 0; i < t->ncols; i++) free(t->names[i]);
  free(t->names);
  for (int k = 0; k < t->row_cap; k++) free(t->row[k].p);
  free(t->row);
  free(t->row_ptrs);
  free(t->seq.p);
  free(t->id.p);
  free(t->cur.p);
  free(t->seq_name);
  free(t->id_name);
  free(t->path);
  free(t);
}

uint64_t esmt_table_offset(const esmt_table *t) { return esmt_gz_input_offset(t->gz, t->stream); }

int esmt_table_is_stream(const esmt_table *t) { return t->stream; }

esmt_status esmt_table_open_rows(const char *path, esmt_table_kind kind, esmt_table **out) {
  esmt_status st = esmt_table_open(path, kind, NULL, NULL, out);
  if (!st) (*out)->all_fields = 1;
  return st;
}

int esmt_table_next_row(esmt_table *t, const char *const **fields, int *count, uint64_t *line) {
  esmt_fasta_record rec;
  int r = esmt_table_next(t, &rec);
  if (r != 1) return r;
  for (int k = 0; k < t->ncols; k++) t->row_ptrs[k] = t->row[k].p ? t->row[k].p : "";
  *fields = t->row_ptrs;
  *count = t->ncols;
  if (line) *line = rec.header_line;
  return 1;
}

void esmt_table_set_progress(esmt_table *t, esmt_progress_fn fn, void *user) {
  t->progress = fn;
  t->progress_user = user;
  t->t0 = esmt_now_s();
}

esmt_status esmt_table_status(const esmt_table *t) {
  return t->failed ? (t->status ? t->status : ESMT_ERR_FORMAT) : ESMT_OK;
}

int esmt_table_columns(const esmt_table *t, const char *const **names) {
  *names = (const char *const *)t->names;
  return t->header_done ? t->ncols : 0;
}

int esmt_table_column(const esmt_table *t, const char *name) {
  int first = 0, other = 0;
  return find_column(t, name, &first, &other);
}
