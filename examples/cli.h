/* esmtrain-example: shared declarations of the subcommands. */
#ifndef ESMT_CLI_H
#define ESMT_CLI_H

#include "esmtrain/esmtrain.h"

/* Each subcommand gets argv after the subcommand name; returns the exit
 * status of the process. */
typedef int (*cli_command_fn)(int argc, char **argv);

int cmd_probe(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import_hf(int argc, char **argv);
int cmd_bench_adamw(int argc, char **argv);
int cmd_bench_loader(int argc, char **argv);

/* Print "esmtrain-example: <what>: <last error>" to stderr. */
void cli_error(const char *what, esmt_status st);

/* A log callback that prints "[level] message" to stderr. */
void cli_log_stderr(void *user, esmt_log_level level, const char *message);

/* Format a byte count as "7.5 GiB". */
const char *cli_bytes(uint64_t bytes, char *buf, int cap);

#endif
