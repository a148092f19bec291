/* SPDX-License-Identifier: MIT */
/* An input file, or standard input ("-"), opened for zlib's gzread, which
 * reads plain and gzip (concatenated members too) alike: what the FASTA and
 * table readers share. A path must be a regular file (esmt_open_input:
 * never blocks on a FIFO); standard input is read from a copy of its
 * descriptor, so that closing the stream leaves the process's stdin open,
 * and refused when it is a terminal. */
#ifndef ESMTRAIN_GZ_INPUT_H
#define ESMTRAIN_GZ_INPUT_H

#include <zlib.h>

#include "internal.h"

/* `what` names the input in messages ("FASTA input"); `tty_hint` is the
 * pipe to suggest when standard input is a terminal. */
ESMT_HIDDEN esmt_status esmt_gz_input_open(const char *path, const char *what,
                                           const char *tty_hint, gzFile *out);

/* Bytes consumed so far: of the file (compressed bytes for gzip), or, for
 * standard input (a pipe: no offset), the bytes given after any gzip layer. */
ESMT_HIDDEN uint64_t esmt_gz_input_offset(gzFile gz, int is_stdin);

#endif
