/* SPDX-License-Identifier: MIT */
/* `esmtrain-example embed`: shared declarations of its parts.
 *   cmd_embed.c      arguments, the output directory, the main loop, progress
 *   (esmt_embed, infer.h: a chunk of proteins -> per-protein results, windows)
 *   embed_output.c   the arrays (npy_file.h), ids.txt, commits, resume
 *   embed_safetensors.c  --format safetensors at the end
 *   embed_meta.c     embed.json: what was asked, what is committed
 *   embed_identity.c checksums of the model's weights and of the input */
#ifndef ESMT_CLI_EMBED_H
#define ESMT_CLI_EMBED_H

#include <jansson.h>
#include <stdint.h>

#include "cli.h"
#include "npy_file.h"

#define EMBED_MAX_LAYERS 64
enum { EMBED_MEAN = 1, EMBED_PER_TOK = 2, EMBED_CLS = 4 };
enum { EMBED_TRUNCATE = 0, EMBED_WINDOWS = 1 };

typedef struct embed_options {
  const char *model, *input, *out, *split, *backend;
  int threads;
  int nl, layers[EMBED_MAX_LAYERS]; /* resolved: 0..L */
  unsigned include;                 /* EMBED_* */
  int safetensors;                  /* --format safetensors */
  int long_policy, window, stride;  /* window: residues per window (max_positions - 2) */
  int64_t batch_tokens, chunk_residues;
  int quiet;
  char input_content[64];           /* embed_input_checksum */
} embed_options;

/* One protein of a chunk and, once computed, its results (esmt_embed). */
typedef struct embed_protein {
  char *id;
  int32_t *tokens;      /* residues */
  int64_t length;       /* residues */
  esmt_embedding e;     /* kept, pieces, mean, cls, per_token */
} embed_protein;

typedef struct embed_chunk {
  embed_protein *p;
  int n, cap;
  int64_t residues;
} embed_chunk;

typedef struct embed_stats {
  uint64_t proteins, residues, truncated, windowed, unknown, empty, per_tok_rows;
  uint64_t ids_bytes, ids_hash;
} embed_stats;

/* cmd_embed.c: representations of every protein of the chunk (esmt_embed).
 * 0, 1 when a stop signal ended it, or -1 after printing why. */
int embed_compute(const embed_options *o, esmt_model *m, embed_chunk *c);
void embed_chunk_clear(embed_chunk *c);
/* embed_identity.c: FNV-1a of the ids in order, continued from h (resume
 * checks the input). */
uint64_t embed_id_hash(uint64_t h, const char *id);

/* embed_output.c */
typedef struct embed_output {
  const embed_options *o;
  int d;
  cli_npy lengths, offsets, mean[EMBED_MAX_LAYERS], cls[EMBED_MAX_LAYERS],
      tok[EMBED_MAX_LAYERS];
  int ids_fd;
  char ids_id[ESMT_OWNED_FILE_ID_CAP];
} embed_output;

/* No file open (embed_output_close does nothing). */
void embed_output_init(embed_output *w, const embed_options *o, int d);
/* Create the files, or with `resume` re-open those embed.json's `files`
 * names (esmt_owned_file_reopen: never through a link, only the recorded files) and
 * cut them back to the committed counts. */
int embed_output_open(embed_output *w, const embed_options *o, int d, const embed_stats *resume,
                      json_t *files);
/* The open arrays in a fixed order into out[3 * EMBED_MAX_LAYERS + 2]. */
int embed_output_arrays(embed_output *w, cli_npy **out);
/* {"name": "DEV:INO:BIRTH"} of the open files, for embed.json (new reference). */
json_t *embed_output_files(embed_output *w);
/* A --format safetensors output recorded complete: remove the staging
 * .npy arrays a run stopped between that record and their removal left
 * (only those `files` records, still as embed created them); how many. */
int embed_output_remove_staging_left(const embed_options *o, json_t *files);
/* Remove the files of an attempt that committed nothing, so that another
 * request may start in OUT: each must be a regular file of a name embed
 * writes, with one link and the recorded id. Anything else there is
 * refused (nothing removed). check_only: only the check. */
int embed_output_clear(const embed_options *o, json_t *files, int check_only);
int embed_output_write(embed_output *w, const embed_chunk *c, embed_stats *s);
int embed_output_commit(embed_output *w);
/* --format safetensors (embed_safetensors.c): the arrays into
 * OUT/embeddings.safetensors; after embed.json records it, the staging
 * .npy files removed. */
int embed_output_finish(embed_output *w, const embed_stats *s);
int embed_output_remove_staging(embed_output *w);
void embed_output_close(embed_output *w);

/* embed_meta.c: embed.json. */
typedef struct embed_model_info {
  int layers, hidden, max_positions;
  const char *kind, *backend;
  char weights[64]; /* embed_model_checksum */
} embed_model_info;
/* `files` (may be NULL: none yet) from embed_output_files. */
int embed_meta_write(const embed_options *o, const embed_model_info *mi, const embed_stats *s,
                     json_t *files, int complete, double seconds);
enum { EMBED_NEW = 0, EMBED_RESUME = 1, EMBED_RESTART = 2, EMBED_COMPLETE = 3 };
/* EMBED_NEW: OUT is new or empty; EMBED_RESUME: an unfinished embed of
 * the same request, model and input (*s gets its committed counts);
 * EMBED_RESTART: an unfinished embed that committed nothing (any request
 * may start anew there once embed_output_clear removed its files);
 * EMBED_COMPLETE: a finished embed of the same request (said; nothing to
 * do); *files
 * (may be NULL) gets the record's files (a new reference, or NULL); `say`
 * announces a resume. -1 after printing why OUT cannot be used. */
int embed_meta_check(const embed_options *o, const embed_model_info *mi, embed_stats *s,
                     int say, json_t **files);

/* embed_identity.c: "crc32:XXXXXXXX/N" of the model's weights (N values)
 * and of the input's bytes (a dataset: its manifest.json, which holds its
 * id and every shard's crc32; standard input: "stdin"). 0, or -1 after
 * printing why. */
int embed_model_checksum(esmt_model *m, char *out, size_t cap);
int embed_input_checksum(const char *input, char *out, size_t cap);

#endif
