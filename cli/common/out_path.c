/* SPDX-License-Identifier: MIT */
/* Where a command may write an output file (cli.h): never into what
 * esmtrain keeps (a run, a checkpoint, a dataset, an exported model) and
 * never onto the command's own inputs, symbolic links resolved. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* 1 when `out` exists and is the file `input` names (a hard link too). */
static int same_file(const char *out, const char *input) {
  struct stat a, b;
  return stat(out, &a) == 0 && stat(input, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

int cli_output_path_check(const char *cmd, const char *out, const char *const *inputs,
                          int n_inputs) {
  for (int i = 0; i < n_inputs; i++) {
    const int same = same_file(out, inputs[i]) || esmt_path_inside(inputs[i], out);
    if (!same && !esmt_path_inside(out, inputs[i])) continue;
    fprintf(stderr, "esmtrain-example: %s: %s is %s%s, an input of this command, which is "
            "never written over: choose another output\n", cmd, out, same ? "" : "inside ",
            inputs[i]);
    return 1;
  }
  char what[PATH_MAX + 64];
  if (!esmt_path_in_data(out, what, sizeof what)) return 0;
  fprintf(stderr, "esmtrain-example: %s: %s would be written inside %s, whose files esmtrain "
          "keeps as they are: choose an output outside it\n", cmd, out, what);
  return 1;
}
