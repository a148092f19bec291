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

/* The files that mark a directory as esmtrain's, and what it then is. */
static const struct {
  const char *name, *what;
} k_marks[] = {
    {"run.lock", "the run directory"},     {"checkpoints/latest", "the run directory"},
    {"state.json", "the checkpoint"},      {"model.safetensors", "the model directory"},
    {"manifest.json", "the dataset"},      {".esmtrain-export", "the exported model"},
};

/* What `dir` is when esmtrain keeps it, else NULL. */
static const char *kept_dir(const char *dir) {
  char p[PATH_MAX + 64];
  for (size_t i = 0; i < sizeof k_marks / sizeof k_marks[0]; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, k_marks[i].name);
    struct stat sb;
    if (lstat(p, &sb) == 0) return k_marks[i].what;
  }
  return NULL;
}

/* The directory `out` would be created in, symbolic links resolved; 1 when
 * it does not exist (creating the file then fails with its own message). */
static int real_parent(const char *out, char *dir) {
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s", out);
  char *slash = strrchr(copy, '/');
  if (!slash) snprintf(copy, sizeof copy, ".");
  else if (slash == copy) copy[1] = '\0';
  else *slash = '\0';
  return realpath(copy, dir) ? 0 : 1;
}

/* 1 when `out` exists and is the file `input` names (a hard link too). */
static int same_file(const char *out, const char *input) {
  struct stat a, b;
  return stat(out, &a) == 0 && stat(input, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

int cli_output_path_check(const char *cmd, const char *out, const char *const *inputs,
                          int n_inputs) {
  for (int i = 0; i < n_inputs; i++) {
    const int same = same_file(out, inputs[i]) || cli_path_inside(inputs[i], out);
    if (!same && !cli_path_inside(out, inputs[i])) continue;
    fprintf(stderr, "esmtrain-example: %s: %s is %s%s, an input of this command, which is "
            "never written over: choose another output\n", cmd, out, same ? "" : "inside ",
            inputs[i]);
    return 1;
  }
  char dir[PATH_MAX];
  if (real_parent(out, dir)) return 0;
  for (;;) { /* the directory, then each one above it */
    const char *what = kept_dir(dir);
    if (what) {
      fprintf(stderr, "esmtrain-example: %s: %s would be written inside %s %s, whose files "
              "esmtrain keeps as they are: choose an output outside it\n", cmd, out, what, dir);
      return 1;
    }
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = '\0';
  }
}
