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

/* ---- Masked rows, batched (score_batch.c) ----
 * A masked row is a protein (residue tokens, no cls/eos) with one residue
 * replaced by <mask>, laid out as [cls] residues [eos]. A protein longer
 * than W = max_positions - 2 residues is cut to the window of W residues
 * that holds the masked residue with the most context: it starts at
 * clamp(r - W/2, 0, n - W) (r the 0-based masked residue, W/2 rounded
 * down), and is still wrapped in [cls] .. [eos]. Rows are right-padded
 * into batches of B rows x T positions with B*T <= the token budget (at
 * least one row per batch). */

/* Receives log_softmax (double, all 33 tokens) of the logits at the masked
 * position of the row added with `tag`, in the order rows were added.
 * Returns 0, or non-zero to fail the run (after printing why). */
typedef int (*score_row_fn)(void *user, uint64_t tag, const double *logp);

typedef struct score_batcher score_batcher;

/* Returns NULL after printing why. */
score_batcher *score_batcher_create(esmt_model *model, uint64_t batch_tokens, score_row_fn fn,
                                    void *user);
void score_batcher_destroy(score_batcher *sb);

/* Queue the row masking residue r (0-based) of tok[0..n); tok must stay
 * valid until the next flush. Runs the queued batch first when the row
 * does not fit in it. Returns 0, or 1 after printing why. */
int score_batcher_add(score_batcher *sb, const int32_t *tok, int n, int r, uint64_t tag);
/* Run what is queued. Returns 0, or 1 after printing why. */
int score_batcher_flush(score_batcher *sb);
/* Masked positions scored so far. */
uint64_t score_batcher_rows_done(const score_batcher *sb);
/* W: the most residues one row holds. */
int score_batcher_window(const score_batcher *sb);

/* ---- The output file (cmd_score.c) ---- */

typedef struct score_out score_out;
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

/* ---- Reading VARIANTS.csv (score_csv.c) ---- */

/* Split one CSV line (its line break already removed, a trailing \r too)
 * into fields, in place: quotes removed ("a,b"; "" inside is "), blanks
 * around unquoted fields trimmed. *fields grows as needed (*cap entries).
 * Returns the number of fields, or -1 when a quote is not closed (fields
 * spanning lines are not supported). */
int score_csv_split(char *line, char ***fields, int *cap);

/* One mutation as written, "A123G": letters as token ids, the position as
 * written (before --offset). */
typedef struct score_mutation {
  int wt, mt;
  long long pos;
} score_mutation;

/* Parse "A123G:L45P" into at most `cap` mutations. Returns the count, or
 * -1 with why in msg. */
int score_parse_mutations(const char *text, score_mutation *out, int cap, char *msg,
                          size_t msg_cap);

typedef struct score_args {
  const char *model, *input, *out, *variants, *backend, *split;
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
