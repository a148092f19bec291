/* SPDX-License-Identifier: MIT */
/* esmt_table_reader_* (infer.h): the table reader of ingest
 * (table_stream.c) with every column of each row kept, for tables whose
 * columns are the caller's (variants, labels). */
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"
#include "record_source.h"
#include "table_stream.h"

struct esmt_table_reader {
  esmt_table *table;
  uint64_t line;
};

esmt_status esmt_table_reader_open(const char *path, esmt_table_format format,
                                   esmt_table_reader **out) {
  if (!out) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_table_reader_open: out is NULL");
  *out = NULL;
  if (!path) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_table_reader_open: path is NULL");
  if (format != ESMT_TABLE_BY_NAME && format != ESMT_TABLE_READ_CSV &&
      format != ESMT_TABLE_READ_TSV)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_table_reader_open: format %d is not one "
                     "of ESMT_TABLE_BY_NAME, _READ_CSV, _READ_TSV", (int)format);
  const int tsv = format == ESMT_TABLE_READ_TSV ||
                  (format == ESMT_TABLE_BY_NAME &&
                   esmt_input_format_for(path, ESMT_INPUT_AUTO) == ESMT_INPUT_TSV);
  esmt_table_reader *r = calloc(1, sizeof *r);
  if (!r) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  /* /dev/stdin is standard input, as for the line reader (not a FIFO refused) */
  const char *name = strcmp(path, "/dev/stdin") ? path : "-";
  esmt_status st = esmt_table_open_rows(name, tsv ? ESMT_TABLE_TSV : ESMT_TABLE_CSV, &r->table);
  if (st) {
    free(r);
    return st;
  }
  *out = r;
  return ESMT_OK;
}

esmt_status esmt_table_reader_next(esmt_table_reader *reader, const char *const **fields,
                                   int *count, int *got) {
  if (!reader || !fields || !count || !got)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_table_reader_next: a NULL argument");
  *got = 0;
  *count = 0;
  *fields = NULL;
  const int r = esmt_table_next_row(reader->table, fields, count, &reader->line);
  if (r < 0) return esmt_table_status(reader->table);
  *got = r;
  return ESMT_OK;
}

void esmt_table_reader_set_progress(esmt_table_reader *reader, esmt_progress_fn progress,
                                    void *progress_user) {
  if (reader) esmt_table_set_progress(reader->table, progress, progress_user);
}

int esmt_table_reader_columns(const esmt_table_reader *reader, const char *const **names) {
  return reader && names ? esmt_table_columns(reader->table, names) : 0;
}

int esmt_table_reader_column(const esmt_table_reader *reader, const char *name) {
  return reader && name ? esmt_table_column(reader->table, name) : -1;
}

uint64_t esmt_table_reader_line(const esmt_table_reader *reader) {
  return reader ? reader->line : 0;
}

void esmt_table_reader_close(esmt_table_reader *reader) {
  if (!reader) return;
  esmt_table_close(reader->table);
  free(reader);
}
