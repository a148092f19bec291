/* SPDX-License-Identifier: MIT */
/* `esmtrain-example embed`: arguments, progress and the main loop over the
 * library (cmd_embed.c; embed_attention.c: the attention maps' estimate and cap) (esmt_embed: a chunk of proteins -> per-protein results, windows;
 * esmt_embed_dir: the output directory, its record, commits and resume). */
#ifndef ESMT_CLI_EMBED_H
#define ESMT_CLI_EMBED_H

#include <stdint.h>

#include "cli.h"

#define EMBED_MAX_LAYERS 64

typedef struct embed_options {
  const char *model, *input, *out, *split, *backend;
  int threads;
  int nl, layers[EMBED_MAX_LAYERS]; /* resolved: 0..L */
  unsigned include;                 /* ESMT_EMBED_* */
  int safetensors;                  /* --format safetensors */
  esmt_long_policy long_policy;
  int window, stride;               /* window: residues per window (max_positions - 2) */
  int64_t batch_tokens, chunk_residues;
  uint64_t max_attention_bytes;     /* --max-attention-bytes (0: no cap) */
  int quiet;
} embed_options;

/* A chunk of proteins read from the input and, once computed, their results. */
typedef struct embed_chunk {
  char **ids;
  int32_t **tokens;     /* residues */
  int64_t *lengths;
  esmt_embedding *e;
  int n, cap;
  int64_t residues;
  uint64_t unknown;     /* unknown residues the reader counted */
} embed_chunk;

/* --include attention (embed_attention.c): the estimate printed, a warning
 * over a threshold, proteins over the cap refused before anything is
 * created. 0, or 1 after the message. */
int embed_attention_estimate(const embed_options *o, esmt_model *m);
/* Standard input, read in chunks: the first protein of c over the cap,
 * named; 0, or 1 after the message. */
int embed_attention_check_chunk(const embed_options *o, esmt_model *m, const embed_chunk *c);

#endif
