/* SPDX-License-Identifier: MIT */
/* Run directories (trainer.h): which directories a run may be written
 * into. A run directory holds checkpoints/ (`latest` and step-NNNNNNNN
 * directories, checkpoint.h), the metrics files and run.lock; a new run is
 * never written over an existing one, only that run's own checkpoint may
 * continue it. The same rules serve the trainer and every command. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h" /* the run directories of trainer.h */
#include "checkpoint.h"
#include "path_inside.h"
#include "run_dir.h"

#define PATH_CAP 4096

static int exists(const char *dir, const char *name) {
  char p[PATH_CAP + 64];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

/* The number of step-* entries in dir; -1 when it cannot be read. */
static int count_steps(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  struct dirent *de;
  int n = 0;
  while ((de = readdir(d)))
    if (!strncmp(de->d_name, "step-", 5)) n++;
  closedir(d);
  return n;
}

/* 1 when dir looks like the checkpoints/ directory of a run. */
static int is_checkpoints_dir(const char *dir) {
  return exists(dir, "latest") || count_steps(dir) > 0;
}

/* 1 when run_dir holds checkpoints (checkpoints/latest or a step-*
 * directory); `what` describes them. */
static int has_checkpoints(const char *run_dir, char *what, size_t cap) {
  char ck[PATH_CAP + 64], latest[128] = "";
  snprintf(ck, sizeof ck, "%s/checkpoints/latest", run_dir);
  /* O_NONBLOCK: a FIFO put there must not block the check (it is only
   * described here; resuming refuses it with its kind) */
  int fd = open(ck, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  struct stat sb;
  if (fd >= 0 && fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
    close(fd);
    snprintf(what, cap, "it has a checkpoints/latest that is not a regular file");
    return 1;
  }
  if (fd >= 0) {
    ssize_t n = read(fd, latest, sizeof latest - 1);
    close(fd);
    latest[n > 0 ? n : 0] = '\0';
    latest[strcspn(latest, "\r\n")] = '\0';
    snprintf(what, cap, "its checkpoints/latest names %s", latest[0] ? latest : "nothing");
    return 1;
  }
  snprintf(ck, sizeof ck, "%s/checkpoints", run_dir);
  const int n = count_steps(ck);
  snprintf(what, cap, "%d checkpoint(s) in checkpoints/ (no checkpoints/latest: resume one "
           "by its path, %s/checkpoints/step-N)", n, run_dir);
  return n > 0;
}

/* The longest existing prefix of `path` that is not a directory ("" when
 * every existing part is one): a run directory cannot be made there. */
static void non_directory_prefix(const char *path, char *out, size_t cap) {
  char p[PATH_CAP];
  out[0] = '\0';
  snprintf(p, sizeof p, "%s", path);
  for (char *q = p + 1;; q++) {
    if (*q == '/' || *q == '\0') {
      const char c = *q;
      *q = '\0';
      struct stat sb;
      if (stat(p, &sb) != 0) return; /* the rest does not exist yet */
      if (!S_ISDIR(sb.st_mode)) {
        snprintf(out, cap, "%s", p);
        return;
      }
      *q = c;
      if (!c) return;
    }
  }
}

static const char *file_kind(mode_t m) {
  return S_ISREG(m) ? "a regular file" : S_ISCHR(m) ? "a character device"
         : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : "a special file";
}

/* A run's lock (run.lock in its directory) covers its checkpoints only
 * while they are a directory inside it: through a symbolic link two runs,
 * each holding its own lock, could write and prune one checkpoints
 * directory at once. So checkpoints/ must not be a link; a run kept on
 * another disk links (or is) the whole run directory, and its lock, whose
 * path resolves through that link, covers everything. */
static esmt_status shared_checkpoints(const char *fn, const char *run_dir) {
  char ck[PATH_CAP + 64], target[PATH_CAP];
  snprintf(ck, sizeof ck, "%s/checkpoints", run_dir);
  struct stat sb;
  if (lstat(ck, &sb) != 0 || !S_ISLNK(sb.st_mode)) return ESMT_OK;
  if (!realpath(ck, target))
    snprintf(target, sizeof target, "a path that does not resolve: %s", strerror(errno));
  return esmt_fail(ESMT_ERR_STATE, "%s: %s is a symbolic link (to %s): a run's checkpoints must "
                   "be a directory inside the run, where the run's lock covers them (two runs "
                   "writing through one checkpoints directory would prune and overwrite each "
                   "other's checkpoints). Nothing was changed: move the checkpoints into %s, or "
                   "keep the whole run elsewhere (--out on the other disk, or a link to the run "
                   "directory)", fn, ck, target, run_dir);
}

esmt_status esmt_run_dir_inspect(const char *fn, const char *run_dir, int *holds_run, char *what,
                                 size_t cap) {
  *holds_run = 0;
  what[0] = '\0';
  char file[PATH_CAP];
  non_directory_prefix(run_dir, file, sizeof file);
  if (file[0]) {
    struct stat sb;
    const char *kind = stat(file, &sb) == 0 ? file_kind(sb.st_mode) : "a special file";
    return esmt_fail(ESMT_ERR_STATE, "%s: %s is %s, not a directory: --out names the run's "
                     "directory (run_dir; it is created, with checkpoints/ inside); choose another "
                     "path", fn, file, kind);
  }
  if (exists(run_dir, "manifest.json"))
    return esmt_fail(ESMT_ERR_STATE, "%s: %s is a dataset (it holds manifest.json), not a run "
                     "directory: choose another output directory for the run", fn, run_dir);
  if (exists(run_dir, "state.json"))
    return esmt_fail(ESMT_ERR_STATE, "%s: %s is a checkpoint directory (it holds state.json), "
                     "not a run directory: choose another output directory for the run", fn,
                     run_dir);
  esmt_status st = shared_checkpoints(fn, run_dir);
  if (st) return st;
  if (is_checkpoints_dir(run_dir))
    return esmt_fail(ESMT_ERR_STATE, "%s: %s is the checkpoints directory of a run, not a run "
                     "directory: give the run directory (its parent) with --resume latest, or "
                     "choose another output directory", fn, run_dir);
  *holds_run = has_checkpoints(run_dir, what, cap);
  return ESMT_OK;
}

esmt_status esmt_run_dir_refuse(const char *fn, const char *run_dir, const char *what,
                                const char *resume) {
  return esmt_fail(ESMT_ERR_STATE, "%s: %s already holds a run (%s); %s would overwrite and "
                   "prune its checkpoints. Nothing was changed: continue that run with --resume "
                   "latest (esmt_trainer_resume), start from its weights in a new directory with "
                   "--init-from %s --out NEW_DIR (esmt_trainer_init_from), or choose a fresh "
                   "--out (run_dir)", fn, run_dir, what,
                   resume ? "continuing a checkpoint of another run there" : "a new run there",
                   run_dir);
}

esmt_status esmt_run_dir_check(const char *run_dir, const char *resume) {
  const char *fn = "esmt_run_dir_check";
  ESMT_CHECK_ARG(run_dir && *run_dir, fn, "run_dir must be a path");
  char what[PATH_CAP + 256];
  int holds_run = 0;
  esmt_status st = esmt_run_dir_inspect(fn, run_dir, &holds_run, what, sizeof what);
  if (st || !holds_run) return st;
  if (resume && (!strcmp(resume, "latest") || esmt_path_inside(resume, run_dir))) return ESMT_OK;
  if (!resume && (st = esmt_run_lock_check_free(fn, run_dir))) return st; /* who writes it */
  return esmt_run_dir_refuse(fn, run_dir, what, resume);
}

/* What `dir` is when esmtrain keeps it, else NULL. */
static const char *data_kind(const char *dir) {
  char ck[PATH_CAP + 64];
  snprintf(ck, sizeof ck, "%s/checkpoints", dir);
  if (exists(dir, "manifest.json")) return "a dataset";
  if (exists(dir, "state.json")) return "a checkpoint";
  if (is_checkpoints_dir(dir)) return "the checkpoints directory of a run";
  if (is_checkpoints_dir(ck)) return "a run";
  if (exists(dir, ".esmtrain-export")) return "an exported model";
  if (exists(dir, "model.safetensors") || exists(dir, "model.safetensors.index.json"))
    return "a model directory";
  return NULL;
}

int esmt_path_in_data(const char *path, char *what, size_t cap) {
  char p[PATH_CAP];
  if (!path || esmt_path_canonical(path, p, sizeof p) != 0) return 0;
  for (;;) {
    struct stat sb;
    const char *kind = stat(p, &sb) == 0 && S_ISDIR(sb.st_mode) ? data_kind(p) : NULL;
    if (kind) {
      if (what && cap) snprintf(what, cap, "%s (%s)", p, kind);
      return 1;
    }
    char *slash = strrchr(p, '/');
    if (!slash || slash == p) return 0;
    *slash = '\0';
  }
}
