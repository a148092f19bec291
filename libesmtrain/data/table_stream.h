/* SPDX-License-Identifier: MIT */
/* Streaming protein records from a table with a header row: CSV (RFC 4180,
 * parsed by libcsv: quoted fields may hold commas, quotes ("") and line
 * breaks) or TSV (one row per line, fields split at tabs, no quoting),
 * plain or gzip (zlib's gzread), or standard input ("-"). Columns are
 * chosen by header name. The records are the FASTA reader's
 * (esmt_fasta_record): the id, the sequence with whitespace removed, and
 * the 1-based line where the row starts. Refused, naming the file and the
 * line: a missing column (with the header's columns and the closest name),
 * a row whose field count differs from the header's, a field longer than
 * ESMT_TABLE_FIELD_MAX bytes, malformed or unterminated quoting, a NUL
 * byte, control or non-ASCII characters in the id or the sequence. Memory:
 * one row (the header's names, and the fields of one row). */
#ifndef ESMTRAIN_TABLE_STREAM_H
#define ESMTRAIN_TABLE_STREAM_H

#include "fasta_stream.h"
#include "internal.h"

/* No protein comes near this (titin: 35k residues); a longer field is a
 * broken table (an unterminated quote swallowing the file, most often). */
#define ESMT_TABLE_FIELD_MAX ((size_t)1 << 24)
#define ESMT_TABLE_MAX_COLUMNS 65536

typedef struct esmt_table esmt_table;

typedef enum esmt_table_kind { ESMT_TABLE_CSV = 0, ESMT_TABLE_TSV = 1 } esmt_table_kind;

/* seq_column NULL = "sequence"; id_column NULL = "id", and then a table
 * without that column gives ids "row<N>" (N: the 1-based data row); a
 * named id_column must exist. The header is read at the first
 * esmt_table_next. */
ESMT_HIDDEN esmt_status esmt_table_open(const char *path, esmt_table_kind kind,
                                        const char *seq_column, const char *id_column,
                                        esmt_table **out);
ESMT_HIDDEN void esmt_table_close(esmt_table *t);
/* Next record (valid until the next call); 1 = got one, 0 = end of the
 * table, negative = error (message set). */
ESMT_HIDDEN int esmt_table_next(esmt_table *t, esmt_fasta_record *rec);
/* Every field of each row (no sequence or id column chosen, no character
 * checks: the caller's columns are its own), read with esmt_table_next_row. */
ESMT_HIDDEN esmt_status esmt_table_open_rows(const char *path, esmt_table_kind kind,
                                             esmt_table **out);
/* The next data row of a table opened with esmt_table_open_rows: its
 * fields (count: the header's columns; valid until the next call) and the
 * line where it starts. 1, 0 at the end, negative on an error. */
ESMT_HIDDEN int esmt_table_next_row(esmt_table *t, const char *const **fields, int *count,
                                    uint64_t *line);
/* fn (NULL: none) is called after each read of the input (stage "read",
 * unit "bytes", items: rows); non-zero cancels with ESMT_ERR_CANCELLED. */
ESMT_HIDDEN void esmt_table_set_progress(esmt_table *t, esmt_progress_fn fn, void *user);
/* After a negative return: the status of the message set (ESMT_OK before). */
ESMT_HIDDEN esmt_status esmt_table_status(const esmt_table *t);
/* The header's names once the first row was asked for (0 before). */
ESMT_HIDDEN int esmt_table_columns(const esmt_table *t, const char *const **names);
/* The column `name`: an exact match, else the only one equal ignoring case;
 * -1 none, -2 named twice. */
ESMT_HIDDEN int esmt_table_column(const esmt_table *t, const char *name);
/* As esmt_fasta_offset / esmt_fasta_is_stream. */
ESMT_HIDDEN uint64_t esmt_table_offset(const esmt_table *t);
ESMT_HIDDEN int esmt_table_is_stream(const esmt_table *t);

#endif
