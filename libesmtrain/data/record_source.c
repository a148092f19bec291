/* SPDX-License-Identifier: MIT */
/* See record_source.h. */
#include "record_source.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "table_stream.h"

struct esmt_record_source {
  esmt_fasta *fasta;  /* one of the two */
  esmt_table *table;
};

/* 1 when `path` ends with `ext` (any case), optionally followed by ".gz". */
static int has_ext(const char *path, const char *ext) {
  size_t n = strlen(path), e = strlen(ext);
  if (n > 3 && !strcasecmp(path + n - 3, ".gz")) n -= 3;
  return n > e && !strncasecmp(path + n - e, ext, e);
}

esmt_input_format esmt_input_format_for(const char *path, int requested) {
  if (requested != ESMT_INPUT_AUTO) return (esmt_input_format)requested;
  if (has_ext(path, ".csv")) return ESMT_INPUT_CSV;
  if (has_ext(path, ".tsv") || has_ext(path, ".tab")) return ESMT_INPUT_TSV;
  return ESMT_INPUT_FASTA;
}

/* o->field when the caller's struct holds it, else `dflt` */
#define OPT(o, field, dflt)                                                                   \
  ((o) && (o)->struct_size >= offsetof(esmt_ingest_options, field) + sizeof((o)->field)       \
       ? (o)->field : (dflt))

esmt_status esmt_record_source_open(const char *path, const esmt_ingest_options *o,
                                    esmt_record_source **out) {
  *out = NULL;
  int requested = OPT(o, input_format, ESMT_INPUT_AUTO);
  const char *seq_column = OPT(o, seq_column, NULL), *id_column = OPT(o, id_column, NULL);
  if (requested < ESMT_INPUT_AUTO || requested > ESMT_INPUT_TSV)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_ingest: input_format %d is not one of "
                     "ESMT_INPUT_AUTO, _FASTA, _CSV, _TSV", requested);
  if ((seq_column && !*seq_column) || (id_column && !*id_column))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_ingest: %s is empty (NULL means the "
                     "default, '%s')", seq_column && !*seq_column ? "seq_column" : "id_column",
                     seq_column && !*seq_column ? "sequence" : "id");
  esmt_record_source *s = calloc(1, sizeof *s);
  if (!s) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  esmt_input_format f = esmt_input_format_for(path, requested);
  esmt_status st = f == ESMT_INPUT_FASTA
                       ? esmt_fasta_open(path, &s->fasta)
                       : esmt_table_open(path, f == ESMT_INPUT_TSV ? ESMT_TABLE_TSV : ESMT_TABLE_CSV,
                                         seq_column, id_column, &s->table);
  if (st) {
    free(s);
    return st;
  }
  *out = s;
  return ESMT_OK;
}

int esmt_record_source_next(esmt_record_source *s, esmt_fasta_record *rec) {
  return s->fasta ? esmt_fasta_next(s->fasta, rec) : esmt_table_next(s->table, rec);
}

uint64_t esmt_record_source_offset(const esmt_record_source *s) {
  return s->fasta ? esmt_fasta_offset(s->fasta) : esmt_table_offset(s->table);
}

int esmt_record_source_is_stream(const esmt_record_source *s) {
  return s->fasta ? esmt_fasta_is_stream(s->fasta) : esmt_table_is_stream(s->table);
}

void esmt_record_source_close(esmt_record_source *s) {
  if (!s) return;
  esmt_fasta_close(s->fasta);
  esmt_table_close(s->table);
  free(s);
}
