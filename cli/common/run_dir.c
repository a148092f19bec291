/* SPDX-License-Identifier: MIT */
/* Run directories of the CLI (cli.h): the library's rules (trainer.h:
 * esmt_run_dir_check, esmt_run_lock_take) with their messages on stderr. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_run_check(const char *run_dir, const char *cmd, const char *resume, int quiet) {
  esmt_status st = esmt_run_dir_check(run_dir, resume);
  if (!st || quiet) return st ? 1 : 0;
  cli_error(cmd, st);
  if (!strcmp(cmd, "import-hf") && strstr(esmt_last_error(), "already holds a run"))
    fprintf(stderr, "esmtrain-example: import-hf: importing there would make step 0 its latest "
            "checkpoint: import into a new directory (-o NEW_DIR), or train from the Hugging "
            "Face weights with `train --init-from hf:DIR --out NEW_DIR`\n");
  return 1;
}

esmt_run_lock *cli_run_lock(const char *run_dir, const char *cmd) {
  esmt_run_lock *lock = NULL;
  esmt_status st = esmt_run_lock_take(run_dir, &lock);
  if (st) cli_error(cmd, st);
  return lock;
}
