/* SPDX-License-Identifier: MIT */
/* An embedding output directory (esmt_embed_dir, infer.h), in parts:
 *   embed_dir.c       the public calls: inspect, begin, append, commit, finish
 *   embed_record.c    embed.json: the request, what is committed, the files' ids
 *   embed_arrays.c    the arrays, ids.txt, their commits, cut on resume, clear
 *   embed_identity.c  checksums of the model's weights and of the input */
#ifndef ESMT_IO_EMBED_DIR_H
#define ESMT_IO_EMBED_DIR_H

#include <jansson.h>
#include <stdint.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

#define EMBED_MAX_LAYERS 64
/* The most arrays a directory holds: lengths, two offsets, 4 per layer. */
#define EMBED_MAX_ARRAYS (4 * EMBED_MAX_LAYERS + 3)

typedef struct embed_stats {
  uint64_t proteins, residues, truncated, windowed, unknown, empty, per_tok_rows;
  uint64_t attn_values;  /* elements of each attn.layer<L>.npy */
  uint64_t ids_bytes, ids_hash;
} embed_stats;

/* One array: created or re-opened under esmt_owned_file_*, written by an
 * esmt_npy_stream. */
typedef struct embed_npy {
  int fd;
  char path[4096];
  esmt_npy_stream *s;
  char id[ESMT_OWNED_FILE_ID_CAP];
} embed_npy;

struct esmt_embed_dir {
  char out[4096];
  esmt_model *model;
  char *model_path, *model_kind, *backend, *input, *split;
  int nl, layers[EMBED_MAX_LAYERS];
  unsigned include;
  int windows, window, stride, safetensors;
  int hidden, model_layers, max_positions, heads;
  char weights[64], input_content[64]; /* embed_model_checksum, embed_input_checksum */
  esmt_embed_dir_state state;
  int staging_removed, begun;
  embed_stats s;
  uint64_t skipped, skip_hash;         /* esmt_embed_dir_skip */
  json_t *recorded;                    /* the record's files (RESUME, RESTART) */
  json_t *files;                       /* the files of this writer, once begun */
  double t0;
  embed_npy lengths, offsets, mean[EMBED_MAX_LAYERS], cls[EMBED_MAX_LAYERS],
      tok[EMBED_MAX_LAYERS], attn_offsets, attn[EMBED_MAX_LAYERS];
  int ids_fd;
  char ids_id[ESMT_OWNED_FILE_ID_CAP];
};

/* embed_record.c: embed.json written atomically (a temporary, fsync,
 * rename); `files` may be NULL (none yet). */
ESMT_HIDDEN esmt_status embed_record_write(esmt_embed_dir *d, json_t *files, int complete,
                                           double seconds);
/* The directory inspected: d->state, d->s and d->recorded set. */
ESMT_HIDDEN esmt_status embed_record_check(esmt_embed_dir *d);

/* embed_arrays.c */
ESMT_HIDDEN void embed_arrays_init(esmt_embed_dir *d);
/* Create the files, or with `resume` re-open those the record names and
 * cut them back to the committed counts. */
ESMT_HIDDEN esmt_status embed_arrays_open(esmt_embed_dir *d, int resume);
/* {"name": "DEV:INO:BIRTH"} of the open files (new reference). */
ESMT_HIDDEN json_t *embed_arrays_files(esmt_embed_dir *d);
ESMT_HIDDEN esmt_status embed_arrays_append(esmt_embed_dir *d, int count,
                                            const char *const *ids, const esmt_embedding *e);
ESMT_HIDDEN esmt_status embed_arrays_commit(esmt_embed_dir *d);
/* Remove the files of an attempt that committed nothing (each must be a
 * regular file of a name this writer uses, with one link and the recorded
 * id; anything else is refused, nothing removed). check_only: the check. */
ESMT_HIDDEN esmt_status embed_arrays_clear(esmt_embed_dir *d, json_t *files, int check_only);
/* A finished safetensors output: the staging arrays the record names
 * that are still as created, removed; how many. */
ESMT_HIDDEN int embed_arrays_remove_staging_left(esmt_embed_dir *d, json_t *files);
/* safetensors: the arrays into embeddings.safetensors; then, once the
 * record says complete, the staging arrays removed. */
ESMT_HIDDEN esmt_status embed_arrays_to_safetensors(esmt_embed_dir *d);
ESMT_HIDDEN void embed_arrays_remove_staging(esmt_embed_dir *d);
ESMT_HIDDEN void embed_arrays_close(esmt_embed_dir *d);

/* embed_identity.c: "crc32:XXXXXXXX/N" of the model's weights (N values)
 * and of the input's bytes (a dataset: its manifest.json; "-": "stdin");
 * FNV-1a of ids in order, continued from h. */
ESMT_HIDDEN esmt_status embed_model_checksum(esmt_model *m, char *out, size_t cap);
ESMT_HIDDEN esmt_status embed_input_checksum(const char *input, char *out, size_t cap);
ESMT_HIDDEN uint64_t embed_id_hash(uint64_t h, const char *id);

#endif
