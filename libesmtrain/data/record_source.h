/* SPDX-License-Identifier: MIT */
/* One input of esmt_ingest as a stream of records, whatever its format:
 * FASTA (fasta_stream.h) or a CSV/TSV table (table_stream.h), chosen by
 * esmt_ingest_options.input_format or, for ESMT_INPUT_AUTO, by the name
 * (.csv, .tsv, .tab, each optionally .gz, any case: a table; anything
 * else, standard input included: FASTA). */
#ifndef ESMTRAIN_RECORD_SOURCE_H
#define ESMTRAIN_RECORD_SOURCE_H

#include "esmtrain/esmtrain.h"
#include "fasta_stream.h"
#include "internal.h"

typedef struct esmt_record_source esmt_record_source;

/* The format `path` is read in under `requested` (an esmt_input_format):
 * FASTA, CSV or TSV, never AUTO. */
ESMT_HIDDEN esmt_input_format esmt_input_format_for(const char *path, int requested);

/* Opens `path` with the options' input_format, seq_column and id_column
 * (each read only when o->struct_size covers it; NULL o: FASTA). */
ESMT_HIDDEN esmt_status esmt_record_source_open(const char *path, const esmt_ingest_options *o,
                                                esmt_record_source **out);
/* As esmt_fasta_next: 1 = a record, 0 = the end, negative = error. */
ESMT_HIDDEN int esmt_record_source_next(esmt_record_source *s, esmt_fasta_record *rec);
ESMT_HIDDEN uint64_t esmt_record_source_offset(const esmt_record_source *s);
ESMT_HIDDEN int esmt_record_source_is_stream(const esmt_record_source *s);
ESMT_HIDDEN void esmt_record_source_close(esmt_record_source *s);

#endif
