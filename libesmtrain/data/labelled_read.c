/* SPDX-License-Identifier: MIT */
/* esmt_labelled_read (finetune.h): a table of proteins and their labels
 * read whole, every row given a split, then the labels turned into what
 * the head trains on. Classes are known only once the training rows are
 * (a class of validation or test that training never saw is an error),
 * so the label fields are kept as text until the table is read. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster_ingest.h"
#include "cluster_map.h"
#include "fasta_stream.h"
#include "labelled.h"

/* The rows while the table is read. */
typedef struct reading {
  const esmt_labelled_options *o;
  esmt_table_reader *table;
  int seq_col, id_col, split_col, n_lab;
  int lab_col[64];
  const char *lab_name[64];
  esmt_cluster_ingest *clusters;
  uint64_t *line;           /* [rows] */
  uint64_t *text_at;        /* [rows]: the row's label fields in `text`, NUL after each */
  char *text;
  size_t text_len, text_cap;
  size_t row_cap, res_cap;  /* row_cap: of line, text_at, d->offset, d->split */
  esmt_labelled *d;
} reading;

static esmt_status grow(void *pp, size_t *cap, size_t need, size_t elem) {
  void **p = pp;
  if (need <= *cap) return ESMT_OK;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * elem);
  if (!q) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory for the labelled table");
  *p = q;
  *cap = c;
  return ESMT_OK;
}

/* Room for `rows` entries in every per-row array (they share row_cap). */
static esmt_status grow_rows(reading *r, size_t rows) {
  if (rows <= r->row_cap) return ESMT_OK;
  size_t c = r->row_cap ? r->row_cap * 2 : 256;
  while (c < rows) c *= 2;
  void **arrays[] = {(void **)&r->line, (void **)&r->text_at, (void **)&r->d->offset};
  for (size_t k = 0; k < sizeof arrays / sizeof *arrays; k++) {
    void *q = realloc(*arrays[k], c * sizeof(uint64_t));
    if (!q) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", r->o->path);
    *arrays[k] = q;
  }
  uint8_t *split = realloc(r->d->split, c);
  if (!split) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", r->o->path);
  r->d->split = split;
  r->row_cap = c;
  return ESMT_OK;
}

static esmt_status row_fail(const reading *r, uint64_t line, int col, const char *fmt,
                            const char *what) {
  const char *const *names = NULL;
  esmt_table_reader_columns(r->table, &names);
  return esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu: column '%s': %s%s", r->o->path,
                   (unsigned long long)line, names ? names[col] : "?", fmt, what ? what : "");
}

static esmt_status find_column(reading *r, const char *name, int required, int *col) {
  *col = esmt_table_reader_column(r->table, name);
  if (*col >= 0 || (*col == -1 && !required)) return ESMT_OK;
  const char *const *names = NULL;
  const int n = esmt_table_reader_columns(r->table, &names);
  if (*col == -2)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: the header names column '%s' twice", r->o->path,
                     name);
  const char *near = esmt_suggest(name, names, n);
  return esmt_fail(ESMT_ERR_FORMAT, "%s: the header has no column '%s'%s%s%s", r->o->path, name,
                   near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
}

static esmt_status resolve_columns(reading *r) {
  const esmt_labelled_options *o = r->o;
  esmt_status st = find_column(r, o->seq_column ? o->seq_column : "sequence", 1, &r->seq_col);
  if (!st) st = find_column(r, o->id_column ? o->id_column : "id", o->id_column != NULL,
                            &r->id_col);
  if (!st && o->split_column) st = find_column(r, o->split_column, 1, &r->split_col);
  r->n_lab = o->n_label_columns > 0 ? o->n_label_columns : 1;
  for (int k = 0; !st && k < r->n_lab; k++) {
    r->lab_name[k] = o->n_label_columns > 0 ? o->label_columns[k] : "label";
    st = find_column(r, r->lab_name[k], 1, &r->lab_col[k]);
  }
  if (!st && o->clusters && r->id_col < 0)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: a split by clusters needs the proteins' ids: the "
                     "header has no column '%s'", o->path, o->id_column ? o->id_column : "id");
  return st;
}

/* A fraction draw in [0, 1) for the row: by cluster (ingest's rule) or by
 * the residues and the seed. */
static esmt_status draw(reading *r, const char *seq, const char *id, double *u) {
  uint64_t h;
  if (r->clusters) {
    uint32_t cluster;
    esmt_status st = esmt_cluster_ingest_assign(r->clusters, id, esmt_id_hash(id), &h, &cluster);
    if (st) return st;
  } else {
    const uint64_t keyed[2] = {esmt_id_hash(seq), r->o->seed};
    h = esmt_id_hash_n((const char *)keyed, sizeof keyed);
  }
  *u = (double)(h % ESMT_SPLIT_MODULUS) / (double)ESMT_SPLIT_MODULUS;
  return ESMT_OK;
}

static esmt_status row_split(reading *r, const char *const *f, uint64_t line, uint64_t row,
                             uint8_t *split) {
  const esmt_labelled_options *o = r->o;
  if (r->split_col >= 0) {
    const char *v = f[r->split_col];
    if (!strcasecmp(v, "train")) *split = ESMT_LABELLED_TRAIN;
    else if (!strcasecmp(v, "valid") || !strcasecmp(v, "validation") || !strcasecmp(v, "val"))
      *split = ESMT_LABELLED_VALID;
    else if (!strcasecmp(v, "test")) *split = ESMT_LABELLED_TEST;
    else return row_fail(r, line, r->split_col, "not a split (train, valid or test): ", v);
    return ESMT_OK;
  }
  char rowid[32];
  snprintf(rowid, sizeof rowid, "row%llu", (unsigned long long)row + 1);
  double u;
  esmt_status st = draw(r, f[r->seq_col], r->id_col >= 0 ? f[r->id_col] : rowid, &u);
  if (st) return esmt_fail_prefix(st, "%s: line %llu: ", o->path, (unsigned long long)line);
  *split = u < o->valid_fraction ? ESMT_LABELLED_VALID
           : u < o->valid_fraction + o->test_fraction ? ESMT_LABELLED_TEST
                                                      : ESMT_LABELLED_TRAIN;
  return ESMT_OK;
}

/* The items of a list field: every byte (sep NULL) or sep-joined names. */
static int next_item(const char **p, const char *sep, const char **item, size_t *len) {
  if (!**p) return 0;
  *item = *p;
  if (!sep) {
    *len = 1;
    *p += 1;
    return 1;
  }
  const char *e = strstr(*p, sep);
  *len = e ? (size_t)(e - *p) : strlen(*p);
  *p = e ? e + strlen(sep) : *p + *len;
  return 1;
}

static int unlabelled(const char *item, size_t len) {
  return len == 1 && (item[0] == '-' || item[0] == '.');
}

/* Checks that need no class list: presence, numbers, 0/1, lengths. */
static esmt_status check_labels(reading *r, const char *const *f, uint64_t line,
                                uint64_t residues) {
  const int task = r->o->task;
  const char *sep = r->o->label_separator && *r->o->label_separator ? r->o->label_separator
                                                                    : NULL;
  for (int k = 0; k < r->n_lab; k++) {
    const char *v = f[r->lab_col[k]];
    const int list = task == ESMT_HEAD_MULTILABEL && r->n_lab == 1;
    if (!*v && !list) return row_fail(r, line, r->lab_col[k], "the label is missing", NULL);
    if (task == ESMT_HEAD_REGRESSION) {
      char *end;
      errno = 0;
      const double x = strtod(v, &end);
      if (*end || errno || !isfinite(x))
        return row_fail(r, line, r->lab_col[k], "not a finite number: ", v);
    } else if (task == ESMT_HEAD_MULTILABEL && !list) {
      if (strcmp(v, "0") && strcmp(v, "1"))
        return row_fail(r, line, r->lab_col[k], "not 0 or 1: ", v);
    } else if (task == ESMT_HEAD_RESIDUE_CLASS) {
      uint64_t items = 0;
      const char *item;
      size_t len;
      for (const char *p = v; next_item(&p, sep, &item, &len);) items++;
      if (items != residues) {
        char what[96];
        snprintf(what, sizeof what, "%llu labels for %llu residues", (unsigned long long)items,
                 (unsigned long long)residues);
        return row_fail(r, line, r->lab_col[k], what, NULL);
      }
    }
  }
  return ESMT_OK;
}

static esmt_status add_row(reading *r, const char *const *f, uint64_t row) {
  esmt_labelled *d = r->d;
  const uint64_t line = esmt_table_reader_line(r->table);
  const char *seq = f[r->seq_col];
  const size_t n = strlen(seq);
  if (!n) return row_fail(r, line, r->seq_col, "the sequence is empty", NULL);
  esmt_status st = grow_rows(r, row + 2);
  if (st) return st;
  const size_t keep = n < (size_t)r->o->max_len - 2 ? n : (size_t)r->o->max_len - 2;
  const uint64_t at = row ? d->offset[row] : 0;
  if (!row) d->offset[0] = 0;
  if ((st = grow(&d->residues, &r->res_cap, at + n, sizeof *d->residues))) return st;
  uint64_t unknown = 0;
  const size_t bad = esmt_tokenize_letters(seq, n, d->residues + at, &unknown);
  if (bad < n) {
    char what[96];
    snprintf(what, sizeof what, "character %zu (byte 0x%02x) is not an amino-acid letter",
             bad + 1, (unsigned char)seq[bad]);
    return row_fail(r, line, r->seq_col, what, NULL);
  }
  d->offset[row + 1] = at + keep;
  r->line[row] = line;
  if ((st = row_split(r, f, line, row, &d->split[row]))) return st;
  if ((st = check_labels(r, f, line, n))) return st;
  size_t need = r->text_len;
  for (int k = 0; k < r->n_lab; k++) need += strlen(f[r->lab_col[k]]) + 1;
  if ((st = grow(&r->text, &r->text_cap, need, 1))) return st;
  r->text_at[row] = r->text_len;
  for (int k = 0; k < r->n_lab; k++) {
    const size_t len = strlen(f[r->lab_col[k]]) + 1;
    memcpy(r->text + r->text_len, f[r->lab_col[k]], len);
    r->text_len += len;
  }
  return ESMT_OK;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every class (or multilabel name) the training rows hold, sorted. */
static esmt_status collect_classes(reading *r) {
  esmt_labelled *d = r->d;
  const char *sep = r->o->label_separator && *r->o->label_separator ? r->o->label_separator
                                                                    : NULL;
  const int by_item = d->task != ESMT_HEAD_SEQ_CLASS;
  size_t cap = 0, n = 0;
  char **names = NULL;
  for (uint64_t i = 0; i < d->rows; i++) {
    if (d->split[i] != ESMT_LABELLED_TRAIN) continue;
    const char *p = r->text + r->text_at[i], *item = p;
    size_t len = strlen(p);
    for (int more = by_item ? next_item(&p, sep, &item, &len) : 1; more;
         more = by_item ? next_item(&p, sep, &item, &len) : 0) {
      if (by_item && d->task == ESMT_HEAD_RESIDUE_CLASS && unlabelled(item, len)) continue;
      if (grow(&names, &cap, n + 1, sizeof *names) || !(names[n] = strndup(item, len))) {
        for (size_t k = 0; k < n; k++) free(names[k]);
        free(names);
        return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", r->o->path);
      }
      n++;
      if (n > 4096) { /* dedupe as we go so that per-residue labels stay small */
        qsort(names, n, sizeof *names, by_name);
        size_t u = 0;
        for (size_t k = 0; k < n; k++)
          if (!u || strcmp(names[k], names[u - 1])) names[u++] = names[k];
          else free(names[k]);
        n = u;
      }
    }
  }
  qsort(names, n, sizeof *names, by_name);
  size_t u = 0;
  for (size_t k = 0; k < n; k++)
    if (!u || strcmp(names[k], names[u - 1])) names[u++] = names[k];
    else free(names[k]);
  d->names = names;
  d->num_labels = (int)u;
  if (u < (d->task == ESMT_HEAD_MULTILABEL ? 1u : 2u)) {
    return esmt_fail(ESMT_ERR_FORMAT, "%s: column '%s': the training rows hold %zu class%s; a "
                     "classifier needs %s", r->o->path, r->lab_name[0], u, u == 1 ? "" : "es",
                     d->task == ESMT_HEAD_MULTILABEL ? "one label" : "two");
  }
  return ESMT_OK;
}

static esmt_status class_id(reading *r, uint64_t row, const char *item, size_t len,
                            int32_t *id) {
  char key[256];
  if (len >= sizeof key) len = sizeof key - 1;
  memcpy(key, item, len);
  key[len] = 0;
  const char *k = key;
  char **hit = bsearch(&k, r->d->names, (size_t)r->d->num_labels, sizeof(char *), by_name);
  if (hit) {
    *id = (int32_t)(hit - r->d->names);
    return ESMT_OK;
  }
  static const char *split_names[3] = {"training", "validation", "test"};
  char what[320];
  snprintf(what, sizeof what, "class '%s' (a %s row) is in no training row", key,
           split_names[r->d->split[row]]);
  return row_fail(r, r->line[row], r->lab_col[0], what, NULL);
}

/* The label text into classes or targets. */
static esmt_status convert_labels(reading *r) {
  esmt_labelled *d = r->d;
  const int K = d->num_labels;
  const char *sep = r->o->label_separator && *r->o->label_separator ? r->o->label_separator
                                                                    : NULL;
  if (d->task == ESMT_HEAD_SEQ_CLASS) d->classes = malloc(d->rows * sizeof *d->classes);
  else if (d->task == ESMT_HEAD_RESIDUE_CLASS)
    d->classes = malloc((d->offset[d->rows] + 1) * sizeof *d->classes);
  else d->targets = calloc(d->rows * (size_t)K, sizeof *d->targets);
  if (!d->classes && !d->targets)
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", r->o->path);
  esmt_status st = ESMT_OK;
  for (uint64_t i = 0; !st && i < d->rows; i++) {
    const char *p = r->text + r->text_at[i], *item;
    size_t len;
    if (d->task == ESMT_HEAD_SEQ_CLASS) {
      st = class_id(r, i, p, strlen(p), &d->classes[i]);
    } else if (d->task == ESMT_HEAD_RESIDUE_CLASS) {
      int32_t *out = d->classes + d->offset[i];
      const uint64_t keep = d->offset[i + 1] - d->offset[i];
      for (uint64_t k = 0; !st && k < keep && next_item(&p, sep, &item, &len); k++)
        if (unlabelled(item, len)) out[k] = ESMT_LABEL_IGNORE;
        else st = class_id(r, i, item, len, &out[k]);
    } else if (d->task == ESMT_HEAD_MULTILABEL && r->n_lab == 1) {
      while (!st && next_item(&p, sep, &item, &len)) {
        int32_t c;
        if (!(st = class_id(r, i, item, len, &c))) d->targets[i * K + c] = 1.0f;
      }
    } else { /* one column a label or a target */
      for (int k = 0; k < K; k++, p += strlen(p) + 1) d->targets[i * K + k] = strtof(p, NULL);
    }
  }
  return st;
}

static esmt_status check_options(const esmt_labelled_options *o) {
  const char *fn = "esmt_labelled_read";
  ESMT_CHECK_ARG(o && o->path, fn, "options and their path must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_labelled_options", o->struct_size, sizeof *o);
  if (st) return st;
  if (o->task < ESMT_HEAD_SEQ_CLASS || o->task > ESMT_HEAD_RESIDUE_CLASS)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: task %d is not a task head", fn, o->task);
  if (o->n_label_columns < 0 || o->n_label_columns > 64 || (o->n_label_columns && !o->label_columns))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %d label columns (1 to 64, named)", fn,
                     o->n_label_columns);
  if (o->n_label_columns > 1 && o->task != ESMT_HEAD_MULTILABEL &&
      o->task != ESMT_HEAD_REGRESSION)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: several label columns are for multilabel "
                     "0/1 columns or regression targets, not this task", fn);
  if (!(o->valid_fraction >= 0 && o->test_fraction >= 0 &&
        o->valid_fraction + o->test_fraction < 1))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: valid_fraction %g and test_fraction %g "
                     "must be >= 0 and leave rows to train on", fn, o->valid_fraction,
                     o->test_fraction);
  if (o->max_len < 3)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: max_len %d leaves no residue", fn,
                     o->max_len);
  return ESMT_OK;
}

static esmt_status read_rows(reading *r) {
  const char *const *f;
  int count, got;
  esmt_status st;
  for (uint64_t row = 0;; row++) {
    if ((st = esmt_table_reader_next(r->table, &f, &count, &got)) || !got) return st;
    if (row == 0 && (st = resolve_columns(r))) return st;
    if ((st = add_row(r, f, row))) return st;
    r->d->rows = row + 1;
  }
}

esmt_status esmt_labelled_read(const esmt_labelled_options *o, esmt_labelled **out) {
  ESMT_CHECK_ARG(out, "esmt_labelled_read", "out must not be NULL");
  *out = NULL;
  esmt_status st = check_options(o);
  if (st) return st;
  reading r = {.o = o, .split_col = -1};
  r.d = calloc(1, sizeof *r.d);
  if (!r.d) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", o->path);
  r.d->task = o->task;
  r.d->max_len = o->max_len;
  st = esmt_table_reader_open(o->path, (esmt_table_format)o->format, &r.table);
  if (!st && o->clusters && !o->split_column)
    st = esmt_cluster_ingest_open(o->clusters, 0, NULL, NULL, &r.clusters);
  if (!st) st = read_rows(&r);
  if (!st && r.d->rows == 0) st = esmt_fail(ESMT_ERR_FORMAT, "%s: no data rows", o->path);
  for (uint64_t i = 0; !st && i < r.d->rows; i++) r.d->count[r.d->split[i]]++;
  if (!st && !r.d->count[ESMT_LABELLED_TRAIN])
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: no row is in the training split", o->path);
  if (!st && (o->task == ESMT_HEAD_SEQ_CLASS || o->task == ESMT_HEAD_RESIDUE_CLASS ||
              (o->task == ESMT_HEAD_MULTILABEL && r.n_lab == 1)))
    st = collect_classes(&r);
  if (!st && !r.d->names) { /* label or target columns name the outputs */
    r.d->num_labels = r.n_lab;
    r.d->names = calloc((size_t)r.n_lab, sizeof *r.d->names);
    for (int k = 0; r.d->names && k < r.n_lab; k++) r.d->names[k] = strdup(r.lab_name[k]);
    for (int k = 0; r.d->names && k < r.n_lab; k++)
      if (!r.d->names[k]) st = ESMT_ERR_OUT_OF_MEMORY;
    if (!r.d->names || st) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", o->path);
  }
  if (!st) st = convert_labels(&r);
  esmt_table_reader_close(r.table);
  esmt_cluster_ingest_free(r.clusters);
  free(r.line);
  free(r.text_at);
  free(r.text);
  if (st) {
    esmt_labelled_free(r.d);
    return st;
  }
  *out = r.d;
  return ESMT_OK;
}
