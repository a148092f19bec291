/* SPDX-License-Identifier: MIT */
/* `esmtrain-example export CKPT -o DIR --format hf` and
 * `esmtrain-example import-hf HF_DIR -o RUN_DIR`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static esmt_context *make_ctx(void) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend = "cpu"; /* conversion needs no accelerator */
  o.log = cli_log_stderr;
  o.log_level = ESMT_LOG_WARN;
  esmt_context *ctx = NULL;
  esmt_status st = esmt_context_create(&o, &ctx);
  if (st) cli_error("context", st);
  return ctx;
}

/* The exit status once a deferred stop signal is accounted for: the
 * command finished (or failed and cleaned up) first; say so. */
static int deferred_status(const char *cmd, int rc, const char *outcome) {
  int sig = cli_signals_deferred();
  if (!sig) return rc;
  fprintf(stderr, "esmtrain-example: %s: stopped by %s, which arrived while writing: the write "
          "was finished first (%s)\n", cmd, cli_signal_name(sig), outcome);
  return 128 + sig;
}

/* A trainer over no data, only to load or save checkpoints. */
static esmt_status no_batches(void *u, esmt_batch *b) {
  (void)u; (void)b;
  return ESMT_ERR_STATE;
}

static void export_usage(FILE *f) {
  fprintf(f, "usage: esmtrain-example export CKPT|RUN_DIR -o DIR [--format hf] [--overwrite]\n"
          "                                [--adapter-out ADAPTER_DIR]\n"
          "Writes a directory transformers loads (EsmForMaskedLM/EsmTokenizer.from_pretrained;\n"
          "EsmForSequenceClassification or EsmForTokenClassification for a fine-tuned model,\n"
          "LoRA merged). --adapter-out: LoRA as a PEFT adapter in ADAPTER_DIR instead, on the\n"
          "unmerged base in DIR (peft.PeftModel.from_pretrained(base, ADAPTER_DIR)).\n"
          "DIR must be new or empty and outside the source; --overwrite replaces an earlier\n"
          "export (marked .esmtrain-export), never a directory esmtrain did not write.\n");
}

static void import_usage(FILE *f) {
  fprintf(f, "usage: esmtrain-example import-hf HF_DIR [--adapter PEFT_DIR] -o RUN_DIR\n"
          "HF_DIR: EsmForMaskedLM, EsmForSequenceClassification or EsmForTokenClassification;\n"
          "--adapter: a PEFT LoRA adapter on HF_DIR, imported with it.\n"
          "Writes an esmtrain checkpoint (step 0) that `train --init-from RUN_DIR` starts from.\n"
          "RUN_DIR must not hold a run already (its checkpoints are never replaced).\n");
}

int cmd_export(int argc, char **argv) {
  const char *ckpt = NULL, *out = NULL, *format = "hf", *adapter = NULL;
  int overwrite = 0;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { export_usage(stdout); return 0; }
    if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--adapter-out") && i + 1 < argc) adapter = argv[++i];
    else if (!strcmp(argv[i], "--format") && i + 1 < argc) format = argv[++i];
    else if (!strcmp(argv[i], "--overwrite")) overwrite = 1;
    else if (argv[i][0] != '-') ckpt = argv[i];
    else {
      fprintf(stderr, "export: unknown argument '%s'%s (try --help)\n", argv[i],
              cli_option_hint(argv[i], export_usage));
      return 2;
    }
  }
  if (!ckpt || !out || strcmp(format, "hf") != 0) {
    export_usage(stderr);
    return 2;
  }
  if (esmt_path_inside(out, ckpt) || esmt_path_inside(ckpt, out)) {
    fprintf(stderr, "esmtrain-example: export: -o %s %s the source %s: writing the export there "
            "could destroy the run. Nothing was changed: choose an output directory outside it\n",
            out, esmt_path_inside(ckpt, out) ? "is or contains" : "is inside", ckpt);
    return 1;
  }
  if (adapter && (esmt_path_inside(adapter, ckpt) || esmt_path_inside(ckpt, adapter) ||
                  esmt_path_inside(adapter, out) || esmt_path_inside(out, adapter))) {
    fprintf(stderr, "esmtrain-example: export: --adapter-out %s overlaps the source %s or -o %s. "
            "Nothing was changed: choose a directory of its own\n", adapter, ckpt, out);
    return 1;
  }
  esmt_context *ctx = make_ctx();
  if (!ctx) return 1;
  cli_signals_defer(); /* the export completes or is undone whole */
  esmt_model *m = NULL;
  esmt_status st = esmt_model_create_from_checkpoint(ctx, ckpt, &m);
  if (!st) st = adapter ? esmt_model_export_peft(m, out, adapter, overwrite)
                        : esmt_model_export_hf(m, out, overwrite);
  if (st) cli_error("export", st);
  else if (adapter) printf("exported %s to %s (base) and %s (PEFT LoRA adapter)\n", ckpt, out, adapter);
  else printf("exported %s to %s (Hugging Face)\n", ckpt, out);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return deferred_status("export", st ? 1 : 0, st ? "nothing was written" : "the export is complete");
}

int cmd_import_hf(int argc, char **argv) {
  const char *in = NULL, *out = NULL, *adapter = NULL;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { import_usage(stdout); return 0; }
    if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--adapter") && i + 1 < argc) adapter = argv[++i];
    else if (argv[i][0] != '-') in = argv[i];
    else {
      fprintf(stderr, "import-hf: unknown argument '%s'%s (try --help)\n", argv[i],
              cli_option_hint(argv[i], import_usage));
      return 2;
    }
  }
  if (!in || !out) {
    import_usage(stderr);
    return 2;
  }
  if (esmt_path_inside(out, in) || esmt_path_inside(in, out)) {
    fprintf(stderr, "esmtrain-example: import-hf: -o %s %s the input %s: the run would be "
            "written into the Hugging Face directory. Nothing was changed: choose an output "
            "directory outside it\n", out, esmt_path_inside(in, out) ? "is or contains" : "is inside",
            in);
    return 1;
  }
  if (cli_run_check(out, "import-hf", NULL, 0)) return 1;
  esmt_context *ctx = make_ctx();
  if (!ctx) return 1;
  cli_signals_defer(); /* the checkpoint is written whole or not at all */
  esmt_model *m = NULL;
  esmt_trainer *t = NULL;
  esmt_trainer_options to = ESMT_TRAINER_OPTIONS_INIT;
  to.run_dir = out;
  esmt_batch_source none = {sizeof none, NULL, no_batches, NULL, NULL, NULL, NULL};
  char saved[4096] = "";
  /* read the input first: a bad one leaves no run directory behind; the
   * trainer takes the run (its checks again, under run.lock) to save */
  esmt_status st = adapter ? esmt_model_import_peft(ctx, in, adapter, &m)
                            : esmt_model_import_hf(ctx, in, &m);
  if (!st) st = esmt_trainer_create(m, &to, &none, &t);
  if (!st) st = esmt_trainer_save(t, saved, sizeof saved);
  if (st) cli_error("import-hf", st);
  else printf("imported %s as %s\n", in, saved);
  esmt_trainer_destroy(t);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return deferred_status("import-hf", st ? 1 : 0,
                         st ? "no checkpoint was written" : "the checkpoint is complete");
}
