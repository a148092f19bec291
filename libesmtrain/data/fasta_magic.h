/* SPDX-License-Identifier: MIT */
/* Recognising, from its first bytes, an input that is compressed or
 * archived in a format ingest does not read (it reads plain text and
 * gzip), so that it is refused by name with the command that fixes it
 * instead of as "binary junk before the first header". */
#ifndef ESMTRAIN_FASTA_MAGIC_H
#define ESMTRAIN_FASTA_MAGIC_H

#include <stddef.h>

#include "internal.h"

/* ESMT_ERR_FORMAT with the message when `head` (the first n bytes of what
 * gzread gives: the file itself, or what a gzip layer holds) starts like
 * bzip2, zstd, xz, lz4, zip, 7-zip, gzip (compressed twice) or a tar
 * archive; ESMT_OK otherwise. `path` is "-" for standard input. */
ESMT_HIDDEN esmt_status esmt_fasta_check_magic(const char *path, const unsigned char *head,
                                               size_t n, int inside_gzip);

#endif
