/* SPDX-License-Identifier: MIT */
/* esmtrain-example: shared declarations of the subcommands. */
#ifndef ESMT_CLI_H
#define ESMT_CLI_H

#include <stdio.h>

#include "esmtrain/esmtrain.h"

/* Each subcommand gets argv after the subcommand name; returns the exit
 * status of the process. */
typedef int (*cli_command_fn)(int argc, char **argv);

int cmd_probe(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_finetune(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import_hf(int argc, char **argv);
int cmd_bench_adamw(int argc, char **argv);
int cmd_bench_loader(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_contacts(int argc, char **argv);

/* Print "esmtrain-example: <what>: <last error>" to stderr. */
void cli_error(const char *what, esmt_status st);

/* A log callback that prints "[level] message" to stderr. */
void cli_log_stderr(void *user, esmt_log_level level, const char *message);

/* Every numeric command-line value goes through these: the whole text must
 * be a number within [min, max] (no overflow, no trailing characters, no
 * underflow to 0). Return 1, or 0 after printing "CMD: FLAG 'TEXT': ..."
 * with the range. */
int cli_int_arg(const char *cmd, const char *flag, const char *text, long long min,
                long long max, long long *out);
int cli_double_arg(const char *cmd, const char *flag, const char *text, double min, double max,
                   double *out);

/* Text read from a file or a plugin (an id, a name, a field), escaped for
 * printing with esmt_escape_text: control characters as "\x1b". The
 * result lives in one of 4 rotating buffers (1 KiB; longer text is cut),
 * so that one printf may take up to 4 of them. */
const char *cli_esc(const char *text);

/* After "unknown option 'ARG'": "; did you mean '--near'?" when the
 * command's help (printed by `usage`) names an option near ARG (its
 * "=VALUE" aside), else "". Static storage (cli_suggest.c). */
const char *cli_option_hint(const char *arg, void (*usage)(FILE *f));

/* Format a byte count as "7.5 GiB". */
const char *cli_bytes(uint64_t bytes, char *buf, int cap);

/* ---- Signals and standard output (cli_signals.c) ---- */

/* For every command: SIGPIPE and SIGXFSZ ignored, so that a write to a
 * closed pipe or past the file size limit fails with EPIPE/EFBIG (and is
 * reported) instead of killing the process without a word. */
void cli_signals_init(void);

/* Catch SIGINT, SIGTERM, SIGHUP, SIGPIPE and SIGXFSZ: the first is
 * remembered (cli_signal_caught) and `hook` (may be NULL; must be
 * async-signal-safe) runs in the handler with its number. */
void cli_signals_catch(void (*hook)(int sig));
void cli_signals_set_hook(void (*hook)(int sig));
int cli_signal_caught(void);

/* For a short write that must finish or be undone whole: block SIGINT,
 * SIGTERM and SIGHUP for the rest of the command; cli_signals_deferred()
 * tells which of them arrived meanwhile (0: none). */
void cli_signals_defer(void);
int cli_signals_deferred(void);

/* "SIGHUP (the terminal or session closed)" and the like. */
const char *cli_signal_name(int sig);

/* Flush standard output at the end of a command: a failed write (EFBIG,
 * ENOSPC) is reported and turns a status of 0 into 1; a reader that went
 * away (EPIPE, `| head`) ends the process quietly by SIGPIPE, as coreutils
 * do. */
int cli_stdout_finish(int rc);

/* ---- Run directories (run_dir.c) ---- */

/* Whether `cmd` may write a run into run_dir (esmt_run_dir_check): 0, or
 * 1 after printing (unless quiet) why not and what to do instead. */
int cli_run_check(const char *run_dir, const char *cmd, const char *resume, int quiet);

/* run_dir/run.lock held for this process (esmt_run_lock_take), or NULL
 * after printing why not (held by another process: its record). Released
 * with esmt_run_lock_release. */
esmt_run_lock *cli_run_lock(const char *run_dir, const char *cmd);

/* ---- Output files (out_path.c) ---- */

/* Whether `cmd` may write the file `out`: not `inputs[i]` (nor a hard link
 * to it), nor inside one of them, nor inside (after symbolic links, of the
 * path or any directory above it) a run directory, a checkpoint, a model
 * directory, a dataset or an exported model. Returns 0, or 1 after
 * printing why. Create it then with esmt_output_file_begin. */
int cli_output_path_check(const char *cmd, const char *out, const char *const *inputs,
                          int n_inputs);

/* ---- Trained models for inference (cli_model.c) ---- */

/* 1 when `source` is a Hugging Face ESM-2 directory (config.json and
 * weights), 0 when it is taken for an esmtrain checkpoint or run. */
int cli_model_is_hf(const char *source);

/* Open `source` (HF directory, run, checkpoint) on `backend` (NULL: the
 * probe's choice) with `threads` CPU threads (0: all). Returns 0, or 1
 * after printing "esmtrain-example: CMD: model SOURCE: why". */
int cli_model_open(const char *cmd, const char *source, const char *backend, int threads,
                   esmt_context **ctx, esmt_model **model);

/* ---- Configuration flags shared by `config` and `train` (cli_config.c) ---- */

typedef struct cli_config {
  esmt_config *cfg;     /* defaults, then each flag applied in order */
  int print_config;     /* --print-config seen */
  int validate;         /* --validate seen */
  int list_presets;     /* --list-presets seen */
  int list_keys;        /* --keys seen */
} cli_config;

/* Start from the defaults. Returns 0, or 1 after printing the error. */
int cli_config_init(cli_config *cc, const char *cmd);
void cli_config_free(cli_config *cc);

/* If argv[*i] is a configuration flag (--config FILE, --preset NAME,
 * --set key=value, each also as --flag=VALUE; --print-config, --validate,
 * --list-presets, --keys), apply it and move *i past its value. Returns 1
 * when consumed, 0 when argv[*i] is not one of them, -1 after printing
 * "esmtrain-example: CMD: ..." to stderr (exit with status 2). */
int cli_config_arg(cli_config *cc, const char *cmd, int argc, char **argv, int *i);

/* Help lines of those flags. */
void cli_config_usage(FILE *f);

/* "--flag VALUE" or "--flag=VALUE" at argv[*i]: 1 (moving *i past the value;
 * *value NULL when it is missing), else 0. */
int cli_flag_value(const char *flag, int argc, char **argv, int *i, const char **value);

/* A key's value for the CLI's own use. A key the schema lacks, or read as
 * another type, is a bug in esmtrain-example: it is reported ("internal
 * error", the key, the closest real one) and the process ends with status
 * 70 (EX_SOFTWARE) instead of reading a typo as 0 or "". */
int64_t cli_cfg_int(const esmt_config *c, const char *key);
const char *cli_cfg_str(const esmt_config *c, const char *key);

/* "name  description" of every preset cc's configuration sees (cc may be NULL). */
void cli_config_print_presets(const cli_config *cc, FILE *f);

/* Every key: type, default, allowed values, meaning. */
void cli_config_print_keys(FILE *f);

/* esmt_config_validate, then the memory planner's verdict for the configured
 * device budget, printed to `out`. Returns the exit status: 0 valid, 2
 * invalid (error on stderr), 3 it does not fit in memory. */
int cli_config_check(const cli_config *cc, const char *cmd, FILE *out);
/* The memory plan of a valid configuration (esmt_config_plan_request on
 * the backend the run would get), printed; 0 fits, 3 does not, 2 error. */
int cli_config_plan(const esmt_config *c, const char *cmd, FILE *out);

#endif
