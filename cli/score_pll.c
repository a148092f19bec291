/* SPDX-License-Identifier: MIT */
/* `score MODEL INPUT -o OUT.csv`: the pseudo-log-likelihood of each
 * protein, PLL = sum over residues i of log p(true token at i | the
 * protein with i masked), and its pseudo-perplexity exp(-PLL / n). The
 * masked copies of consecutive proteins share batches; a protein's line is
 * written when its last copy is scored, so lines come in input order and
 * memory holds only the proteins of the batch being filled. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "score_common.h"

typedef struct pll_protein {
  char *id;
  int32_t *tok;
  int n, done;        /* residues; masked copies scored so far (in order) */
  double pll;
} pll_protein;

typedef struct pll_state {
  FILE *f;
  pll_protein *open;  /* proteins with copies queued or unscored, input order */
  int n_open, cap_open;
  uint64_t first_tag; /* tag (count of non-empty proteins before it) of open[0] */
  uint64_t written;
} pll_state;

/* One masked copy of protein `tag` scored: copies come back in the order
 * they were queued, so this one masks residue p->done. */
static int on_row(void *user, uint64_t tag, const double *logp) {
  pll_state *s = user;
  pll_protein *p = &s->open[tag - s->first_tag];
  p->pll += logp[p->tok[p->done]];
  if (++p->done < p->n) return 0;
  score_csv_field(s->f, p->id);
  fprintf(s->f, ",%d," SCORE_NUM "," SCORE_NUM "\n", p->n, p->pll, exp(-p->pll / p->n));
  s->written++;
  return 0;
}

/* Forget the finished proteins at the front (all of them finish in order). */
static void compact(pll_state *s) {
  int k = 0;
  while (k < s->n_open && s->open[k].done == s->open[k].n) {
    free(s->open[k].id);
    free(s->open[k].tok);
    k++;
  }
  if (!k) return;
  memmove(s->open, s->open + k, (size_t)(s->n_open - k) * sizeof *s->open);
  s->n_open -= k;
  s->first_tag += (uint64_t)k;
}

static void free_open(pll_state *s) {
  for (int k = 0; k < s->n_open; k++) {
    free(s->open[k].id);
    free(s->open[k].tok);
  }
  free(s->open);
}

/* A copy of the reader's sequence (valid only until its next call). */
static int keep(pll_state *s, const esmt_sequence *q) {
  if (s->n_open == s->cap_open) {
    const int cap = s->cap_open ? 2 * s->cap_open : 16;
    pll_protein *o = realloc(s->open, (size_t)cap * sizeof *o);
    if (!o) return 1;
    s->open = o;
    s->cap_open = cap;
  }
  pll_protein *p = &s->open[s->n_open];
  memset(p, 0, sizeof *p);
  p->n = (int)q->length;
  p->tok = malloc((size_t)q->length * sizeof *p->tok);
  p->id = malloc(strlen(q->id) + 1);
  if (!p->tok || !p->id) {
    free(p->tok);
    free(p->id);
    return 1;
  }
  memcpy(p->tok, q->tokens, (size_t)q->length * sizeof *p->tok);
  strcpy(p->id, q->id);
  s->n_open++;
  return 0;
}

/* For the ETA: the residues of a FASTA file of up to 64 MiB, counted by a
 * first pass (0: not counted). Its reader reads ahead by up to ~200 KiB,
 * so on a small file the position it reports says little; on a larger
 * one, or a dataset (records), the position is used. */
static uint64_t count_residues(const score_args *a) {
  struct stat sb;
  if (!strcmp(a->input, "-") || stat(a->input, &sb) || !S_ISREG(sb.st_mode) ||
      sb.st_size > ((off_t)64 << 20))
    return 0;
  esmt_sequence_reader *in = NULL;
  uint64_t n = 0;
  int got = 1;
  esmt_status st = esmt_sequence_reader_open(a->input, a->split, &in);
  while (!st && got && !cli_signal_caught()) {
    esmt_sequence q = ESMT_SEQUENCE_INIT;
    st = esmt_sequence_reader_next(in, &q, &got);
    if (!st && got) n += q.length;
  }
  esmt_sequence_reader_close(in);
  esmt_clear_error();
  return st ? 0 : n; /* an error comes again, with its message, in the real pass */
}

static double done_fraction(const esmt_sequence_reader *in, uint64_t residues,
                            uint64_t positions) {
  if (residues) return (double)positions / (double)residues;
  uint64_t done = 0, total = 0;
  if (esmt_sequence_reader_position(in, &done, &total) || !total) return -1;
  return (double)done / (double)total;
}

int score_pll_run(const score_args *a, esmt_sequence_reader *in, esmt_model *model,
                  score_out *out) {
  pll_state s = {.f = score_out_file(out)};
  score_batcher *sb = score_batcher_create(model, (uint64_t)a->batch_tokens, on_row, &s);
  if (!sb) return 1;
  fprintf(s.f, "id,length,pll,pppl\n");
  score_progress prog;
  score_progress_init(&prog, a->quiet);
  const uint64_t residues = a->quiet ? 0 : count_residues(a);
  uint64_t empty = 0, unknown = 0, tags = 0;
  int rc = 0;
  for (;;) {
    esmt_sequence q = ESMT_SEQUENCE_INIT;
    int got = 0;
    esmt_status st = cli_signal_caught() ? ESMT_OK : esmt_sequence_reader_next(in, &q, &got);
    if (cli_signal_caught()) break;
    if (st) {
      cli_error("score: input", st);
      rc = 1;
      break;
    }
    if (!got) break;
    if (q.length == 0) {
      if (++empty <= 10)
        fprintf(stderr, SCORE_PREFIX "warning: record '%s' (number %llu) is empty: skipped, it "
                "has no line in the output\n", q.id, (unsigned long long)q.index + 1);
      continue;
    }
    if (q.length > INT_MAX / 2) {
      fprintf(stderr, SCORE_PREFIX "record '%s' has %llu residues: too long to score\n", q.id,
              (unsigned long long)q.length);
      rc = 1;
      break;
    }
    unknown += q.unknown;
    if (keep(&s, &q)) {
      fprintf(stderr, SCORE_PREFIX "out of memory for record '%s' (%llu residues)\n", q.id,
              (unsigned long long)q.length);
      rc = 1;
      break;
    }
    const pll_protein *p = &s.open[s.n_open - 1];
    for (int r = 0; r < p->n && !rc && !cli_signal_caught(); r++)
      rc = score_batcher_add(sb, p->tok, p->n, r, tags);
    tags++;
    if (rc || cli_signal_caught()) break;
    compact(&s);
    score_progress_tick(&prog, s.written, score_batcher_rows_done(sb), done_fraction(in, residues, score_batcher_rows_done(sb)), 0);
  }
  if (!rc && !cli_signal_caught()) rc = score_batcher_flush(sb);
  score_progress_tick(&prog, s.written, score_batcher_rows_done(sb), done_fraction(in, residues, score_batcher_rows_done(sb)), 1);
  score_progress_end(&prog);
  if (!rc && cli_signal_caught()) rc = 128 + cli_signal_caught();
  if (!rc) {
    if (empty)
      fprintf(stderr, SCORE_PREFIX "warning: %llu empty record%s skipped (no line in the "
              "output)\n", (unsigned long long)empty, empty == 1 ? "" : "s");
    if (unknown)
      fprintf(stderr, SCORE_PREFIX "note: %llu residue%s outside the alphabet scored as "
              "<unk>\n", (unsigned long long)unknown, unknown == 1 ? "" : "s");
    printf("score: %llu proteins, %llu masked positions in %.1f s\n",
           (unsigned long long)s.written, (unsigned long long)score_batcher_rows_done(sb),
           esmt_clock_seconds() - prog.start);
  }
  score_batcher_destroy(sb);
  free_open(&s);
  return rc;
}
