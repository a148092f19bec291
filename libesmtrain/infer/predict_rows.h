/* SPDX-License-Identifier: MIT */
/* The proteins esmt_predict_table reads (predict.c), from a CSV/TSV table
 * or FASTA alike: each row's input columns as CSV text to copy into the
 * output, and its residues as token ids. */
#ifndef ESMTRAIN_PREDICT_ROWS_H
#define ESMTRAIN_PREDICT_ROWS_H

#include <stdint.h>
#include <stdio.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

typedef struct predict_rows predict_rows;

/* Open `path`: FASTA when its name ends in .fasta, .fa, .faa, .fas or
 * .fna (then .gz), else a table with a column `seq_column` (NULL:
 * "sequence"), refused naming the file and its columns when it has none. */
ESMT_HIDDEN esmt_status predict_rows_open(const char *path, const char *seq_column,
                                          predict_rows **out);
/* The input's header as CSV text (no line end). */
ESMT_HIDDEN const char *predict_rows_header(const predict_rows *r);
/* What *line counts: "line" (a table) or "record" (FASTA). */
ESMT_HIDDEN const char *predict_rows_unit(const predict_rows *r);
/* 1 when the input has a column `name` (an output column must not clash). */
ESMT_HIDDEN int predict_rows_has_column(const predict_rows *r, const char *name);
/* The next protein: *fields its input columns as CSV text, *ids its n
 * residues (both valid until the next call), *line where it starts; *got 0
 * at the end. */
ESMT_HIDDEN esmt_status predict_rows_next(predict_rows *r, const char **fields,
                                          const int32_t **ids, int64_t *n, uint64_t *line,
                                          int *got);
ESMT_HIDDEN void predict_rows_close(predict_rows *r);

/* Append `s` to *buf (*len used of *cap, grown as needed) as one CSV
 * field, quoted when it holds a comma, a quote or a line break, after the
 * character `sep` unless it is 0. */
ESMT_HIDDEN esmt_status predict_csv_field(char **buf, size_t *len, size_t *cap, const char *s,
                                          char sep);

#endif
