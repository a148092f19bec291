/* SPDX-License-Identifier: MIT */
/* NumPy .npy files written as a stream of rows: a fixed 128-byte header
 * (format 1.0) rewritten with the row count at each commit, so that a file
 * is a valid array of every committed row at all times and can be
 * truncated back to them (resume). Little-endian data. */
#ifndef ESMT_CLI_NPY_FILE_H
#define ESMT_CLI_NPY_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "out_file.h"

#define CLI_NPY_HEADER 128

typedef struct cli_npy {
  int fd;
  char path[4096];
  const char *descr;  /* "<f4", "<i8" */
  size_t esize;       /* bytes per element */
  int64_t cols;       /* 0: a 1-D array */
  uint64_t rows;      /* rows written (committed or not) */
  char id[CLI_OUT_ID_CAP]; /* the file's "DEV:INO:BIRTH" (out_file.h), for the resume record */
} cli_npy;

/* Create `path` (must not exist), or, with `resume_rows` >= 0, re-open the
 * file this writer created (`recorded`: its id, out_file.h), which must
 * hold that many rows, without changing it yet (cli_npy_cut). Returns 0,
 * or -1 after printing "esmtrain-example: CMD: PATH: why". */
int cli_npy_open(cli_npy *f, const char *cmd, const char *path, const char *descr, size_t esize,
                 int64_t cols, int64_t resume_rows, const char *recorded);
/* A re-opened file cut back to its committed rows, positioned after them. */
int cli_npy_cut(cli_npy *f, const char *cmd);
/* Append `rows` rows (rows * max(cols, 1) elements). */
int cli_npy_append(cli_npy *f, const char *cmd, const void *data, uint64_t rows);
/* Header with the current row count, then fsync. */
int cli_npy_commit(cli_npy *f, const char *cmd);
void cli_npy_close(cli_npy *f);

/* Row bytes and data bytes of a file of `rows` rows. */
uint64_t cli_npy_row_bytes(const cli_npy *f);

#endif
