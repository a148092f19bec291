/* SPDX-License-Identifier: MIT */
/* `esmtrain-example finetune`: a task head (and LoRA or frozen layers) on
 * an ESM-2 checkpoint from a labelled table. The flags are shorthands for
 * the finetune.* and train keys; the library reads, splits, trains,
 * scores, keeps the best checkpoint and writes metrics.jsonl
 * (esmt_finetune_create_from_config); this file prints what it does. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static esmt_trainer *volatile g_trainer;

static void on_signal(int sig) {
  if (g_trainer) esmt_trainer_request_stop(g_trainer);
  else _exit(128 + sig); /* nothing trained yet: nothing to save */
}

/* "acc 0.912 macro_f1 0.905" with the figures the task has. */
static void task_figures(const esmt_task_metrics *m, char *out, size_t cap) {
  const struct { const char *name; double v; } f[] = {
      {"accuracy", m->accuracy}, {"macro_f1", m->macro_f1}, {"auroc", m->auroc},
      {"auprc", m->auprc},       {"pearson", m->pearson},   {"spearman", m->spearman},
      {"rmse", m->rmse}};
  out[0] = '\0';
  for (size_t k = 0, at = 0; k < sizeof f / sizeof *f; k++)
    if (!isnan(f[k].v) && at < cap)
      at += (size_t)snprintf(out + at, cap - at, " %s %.4f", f[k].name, f[k].v);
}

static void on_metrics(void *user, const esmt_train_metrics *t, const esmt_eval_metrics *e) {
  (void)user;
  if (t) printf("step %lld loss %.4f lr %.2e | %.0f tok/s\n", (long long)t->step, t->loss, t->lr,
                t->tokens_per_s);
  if (e && e->task) {
    char fig[256];
    task_figures(e->task, fig, sizeof fig);
    printf("eval step %lld: loss %.4f%s over %llu\n", (long long)e->step, e->loss, fig,
           (unsigned long long)e->selected);
  }
  fflush(stdout);
}

static void usage(FILE *f) {
  fprintf(f, "usage: esmtrain-example finetune --data TABLE --task TASK --init-from CKPT|hf:DIR "
             "[options]\n");
  cli_config_usage(f);
  fprintf(f,
      "  --data TABLE          labelled CSV/TSV (docs/finetune.md)\n"
      "  --task seq-class|multilabel|regression|residue-class\n"
      "  --seq-col NAME --id-col NAME --label-col A[,B...] --label-sep S\n"
      "  --split-col NAME | --valid-fraction F --test-fraction F --seed S | --clusters TSV\n"
      "  --init-from CKPT      the pre-trained encoder: a checkpoint or hf:DIR (its shape is\n"
      "                        model.*: --model NAME or --layers/--width/--heads)\n"
      "  --model NAME --layers L --width D --heads H --max-len N\n"
      "  --pooling mean|cls --freeze none|encoder|N --head-lr-scale S\n"
      "  --freeze-encoder-steps N  the first N updates train the head alone (a warm-up)\n"
      "  --lora-rank R --lora-alpha A --lora-dropout P --lora-targets q,k,v,o,up,down\n"
      "  --class-weights auto|W1,W2,...  seq-class loss weights (auto: balanced)\n"
      "  --best-metric NAME --patience N --batch-rows N\n"
      "  --out DIR --steps N --lr X --warmup N --schedule esm2|cosine|constant\n"
      "  --eval-every N --save-every N --keep N --log-every N --threads N --backend NAME\n"
      "  --resume latest|DIR   continue a run exactly (same options)\n");
}

static const struct { const char *flag, *key, *key2; } k_flags[] = {
    {"--data", "finetune.data", NULL},           {"--task", "finetune.task", NULL},
    {"--seq-col", "finetune.seq_col", NULL},     {"--id-col", "finetune.id_col", NULL},
    {"--label-col", "finetune.label_cols", NULL}, {"--label-sep", "finetune.label_sep", NULL},
    {"--split-col", "finetune.split_col", NULL}, {"--clusters", "finetune.clusters", NULL},
    {"--valid-fraction", "finetune.valid_fraction", NULL},
    {"--test-fraction", "finetune.test_fraction", NULL},
    {"--batch-rows", "finetune.batch_rows", NULL}, {"--pooling", "finetune.pooling", NULL},
    {"--freeze", "finetune.freeze", NULL},       {"--lora-rank", "finetune.lora_rank", NULL},
    {"--lora-alpha", "finetune.lora_alpha", NULL}, {"--lora-targets", "finetune.lora_targets", NULL},
    {"--lora-dropout", "finetune.lora_dropout", NULL},
    {"--head-lr-scale", "finetune.head_lr_scale", NULL},
    {"--freeze-encoder-steps", "finetune.freeze_encoder_steps", NULL},
    {"--class-weights", "finetune.class_weights", NULL},
    {"--best-metric", "finetune.best_metric", NULL}, {"--patience", "finetune.patience", NULL},
    {"--out", "train.out_dir", NULL},            {"--model", "model.preset", NULL},
    {"--layers", "model.num_layers", NULL},      {"--width", "model.hidden_size", NULL},
    {"--heads", "model.num_heads", NULL},        {"--max-len", "data.max_len", NULL},
    {"--steps", "train.max_steps", NULL},        {"--lr", "optimizer.lr", NULL},
    {"--warmup", "schedule.warmup_steps", NULL}, {"--schedule", "schedule.kind", NULL},
    {"--eval-every", "train.eval_every", NULL},  {"--save-every", "train.save_every", NULL},
    {"--keep", "train.keep_last", NULL},         {"--log-every", "train.log_every", NULL},
    {"--threads", "backend.threads", NULL},      {"--backend", "backend.name", NULL},
    {"--seed", "train.seed", "data.seed"},
};

static int parse_args(int argc, char **argv, cli_config *cc, const char **resume,
                      const char **init_from) {
  const size_t n = sizeof k_flags / sizeof k_flags[0];
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
    const int r = cli_config_arg(cc, "finetune", argc, argv, &i);
    if (r < 0) return 2;
    if (r > 0) continue;
    const char **own = NULL;
    size_t k = n;
    if (cli_flag_value("--resume", argc, argv, &i, &v)) own = resume;
    else if (cli_flag_value("--init-from", argc, argv, &i, &v)) own = init_from;
    else for (k = 0; k < n && !cli_flag_value(k_flags[k].flag, argc, argv, &i, &v); k++) {}
    if (!own && k == n) {
      fprintf(stderr, "esmtrain-example: finetune: unknown option '%s'%s (try --help)\n", a,
              cli_option_hint(a, usage));
      return 2;
    }
    if (!v) {
      fprintf(stderr, "esmtrain-example: finetune: %s needs a value (try --help)\n", a);
      return 2;
    }
    if (own) { *own = v; continue; }
    esmt_status st = esmt_config_set(cc->cfg, k_flags[k].key, v);
    if (!st && k_flags[k].key2) st = esmt_config_set(cc->cfg, k_flags[k].key2, v);
    if (!st && !strcmp(a, "--width")) { /* the FFN follows the width */
      char ffn[32];
      snprintf(ffn, sizeof ffn, "%lld", 4 * (long long)atoll(v));
      st = esmt_config_set(cc->cfg, "model.ffn_size", ffn);
    }
    if (st) { cli_error("finetune", st); return 2; }
  }
  return -1;
}

int cmd_finetune(int argc, char **argv) {
  const char *resume = NULL, *init_from = NULL;
  cli_signals_catch(on_signal);
  cli_config cc;
  if (cli_config_init(&cc, "finetune")) return 1;
  /* fine-tuning defaults where pre-training's do not fit */
  esmt_config_set(cc.cfg, "optimizer.lr", "1e-4");
  esmt_config_set(cc.cfg, "schedule.kind", "constant");
  esmt_config_set(cc.cfg, "schedule.warmup_steps", "50");
  esmt_config_set(cc.cfg, "train.max_steps", "1000");
  esmt_config_set(cc.cfg, "train.out_dir", "runs/finetune");
  int rc = parse_args(argc, argv, &cc, &resume, &init_from);
  if (rc >= 0) { cli_config_free(&cc); return rc; }
  char *yaml = NULL;
  esmt_config_to_yaml(cc.cfg, &yaml);
  if (cc.print_config) {
    printf("%s", yaml ? yaml : "");
    free(yaml);
    cli_config_free(&cc);
    return 0;
  }
  const char *out = cli_cfg_str(cc.cfg, "train.out_dir");
  esmt_context *ctx = NULL;
  esmt_trainer *tr = NULL;
  esmt_status st = ESMT_OK;
  rc = 1;
  if (!*cli_cfg_str(cc.cfg, "finetune.data")) {
    fprintf(stderr, "esmtrain-example: finetune: --data TABLE (finetune.data) is required "
                    "(try --help)\n");
    rc = 2;
    goto done;
  }
  if (!init_from && !resume)
    fprintf(stderr, "[warn] finetune: no --init-from: the encoder starts from random weights\n");
  if (cli_run_check(out, "finetune", resume, 0)) goto done;
  esmt_context_options co = ESMT_CONTEXT_OPTIONS_INIT;
  const char *backend = cli_cfg_str(cc.cfg, "backend.name");
  co.backend = *backend ? backend : NULL;
  co.num_threads = (int)cli_cfg_int(cc.cfg, "backend.threads");
  co.log = cli_log_stderr;
  co.log_level = ESMT_LOG_WARN;
  if ((st = esmt_context_create(&co, &ctx))) goto fail;
  esmt_trainer_options base = ESMT_TRAINER_OPTIONS_INIT;
  base.metrics = on_metrics;
  base.config_text = yaml;
  if ((st = esmt_finetune_create_from_config(ctx, cc.cfg, &base, &tr))) goto fail;
  if (resume) st = esmt_trainer_resume(tr, strcmp(resume, "latest") ? resume : out);
  else if (init_from) st = esmt_trainer_init_from(tr, init_from);
  if (st || (st = esmt_trainer_take_run(tr))) goto fail;
  const esmt_labelled *data = esmt_trainer_labelled(tr);
  char labels[4096] = "";
  esmt_labelled_label_json(data, labels, sizeof labels);
  printf("fine-tuning %s (%d outputs: %s) on %llu proteins, validation %llu, test %llu; "
         "run %s\n", cli_cfg_str(cc.cfg, "finetune.task"), esmt_labelled_num_labels(data),
         labels, (unsigned long long)esmt_labelled_count(data, ESMT_LABELLED_TRAIN),
         (unsigned long long)esmt_labelled_count(data, ESMT_LABELLED_VALID),
         (unsigned long long)esmt_labelled_count(data, ESMT_LABELLED_TEST), out);
  fflush(stdout);
  g_trainer = tr;
  st = esmt_trainer_run(tr);
  g_trainer = NULL;
  if (st == ESMT_ERR_CANCELLED && cli_signal_caught()) {
    fprintf(stderr, "esmtrain-example: finetune: interrupted at step %lld: checkpoint saved in "
            "%s/checkpoints; continue with --resume latest\n",
            (long long)esmt_trainer_step_count(tr), out);
    rc = 128 + cli_signal_caught();
    goto done;
  }
  if (st) goto fail;
  printf("checkpoints in %s/checkpoints (latest and best by %s kept)\n", out,
         cli_cfg_str(cc.cfg, "finetune.best_metric"));
  rc = 0;
  goto done;
fail:
  cli_error("finetune", st);
done:
  esmt_trainer_destroy(tr);
  esmt_context_destroy(ctx);
  cli_config_free(&cc);
  free(yaml);
  return rc;
}
