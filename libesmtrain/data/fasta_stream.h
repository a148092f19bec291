/* SPDX-License-Identifier: MIT */
/* Streaming FASTA records from plain or gzip files (zlib's gzread reads
 * both, and concatenated gzip members), or from standard input ("-").
 * A path that is not a regular file (FIFO, device, directory) is refused
 * at once; an input in another compressed or archive format (bzip2, zstd,
 * xz, zip, tar, ...) is refused by name on its first bytes. Memory: one
 * record at a time. */
#ifndef ESMTRAIN_FASTA_STREAM_H
#define ESMTRAIN_FASTA_STREAM_H

#include "internal.h"

typedef struct esmt_fasta esmt_fasta;

typedef struct esmt_fasta_record {
  const char *id;             /* header up to the first whitespace */
  const char *seq;            /* raw sequence characters, whitespace removed */
  size_t len;
  uint64_t header_line;       /* 1-based line of the '>' */
} esmt_fasta_record;

ESMT_HIDDEN esmt_status esmt_fasta_open(const char *path, esmt_fasta **out);
ESMT_HIDDEN void esmt_fasta_close(esmt_fasta *f);
/* Next record; 1 = got one, 0 = end of file, negative = error (message set). */
ESMT_HIDDEN int esmt_fasta_next(esmt_fasta *f, esmt_fasta_record *rec);
/* Progress: compressed bytes consumed so far from a file; bytes given so
 * far (after any gzip layer) from standard input, whose size is unknown. */
ESMT_HIDDEN uint64_t esmt_fasta_offset(const esmt_fasta *f);
/* 1 when reading standard input. */
ESMT_HIDDEN int esmt_fasta_is_stream(const esmt_fasta *f);

/* alphabet.c: letters into residue ids, the reader's policy (esmt_tokenize):
 * other letters and '*' become <unk> (added to *unknown). Returns the index
 * of the first character that is no letter, or len when all were. */
ESMT_HIDDEN size_t esmt_tokenize_letters(const char *text, size_t len, int32_t *ids,
                                         uint64_t *unknown);

#endif
