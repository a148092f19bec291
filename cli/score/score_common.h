/* SPDX-License-Identifier: MIT */
/* `esmtrain-example score`: what its files (cmd_score.c, score_*.c) share.
 * Public API only (esmtrain/esmtrain.h). */
#ifndef ESMT_CLI_SCORE_COMMON_H
#define ESMT_CLI_SCORE_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"

#define SCORE_PREFIX "esmtrain-example: score: "

/* Numbers in the CSV: 9 significant digits. The logits are fp32 (widened
 * from fp16/bf16 on a half-precision backend): 9 digits round-trip any
 * float and are more than the logits carry; sums are kept in double. */
#define SCORE_NUM "%.9g"

/* Masked rows, their window and batches: esmt_masked_scorer (infer.h). */

/* ---- The output file and progress (score_output.c) ---- */

typedef struct score_out {
  char *path, *tmp; /* where it is published; the temporary file beside it */
  FILE *f;
} score_out;
/* A temporary file beside path (refused when path exists); 0 or 1 (printed). */
int score_out_open(score_out *o, const char *path);
/* Publish the temporary file at its path, whole; 0 or 1 (printed). */
int score_out_commit(score_out *o);
/* Remove the temporary file (after a failure or a stop). */
void score_out_discard(score_out *o);
/* The CSV stream being written (the temporary file). */
FILE *score_out_file(score_out *o);
/* Write a CSV field, quoted when it holds , " or a line break. */
void score_csv_field(FILE *f, const char *s);

/* Progress to stderr, at most about once a second (force: now). */
typedef struct score_progress {
  double start, last;
  int quiet, tty, printed;
} score_progress;
void score_progress_init(score_progress *p, int quiet);
/* proteins done, masked positions done; fraction of the input read (< 0:
 * unknown) for the ETA. */
void score_progress_tick(score_progress *p, uint64_t proteins, uint64_t positions,
                         double fraction, int force);
void score_progress_end(score_progress *p);

typedef struct score_args {
  const char *model, *input, *out, *variants, *backend, *split;
  const char *mutation_col, *seq_col; /* NULL: the defaults (score_variants.c) */
  long long batch_tokens, threads, offset;
  int quiet;
} score_args;

/* The two modes. Each run returns 0, 1 on failure (printed), or 128 +
 * signal when a stop signal ended it. The inputs are opened (and the
 * variants checked) before the model is loaded, so that their errors come
 * at once. */
/* score_pll.c: pseudo-log-likelihood of every protein of a.input, streamed. */
int score_pll_run(const score_args *a, esmt_sequence_reader *in, esmt_model *model,
                  score_out *out);
/* score_variants.c: masked marginals of the variants a.variants names
 * (the wild types loaded whole from a.input). Load returns NULL after
 * printing every problem found (each with its CSV line). */
typedef struct score_variants score_variants;
score_variants *score_variants_load(const score_args *a);
void score_variants_free(score_variants *v);
int score_variants_run(score_variants *v, const score_args *a, esmt_model *model,
                       score_out *out);

#endif
