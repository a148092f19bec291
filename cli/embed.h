/* `esmtrain-example embed`: shared declarations of its parts.
 *   cmd_embed.c      arguments, the output directory, the main loop, progress
 *   embed_compute.c  a chunk of proteins -> length-sorted batches -> per-protein results
 *   embed_output.c   the arrays (npy_file.h), ids.txt, commits, resume
 *   embed_safetensors.c  --format safetensors at the end
 *   embed_meta.c     embed.json: what was asked, what is committed */
#ifndef ESMT_CLI_EMBED_H
#define ESMT_CLI_EMBED_H

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
} embed_options;

/* One protein of a chunk and, once computed, its results. */
typedef struct embed_protein {
  char *id;
  int32_t *tokens;      /* residues */
  int64_t length;       /* residues */
  int64_t kept;         /* residues with a representation (length, or the window when truncated) */
  int pieces, pieces_done;
  float *mean, *cls;    /* [nl * d] */
  float *tok;           /* [nl * kept * d] when per_tok is asked for, else NULL */
  double *acc;          /* windows: [nl * kept * d] sums, then divided into tok */
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

/* embed_compute.c: representations of every protein of the chunk. */
int embed_compute(const embed_options *o, esmt_model *m, int d, embed_chunk *c);
void embed_chunk_clear(embed_chunk *c);
/* FNV-1a of the ids in order, continued from h (resume checks the input). */
uint64_t embed_id_hash(uint64_t h, const char *id);

/* embed_output.c */
typedef struct embed_output {
  const embed_options *o;
  int d;
  cli_npy lengths, offsets, mean[EMBED_MAX_LAYERS], cls[EMBED_MAX_LAYERS],
      tok[EMBED_MAX_LAYERS];
  int ids_fd;
} embed_output;

int embed_output_open(embed_output *w, const embed_options *o, int d, const embed_stats *resume);
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
} embed_model_info;
int embed_meta_write(const embed_options *o, const embed_model_info *mi, const embed_stats *s,
                     int complete, double seconds);
/* 0: OUT is new or empty; 1: an unfinished embed of the same request
 * (*s gets its committed counts; `say` announces the resume); -1 after
 * printing why OUT cannot be used. */
int embed_meta_check(const embed_options *o, const embed_model_info *mi, embed_stats *s,
                     int say);

#endif
