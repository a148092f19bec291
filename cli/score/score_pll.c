/* SPDX-License-Identifier: MIT */
/* `score MODEL INPUT -o OUT.csv`: the pseudo-log-likelihood of each
 * protein (esmt_pll_scorer) and its pseudo-perplexity exp(-PLL / n), a
 * line per protein in input order. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "score_common.h"

/* The ids of the proteins queued and not yet written, in input order. */
typedef struct pll_state {
  FILE *f;
  char **ids;
  size_t first, n, cap;  /* ids[first..n) are open */
  uint64_t written;
} pll_state;

static int on_protein(void *user, uint64_t index, int length, double pll) {
  pll_state *s = user;
  (void)index; /* proteins finish in input order: it is ids[first] */
  score_csv_field(s->f, s->ids[s->first]);
  fprintf(s->f, ",%d," SCORE_NUM "," SCORE_NUM "\n", length, pll, exp(-pll / length));
  free(s->ids[s->first++]);
  s->written++;
  return 0;
}

static int keep_id(pll_state *s, const char *id) {
  if (s->first == s->n) s->first = s->n = 0;
  if (s->n == s->cap) {
    const size_t cap = s->cap ? 2 * s->cap : 16;
    char **ids = realloc(s->ids, cap * sizeof *ids);
    if (!ids) return 1;
    s->ids = ids;
    s->cap = cap;
  }
  if (!(s->ids[s->n] = strdup(id))) return 1;
  s->n++;
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
  esmt_pll_scorer *sb = NULL;
  esmt_status st0 = esmt_pll_scorer_create(model, (uint64_t)a->batch_tokens, on_protein, &s, &sb);
  if (st0) {
    cli_error("score", st0);
    return 1;
  }
  fprintf(s.f, "id,length,pll,pppl\n");
  score_progress prog;
  score_progress_init(&prog, a->quiet);
  const uint64_t residues = a->quiet ? 0 : count_residues(a);
  uint64_t empty = 0, unknown = 0;
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
    if (keep_id(&s, q.id)) {
      fprintf(stderr, SCORE_PREFIX "out of memory for record '%s' (%llu residues)\n", q.id,
              (unsigned long long)q.length);
      rc = 1;
      break;
    }
    if ((st = esmt_pll_scorer_add(sb, q.tokens, (int)q.length))) {
      cli_error("score", st);
      rc = 1;
      break;
    }
    if (cli_signal_caught()) break;
    const uint64_t rows = esmt_pll_scorer_rows_done(sb);
    score_progress_tick(&prog, s.written, rows, done_fraction(in, residues, rows), 0);
  }
  esmt_status st = ESMT_OK;
  if (!rc && !cli_signal_caught() && (st = esmt_pll_scorer_finish(sb))) {
    cli_error("score", st);
    rc = 1;
  }
  const uint64_t rows = esmt_pll_scorer_rows_done(sb);
  score_progress_tick(&prog, s.written, rows, done_fraction(in, residues, rows), 1);
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
           (unsigned long long)s.written, (unsigned long long)rows,
           esmt_clock_seconds() - prog.start);
  }
  esmt_pll_scorer_destroy(sb);
  for (size_t k = s.first; k < s.n; k++) free(s.ids[k]);
  free(s.ids);
  return rc;
}
