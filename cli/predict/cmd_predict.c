/* SPDX-License-Identifier: MIT */
/* `esmtrain-example predict MODEL IN -o OUT.csv`: a fine-tuned model's
 * predictions for every protein of a table or FASTA file, the input's
 * columns kept (esmt_predict_table, which owns the reading, batching and
 * the atomic output); this file parses flags and reports progress. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
  fprintf(f,
      "usage: esmtrain-example predict MODEL IN -o OUT.csv [options]\n"
      "MODEL  a fine-tuned checkpoint (finetune's run, its checkpoints/best or a step-*)\n"
      "IN     a CSV/TSV table with a sequence column, or FASTA (.fasta/.fa/.faa, plain or .gz)\n"
      "OUT    a new CSV: IN's columns (FASTA: id, sequence), then per task: seq-class\n"
      "       'predicted' and 'p_<class>' for each class; multilabel 'p_<label>'; regression\n"
      "       'predicted_<target>'; residue-class 'predicted', one class per residue\n"
      "  --seq-col NAME        the table's sequence column (default sequence)\n"
      "  --batch-size N        proteins per forward pass (default 16)\n"
      "  --long refuse|truncate  proteins over the model's window: refused (default) or\n"
      "                        predicted from their first window\n"
      "  --backend NAME --threads N --quiet\n");
}

typedef struct progress_state { int quiet, shown; } progress_state;

/* "predict: N proteins" on one line of stderr, rewritten as it grows. */
static int on_progress(void *user, const esmt_progress *p) {
  progress_state *ps = user;
  if (!ps->quiet && p->done % 1024 < 16) {
    fprintf(stderr, "\rpredict: %llu proteins", (unsigned long long)p->done);
    fflush(stderr);
    ps->shown = 1;
  }
  return cli_signal_caught();
}

int cmd_predict(int argc, char **argv) {
  const char *pos[2] = {NULL, NULL}, *backend = NULL, *lng = "refuse", *v = NULL;
  esmt_predict_options o = ESMT_PREDICT_OPTIONS_INIT;
  long long threads = 0, batch = 16;
  int npos = 0;
  progress_state ps = {0, 0};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
    if (!strcmp(a, "--quiet")) { ps.quiet = 1; continue; }
    if (!strcmp(a, "-o") || !strcmp(a, "--out")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "esmtrain-example: predict: %s needs a value\n", a);
        return 2;
      }
      o.output = argv[++i];
      continue;
    }
    if (cli_flag_value("--seq-col", argc, argv, &i, &v)) o.seq_column = v;
    else if (cli_flag_value("--backend", argc, argv, &i, &v)) backend = v;
    else if (cli_flag_value("--long", argc, argv, &i, &v)) lng = v;
    else if (cli_flag_value("--batch-size", argc, argv, &i, &v)) {
      if (!v || !cli_int_arg("predict", "--batch-size", v, 1, 4096, &batch)) return 2;
    } else if (cli_flag_value("--threads", argc, argv, &i, &v)) {
      if (!v || !cli_int_arg("predict", "--threads", v, 0, 4096, &threads)) return 2;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "esmtrain-example: predict: unknown option '%s'%s (try --help)\n", a,
              cli_option_hint(a, usage));
      return 2;
    } else if (npos < 2) {
      pos[npos++] = a;
      continue;
    } else {
      fprintf(stderr, "esmtrain-example: predict: one MODEL and one IN (try --help)\n");
      return 2;
    }
    if (!v) { fprintf(stderr, "esmtrain-example: predict: %s needs a value\n", a); return 2; }
  }
  if (npos < 2 || !o.output) {
    fprintf(stderr, "esmtrain-example: predict: MODEL, IN and -o OUT.csv are required (try "
                    "--help)\n");
    return 2;
  }
  if (strcmp(lng, "refuse") && strcmp(lng, "truncate")) {
    fprintf(stderr, "esmtrain-example: predict: --long '%s': refuse or truncate\n", lng);
    return 2;
  }
  o.input = pos[1];
  o.batch_rows = (int)batch;
  o.truncate_long = !strcmp(lng, "truncate");
  o.progress = on_progress;
  o.progress_user = &ps;
  const char *const inputs[] = {pos[0], pos[1]};
  if (cli_output_path_check("predict", o.output, inputs, 2)) return 1;
  cli_signals_catch(NULL);
  esmt_context *ctx = NULL;
  esmt_model *model = NULL;
  if (cli_model_open("predict", pos[0], backend, (int)threads, &ctx, &model)) return 1;
  uint64_t rows = 0;
  esmt_status st = esmt_predict_table(model, &o, &rows);
  if (ps.shown) fprintf(stderr, "\r");
  esmt_model_destroy(model);
  esmt_context_destroy(ctx);
  if (st) {
    if (ps.shown) fprintf(stderr, "\n");
    cli_error("predict", st);
    return st == ESMT_ERR_CANCELLED && cli_signal_caught() ? 128 + cli_signal_caught() : 1;
  }
  if (!ps.quiet)
    fprintf(stderr, "predict: %llu proteins -> %s\n", (unsigned long long)rows, o.output);
  return 0;
}
