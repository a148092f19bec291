/* SPDX-License-Identifier: MIT */
/* embed's .npy files: created or re-opened under the library's rules for
 * a program's own files (esmt_owned_file_*), their rows written by the
 * library (esmt_npy_stream, infer.h). */
#ifndef ESMT_CLI_NPY_FILE_H
#define ESMT_CLI_NPY_FILE_H

#include <stddef.h>
#include <stdint.h>

#include <esmtrain/esmtrain.h>

/* A file of OUT created (resume 0) or re-opened as the one `recorded`
 * names (esmt_owned_file_*): its descriptor, or -1 after printing
 * "esmtrain-example: CMD: PATH: why". */
int cli_owned_open(const char *cmd, const char *path, int resume, const char *recorded);

typedef struct cli_npy {
  int fd;
  char path[4096];
  esmt_npy_stream *s;
  char id[ESMT_OWNED_FILE_ID_CAP]; /* esmt_owned_file_id, for the resume record */
} cli_npy;

/* Create `path` (must not exist), or, with `resume_rows` >= 0, re-open the
 * file this writer created (`recorded`: its id, esmt_owned_file_id), which must
 * hold that many rows, without changing it yet (cli_npy_cut). Returns 0,
 * or -1 after printing "esmtrain-example: CMD: PATH: why". */
int cli_npy_open(cli_npy *f, const char *cmd, const char *path, esmt_npy_dtype dtype,
                 int64_t cols, int64_t resume_rows, const char *recorded);
/* A re-opened file cut back to its committed rows, positioned after them. */
int cli_npy_cut(cli_npy *f, const char *cmd);
/* Append `rows` rows (rows * max(cols, 1) elements). */
int cli_npy_append(cli_npy *f, const char *cmd, const void *data, uint64_t rows);
/* Header with the current row count, then fsync. */
int cli_npy_commit(cli_npy *f, const char *cmd);
void cli_npy_close(cli_npy *f);

#endif
