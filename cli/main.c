/* SPDX-License-Identifier: MIT */
/* esmtrain-example: the command-line driver of libesmtrain. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
  const char *name;
  cli_command_fn fn;
  const char *help;
} k_commands[] = {
    {"probe", cmd_probe, "list backends, devices and CPU features; exit 0 if one is usable"},
    {"train", cmd_train, "train ESM-2 on an ingested dataset: the main job"},
    {"finetune", cmd_finetune, "a task head (LoRA, frozen layers) on a checkpoint from a labelled table"},
    {"launch", cmd_launch, "run N data-parallel ranks of a command on this machine"},
    {"config", cmd_config, "resolve, print and check a configuration; list presets and keys"},
    {"export", cmd_export, "a checkpoint as a Hugging Face directory (and a PEFT adapter)"},
    {"import-hf", cmd_import_hf, "a Hugging Face ESM-2 directory as an esmtrain checkpoint"},
    {"predict", cmd_predict, "a fine-tuned model's predictions for a table or FASTA as CSV"},
    {"embed", cmd_embed, "per-protein and per-residue embeddings of FASTA or a dataset"},
    {"score", cmd_score, "pseudo-perplexity of proteins; masked-marginal scores of variants"},
    {"contacts", cmd_contacts, "residue-residue contact maps of proteins from attention"},
    {"plot", cmd_plot, "loss, perplexity, lr, throughput and memory curves of runs as PNG/SVG"},
    {"watch", cmd_watch, "a live terminal view of a run: progress, loss, speed, GPUs"},
    {"ingest", cmd_ingest, "FASTA(.gz) files into token shards for training"},
    {"plan", cmd_plan, "device memory per tensor class; the policy and micro-batch that fit"},
    {"bench-loader", cmd_bench_loader, "time the batch loader alone; its resident memory"},
    {"bench-adamw", cmd_bench_adamw, "time the AdamW update against memcpy bandwidth"},
    {"bench", cmd_bench, "time training steps on synthetic batches: tokens/s, MFU, memory"},
};
#define N_COMMANDS (sizeof k_commands / sizeof k_commands[0])

void cli_error(const char *what, esmt_status st) {
  fprintf(stderr, "esmtrain-example: %s: %s (%s)\n", what, esmt_last_error(),
          esmt_status_string(st));
}

void cli_log_stderr(void *user, esmt_log_level level, const char *message) {
  (void)user;
  static const char *const names[] = {"debug", "info", "warn", "error", "none"};
  fprintf(stderr, "[%s] %s\n", names[level <= ESMT_LOG_NONE ? level : ESMT_LOG_NONE], message);
}

const char *cli_bytes(uint64_t bytes, char *buf, int cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 4) { v /= 1024.0; u++; }
  snprintf(buf, (size_t)cap, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

static void usage(FILE *f) {
  fprintf(f, "usage: esmtrain-example <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].help);
  fprintf(f, "\nlibesmtrain %s. Run 'esmtrain-example <command> --help' for options.\n",
          esmt_version_string());
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("esmtrain-example (libesmtrain %s)\n", esmt_version_string());
    return 0;
  }
  cli_signals_init();
  /* warnings the library gives outside a context (a version-1 dataset, ...) */
  esmt_set_log_callback(cli_log_stderr, NULL, ESMT_LOG_WARN);
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(argv[1], k_commands[i].name) == 0)
      return cli_stdout_finish(k_commands[i].fn(argc - 2, argv + 2));
  const char *names[N_COMMANDS];
  for (size_t i = 0; i < N_COMMANDS; i++) names[i] = k_commands[i].name;
  const char *near = esmt_suggest(argv[1], names, (int)N_COMMANDS);
  fprintf(stderr, "esmtrain-example: unknown command '%s'%s%s%s\n\n", argv[1],
          near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
  usage(stderr);
  return 2;
}
