/* SPDX-License-Identifier: MIT */
/* esmt_sequence_reader (esmtrain.h): proteins one at a time from a FASTA
 * file or from one split of an ingested dataset, as token ids, for
 * inference. FASTA records are tokenized here as ingest does with
 * --unknown unk --gaps keep; a dataset's records are already tokens. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "esmtrain/esmtrain.h"
#include "dataset_manifest.h"
#include "fasta_stream.h"
#include "shard_set.h"

struct esmt_sequence_reader {
  char *path;
  esmt_fasta *fasta;         /* FASTA input, or */
  esmt_shard_set set;        /* a dataset split */
  int split;
  uint64_t total_bytes, next_index;
  int32_t *tok;
  size_t tok_cap;
  char id[64];
};

static esmt_status grow(esmt_sequence_reader *r, size_t n) {
  if (n <= r->tok_cap) return ESMT_OK;
  size_t cap = r->tok_cap ? r->tok_cap : 1024;
  while (cap < n) cap *= 2;
  int32_t *t = realloc(r->tok, cap * sizeof *t);
  if (!t) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: a sequence of %zu residues: out of memory",
                           r->path, n);
  r->tok = t;
  r->tok_cap = cap;
  return ESMT_OK;
}

esmt_status esmt_sequence_reader_open(const char *path, const char *split,
                                      esmt_sequence_reader **out) {
  const char *fn = "esmt_sequence_reader_open";
  ESMT_CHECK_ARG(path && out, fn, "path and out must not be NULL");
  *out = NULL;
  int sp = ESMT_SPLIT_TRAIN;
  if (split && strcmp(split, "train") && strcmp(split, "valid"))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: split '%s' (train or valid)", fn, split);
  if (split && !strcmp(split, "valid")) sp = ESMT_SPLIT_VALID;
  esmt_sequence_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    free(r);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  r->split = sp;
  struct stat sb;
  esmt_status st;
  if (strcmp(path, "-") && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    st = esmt_shard_set_open(path, sp, &r->set);
  } else {
    st = esmt_fasta_open(path, &r->fasta);
    if (!st && strcmp(path, "-") && stat(path, &sb) == 0) r->total_bytes = (uint64_t)sb.st_size;
  }
  if (st) {
    esmt_sequence_reader_close(r);
    return st;
  }
  *out = r;
  return ESMT_OK;
}

static esmt_status next_fasta(esmt_sequence_reader *r, esmt_sequence *seq, int *got) {
  esmt_fasta_record rec;
  const int rc = esmt_fasta_next(r->fasta, &rec);
  if (rc < 0) return esmt_last_error()[0] ? ESMT_ERR_FORMAT : ESMT_ERR_IO;
  if (rc == 0) return ESMT_OK;
  esmt_status st = grow(r, rec.len + 1);
  if (st) return st;
  uint64_t unknown = 0;
  const size_t bad = esmt_tokenize_letters(rec.seq, rec.len, r->tok, &unknown);
  if (bad < rec.len)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: record '%s' (line %llu): character '%c' is not "
                     "an amino-acid letter", r->path, rec.id,
                     (unsigned long long)rec.header_line, rec.seq[bad]);
  seq->id = rec.id;
  seq->tokens = r->tok;
  seq->length = rec.len;
  seq->unknown = unknown;
  *got = 1;
  return ESMT_OK;
}

static esmt_status next_record(esmt_sequence_reader *r, esmt_sequence *seq, int *got) {
  if (r->next_index >= r->set.records) return ESMT_OK;
  const uint8_t *res = NULL;
  uint32_t len = 0;
  esmt_status st = esmt_shard_set_record(&r->set, r->next_index, &res, &len);
  if (!st) st = grow(r, (size_t)len + 1);
  if (st) return st;
  uint64_t unknown = 0;
  for (uint32_t i = 0; i < len; i++) {
    r->tok[i] = res[i];
    unknown += res[i] == ESMT_TOKEN_UNK;
  }
  esmt_shard_set_release(&r->set, res, len);
  snprintf(r->id, sizeof r->id, "%s:%llu", esmt_split_name(r->split),
           (unsigned long long)r->next_index);
  seq->id = r->id;
  seq->tokens = r->tok;
  seq->length = len;
  seq->unknown = unknown;
  *got = 1;
  return ESMT_OK;
}

esmt_status esmt_sequence_reader_next(esmt_sequence_reader *r, esmt_sequence *seq, int *got) {
  const char *fn = "esmt_sequence_reader_next";
  ESMT_CHECK_ARG(r && seq && got, fn, "reader, seq and got must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_sequence", seq->struct_size, sizeof *seq);
  if (st) return st;
  *got = 0;
  st = r->fasta ? next_fasta(r, seq, got) : next_record(r, seq, got);
  if (!st && *got) seq->index = r->next_index++;
  return st;
}

esmt_status esmt_sequence_reader_position(const esmt_sequence_reader *r, uint64_t *done,
                                          uint64_t *total) {
  ESMT_CHECK_ARG(r && done && total, "esmt_sequence_reader_position",
                 "reader, done and total must not be NULL");
  if (r->fasta) {
    *done = esmt_fasta_offset(r->fasta);
    *total = r->total_bytes;
  } else {
    *done = r->next_index;
    *total = r->set.records;
  }
  return ESMT_OK;
}

void esmt_sequence_reader_close(esmt_sequence_reader *r) {
  if (!r) return;
  if (r->fasta) esmt_fasta_close(r->fasta);
  else esmt_shard_set_close(&r->set);
  free(r->tok);
  free(r->path);
  free(r);
}
