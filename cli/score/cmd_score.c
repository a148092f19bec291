/* SPDX-License-Identifier: MIT */
/* `esmtrain-example score`: pseudo-log-likelihoods of proteins
 * (score_pll.c) and masked-marginal scores of variants (score_variants.c)
 * from an ESM-2 model, into a CSV file. This file: the command line; the
 * output file and the progress line are score_output.c's. Public API only. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "score_common.h"

static void usage(FILE *f) {
  fprintf(f,
    "usage: esmtrain-example score MODEL INPUT -o OUT.csv [options]\n"
    "       esmtrain-example score MODEL WT.fasta --variants VARIANTS.csv -o OUT.csv [options]\n"
    "MODEL is a Hugging Face ESM-2 directory or an esmtrain run or checkpoint.\n"
    "\n"
    "Pseudo-log-likelihood (first form). INPUT is FASTA (plain or .gz) or an ingested\n"
    "dataset directory (--split). For a protein of n residues, each residue i in turn is\n"
    "replaced by <mask> in [cls] residues [eos], and\n"
    "  pll  = sum over i of log_softmax(logits at i)[true residue at i]\n"
    "  pppl = exp(-pll / n)\n"
    "OUT.csv: id,length,pll,pppl, one line per protein in input order. Empty records are\n"
    "skipped with a warning (no line); letters outside the alphabet are scored as <unk>.\n"
    "\n"
    "Masked marginals (second form; Meier et al. 2021). VARIANTS.csv (or .tsv; RFC 4180\n"
    "quoting) has a header row; its mutation column (--mutation-col, default 'mutant',\n"
    "else 'mutation') holds A123G: wild-type letter, position, mutant letter; several join\n"
    "with ':' (A123G:L45P). Each row's wild type is the record of WT.fasta its --seq-col\n"
    "column names (default 'id'; a WT.fasta of one record needs no such column).\n"
    "Each mutated position i is masked in the wild type once, and\n"
    "  score = sum over the mutations of log p(mutant at i) - log p(wild type at i)\n"
    "OUT.csv: the table's rows in order, every column kept, with a 'score' column\n"
    "appended. The table is checked whole before the model is loaded; every problem is\n"
    "reported with its line.\n"
    "\n"
    "Long proteins: a row holds at most W = max_positions - 2 residues (1022 for ESM-2).\n"
    "A longer protein is scored position by position in the window of W residues with the\n"
    "most context around the masked residue: residues s+1..s+W (1-based), where\n"
    "s = min(max(i - 1 - floor(W/2), 0), n - W), wrapped in [cls] .. [eos].\n"
    "\n"
    "options:\n"
    "  -o OUT.csv          the output; it must not exist (never overwritten). Written to\n"
    "                      OUT.csv.tmp.PID and renamed when complete; removed on failure\n"
    "  --variants FILE     masked-marginal mode (above); `-` reads standard input. A\n"
    "                      regular file or a pipe on standard input (no FIFO or device),\n"
    "                      plain or gzip, at most 16 MiB a field\n"
    "  --mutation-col NAME the column of the mutations (default mutant, else mutation)\n"
    "  --seq-col NAME      the column naming each row's wild type in WT.fasta (default id)\n"
    "  --offset K          the number of the first residue in mutations (default 1)\n"
    "  --batch-tokens N    rows x longest row of one model call (default 16384; at\n"
    "                      least one row per call)\n"
    "  --backend NAME      backend (default: $ESMTRAIN_BACKEND, else the best probed)\n"
    "  --threads N         CPU threads (default 0: all cores)\n"
    "  --split train|valid the split of a dataset INPUT (default train)\n"
    "  --quiet             no progress line (otherwise on stderr about once a second)\n"
    "Numbers are printed with 9 significant digits: the logits are fp32 (or fp16/bf16\n"
    "widened), sums are in double. Exit status: 0 done, 1 failure, 2 usage error,\n"
    "128+N stopped by signal N (nothing written).\n");
}

static int parse(int argc, char **argv, score_args *a) {
  memset(a, 0, sizeof *a);
  a->batch_tokens = 16384;
  a->offset = 1;
  const char *cmd = "esmtrain-example: score";
  for (int i = 0; i < argc; i++) {
    const char *v = NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return -1;
    if (!strcmp(argv[i], "--quiet")) a->quiet = 1;
    else if (cli_flag_value("-o", argc, argv, &i, &v) ||
             cli_flag_value("--output", argc, argv, &i, &v)) { if (!(a->out = v)) goto missing; }
    else if (cli_flag_value("--variants", argc, argv, &i, &v)) { if (!(a->variants = v)) goto missing; }
    else if (cli_flag_value("--backend", argc, argv, &i, &v)) { if (!(a->backend = v)) goto missing; }
    else if (cli_flag_value("--mutation-col", argc, argv, &i, &v)) { if (!(a->mutation_col = v)) goto missing; }
    else if (cli_flag_value("--seq-col", argc, argv, &i, &v)) { if (!(a->seq_col = v)) goto missing; }
    else if (cli_flag_value("--split", argc, argv, &i, &v)) {
      if (!(a->split = v)) goto missing;
      if (strcmp(v, "train") && strcmp(v, "valid")) {
        fprintf(stderr, "%s: --split '%s': expected train or valid\n", cmd, v);
        return 2;
      }
    } else if (cli_flag_value("--batch-tokens", argc, argv, &i, &v)) {
      if (!cli_int_arg(cmd, "--batch-tokens", v, 3, (long long)1 << 40, &a->batch_tokens))
        return 2;
    } else if (cli_flag_value("--threads", argc, argv, &i, &v)) {
      if (!cli_int_arg(cmd, "--threads", v, 0, 4096, &a->threads)) return 2;
    } else if (cli_flag_value("--offset", argc, argv, &i, &v)) {
      if (!cli_int_arg(cmd, "--offset", v, -1000000000LL, 1000000000LL, &a->offset)) return 2;
    } else if (argv[i][0] == '-' && strcmp(argv[i], "-")) {
      fprintf(stderr, "%s: unknown argument '%s'%s (try --help)\n", cmd, argv[i],
              cli_option_hint(argv[i], usage));
      return 2;
    } else if (!a->model) a->model = argv[i];
    else if (!a->input) a->input = argv[i];
    else {
      fprintf(stderr, "%s: unexpected argument '%s' (MODEL and INPUT are %s and %s)\n", cmd,
              argv[i], a->model, a->input);
      return 2;
    }
    continue;
  missing:
    fprintf(stderr, "%s: %s needs a value\n", cmd, argv[i]);
    return 2;
  }
  if (!a->model || !a->input || !a->out) {
    fprintf(stderr, "%s: need MODEL, INPUT and -o OUT.csv (try --help)\n", cmd);
    return 2;
  }
  return 0;
}

static int stopped(int sig, const char *out) {
  fprintf(stderr, SCORE_PREFIX "stopped by %s: %s was not written and no partial file is "
          "left\n", cli_signal_name(sig), out);
  return 128 + sig;
}

int cmd_score(int argc, char **argv) {
  score_args a;
  int rc = parse(argc, argv, &a);
  if (rc < 0) { usage(stdout); return 0; }
  if (rc) return rc;
  struct stat sb;
  if (lstat(a.out, &sb) == 0) {
    fprintf(stderr, SCORE_PREFIX "%s already exists: score never overwrites a file; remove it "
            "or choose another -o. Nothing was done\n", a.out);
    return 1;
  }
  /* never into what esmtrain keeps, nor over or inside an input */
  const char *inputs[] = {a.model, a.input, a.variants ? a.variants : a.input};
  if (cli_output_path_check("score", a.out, inputs, 3)) return 1;
  cli_signals_catch(NULL);
  esmt_sequence_reader *in = NULL;
  score_variants *var = NULL;
  if (a.variants) {
    if (!strcmp(a.input, "-") && (!strcmp(a.variants, "-") || !strcmp(a.variants, "/dev/stdin"))) {
      fprintf(stderr, SCORE_PREFIX "WT.fasta and --variants cannot both be standard input\n");
      return 2;
    }
    if (!(var = score_variants_load(&a)))
      return cli_signal_caught() ? stopped(cli_signal_caught(), a.out) : 1;
  } else {
    esmt_status st = esmt_sequence_reader_open(a.input, a.split, &in);
    if (st) {
      cli_error("score: input", st);
      return 1;
    }
  }
  esmt_context *ctx = NULL;
  esmt_model *model = NULL;
  score_out out;
  memset(&out, 0, sizeof out);
  rc = score_out_open(&out, a.out); /* before the model: a bad -o fails at once */
  if (!rc) rc = cli_model_open("score", a.model, a.backend, (int)a.threads, &ctx, &model);
  if (!rc && cli_signal_caught()) rc = 128 + cli_signal_caught();
  if (!rc) rc = var ? score_variants_run(var, &a, model, &out) : score_pll_run(&a, in, model, &out);
  if (!rc && cli_signal_caught()) rc = 128 + cli_signal_caught();
  if (!rc) {
    cli_signals_defer(); /* published whole or not at all */
    rc = score_out_commit(&out);
    if (!rc) fprintf(stderr, SCORE_PREFIX "wrote %s\n", a.out);
    int sig = cli_signals_deferred();
    if (sig) {
      fprintf(stderr, SCORE_PREFIX "stopped by %s, which arrived while publishing %s: it was "
              "finished first\n", cli_signal_name(sig), a.out);
      rc = 128 + sig;
    }
  } else if (rc > 128) {
    rc = stopped(rc - 128, a.out);
  }
  score_out_discard(&out);
  esmt_model_destroy(model);
  esmt_context_destroy(ctx);
  esmt_sequence_reader_close(in);
  score_variants_free(var);
  return rc;
}
