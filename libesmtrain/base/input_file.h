/* SPDX-License-Identifier: MIT */
/* Opening an input file without ever blocking on it. A FIFO, a character
 * device or a socket given where esmtrain expects a data file (a shard,
 * manifest.json, model.safetensors, state.json, config.json, a FASTA file)
 * would block open(2) forever or yield a stream that cannot be mapped;
 * these helpers open with O_NONBLOCK, check with fstat that the file is a
 * regular file, and refuse anything else with a message naming what it is. */
#ifndef ESMTRAIN_INPUT_FILE_H
#define ESMTRAIN_INPUT_FILE_H

#include "internal.h"

#include <stdio.h>
#include <sys/stat.h>

/* "a directory", "a FIFO (named pipe)", "a character device", ... for the
 * st_mode of something that is not a regular file; "a regular file" else. */
ESMT_HIDDEN const char *esmt_file_kind(mode_t mode);

/* open(2) `path` read-only for a regular file. `what` names the role in
 * the message ("dataset shard", "checkpoint weights", ...). On success
 * *fd is a blocking descriptor and *sb (may be NULL) its fstat.
 * ESMT_ERR_IO when it cannot be opened (strerror named), ESMT_ERR_FORMAT
 * when it is not a regular file. */
ESMT_HIDDEN esmt_status esmt_open_input(const char *path, const char *what, int *fd,
                                        struct stat *sb);

/* The same as a stdio stream ("rb"). */
ESMT_HIDDEN esmt_status esmt_fopen_input(const char *path, const char *what, FILE **f);

/* Only the check: `path` (following symlinks) is a regular file; fails like
 * esmt_open_input without opening it. */
ESMT_HIDDEN esmt_status esmt_check_regular_input(const char *path, const char *what);

#endif
