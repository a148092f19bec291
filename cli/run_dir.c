/* SPDX-License-Identifier: MIT */
/* Run directories of the CLI (cli.h): one writer at a time, held through a
 * lock file that dies with its process, and no new run written over an
 * existing one. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define LOCK_NAME "run.lock"

static int exists(const char *dir, const char *name) {
  char p[PATH_MAX + 64];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

/* 1 when run_dir holds checkpoints (checkpoints/latest or a step-*
 * directory); *what describes them. */
static int has_checkpoints(const char *run_dir, char *what, size_t cap) {
  char ck[PATH_MAX + 64], latest[128] = "";
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
    for (char *p = latest; *p; p++)
      if (*p < 0x20 || *p > 0x7e) *p = '?';
    snprintf(what, cap, "its checkpoints/latest names %s", latest[0] ? latest : "nothing");
    return 1;
  }
  snprintf(ck, sizeof ck, "%s/checkpoints", run_dir);
  DIR *d = opendir(ck);
  if (!d) return 0;
  struct dirent *de;
  int n = 0;
  while ((de = readdir(d)))
    if (!strncmp(de->d_name, "step-", 5)) n++;
  closedir(d);
  snprintf(what, cap, "%d checkpoint(s) in checkpoints/ (no checkpoints/latest: resume one "
           "with --resume %s/checkpoints/step-N)", n, run_dir);
  return n > 0;
}

/* 1 when dir looks like the checkpoints/ directory of a run. */
static int is_checkpoints_dir(const char *dir) {
  if (exists(dir, "latest")) return 1;
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *de;
  int found = 0;
  while (!found && (de = readdir(d))) found = !strncmp(de->d_name, "step-", 5);
  closedir(d);
  return found;
}

/* The longest existing prefix of `path` that is not a directory ("" when
 * every existing part is one): a run directory cannot be made there. */
static void non_directory_prefix(const char *path, char *out, size_t cap) {
  char p[PATH_MAX];
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

/* A run's lock (run.lock in its directory) covers its checkpoints only
 * while they are a directory inside it: through a symbolic link two runs,
 * each holding its own lock, could write and prune one checkpoints
 * directory at once. So checkpoints/ must not be a link; a run kept on
 * another disk links (or is) the whole run directory, and its lock, whose
 * path resolves through that link, covers everything. 1 after saying so. */
static int shared_checkpoints(const char *run_dir, const char *cmd, FILE *err) {
  char ck[PATH_MAX + 64], target[PATH_MAX];
  snprintf(ck, sizeof ck, "%s/checkpoints", run_dir);
  struct stat sb;
  if (lstat(ck, &sb) != 0 || !S_ISLNK(sb.st_mode)) return 0;
  if (!realpath(ck, target)) snprintf(target, sizeof target, "a path that does not resolve: %s",
                                      strerror(errno));
  if (err)
    fprintf(err, "esmtrain-example: %s: %s is a symbolic link (to %s): a run's checkpoints must "
            "be a directory inside the run, where the run's lock covers them (two runs writing "
            "through one checkpoints directory would prune and overwrite each other's "
            "checkpoints). Nothing was changed: move the checkpoints into %s, or keep the "
            "whole run elsewhere (--out on the other disk, or a link to the run directory)\n",
            cmd, ck, target, run_dir);
  return 1;
}

int cli_run_check(const char *run_dir, const char *cmd, const char *resume, int quiet) {
  char what[PATH_MAX + 256];
  FILE *err = quiet ? NULL : stderr;
#define SAY(...) (err ? fprintf(err, __VA_ARGS__) : 0)
  /* before any data is read or measured: a run that could not save its
   * first checkpoint would only find out after training */
  char file[PATH_MAX];
  non_directory_prefix(run_dir, file, sizeof file);
  if (file[0]) {
    struct stat sb;
    stat(file, &sb);
    const char *kind = S_ISREG(sb.st_mode) ? "a regular file" : S_ISCHR(sb.st_mode) ? "a character device"
                       : S_ISFIFO(sb.st_mode) ? "a FIFO" : S_ISSOCK(sb.st_mode) ? "a socket"
                       : "a special file";
    SAY("esmtrain-example: %s: %s is %s, not a directory: --out names the run's directory "
        "(it is created, with checkpoints/ inside); choose another path\n", cmd, file, kind);
    return 1;
  }
  if (exists(run_dir, "manifest.json")) {
    SAY("esmtrain-example: %s: %s is a dataset (it holds manifest.json), not a run "
        "directory: choose another output directory for the run\n", cmd, run_dir);
    return 1;
  }
  if (exists(run_dir, "state.json")) {
    SAY("esmtrain-example: %s: %s is a checkpoint directory (it holds state.json), "
        "not a run directory: choose another output directory for the run\n", cmd, run_dir);
    return 1;
  }
  if (shared_checkpoints(run_dir, cmd, err)) return 1;
  if (is_checkpoints_dir(run_dir)) {
    SAY("esmtrain-example: %s: %s is the checkpoints directory of a run, not a run directory: "
        "give the run directory (its parent) with --resume latest, or choose another output "
        "directory\n", cmd, run_dir);
    return 1;
  }
  if (!has_checkpoints(run_dir, what, sizeof what)) return 0;
  if (!strcmp(cmd, "import-hf")) {
    SAY("esmtrain-example: import-hf: %s already holds a run (%s); importing there "
        "would make step 0 its latest checkpoint. Nothing was changed: import into a new "
        "directory (-o NEW_DIR), or train from the Hugging Face weights with "
        "`train --init-from hf:DIR --out NEW_DIR`\n", run_dir, what);
    return 1;
  }
  if (resume && (!strcmp(resume, "latest") || cli_path_inside(resume, run_dir))) return 0;
  SAY("esmtrain-example: %s: %s already holds a run (%s); %s would overwrite and "
      "prune its checkpoints. Nothing was changed: continue that run with --resume latest, "
      "start from its weights in a new directory with --init-from %s --out NEW_DIR, or "
      "choose a fresh --out\n", cmd, run_dir, what,
      resume ? "continuing a checkpoint of another run there" : "a new run there", run_dir);
  return 1;
#undef SAY
}

/* mkdir -p */
static int mkdir_parents(const char *dir) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
      *p = '/';
    }
  return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* "pid N\nhost H\nstarted TIME\ncommand ARGS\n" of this process. */
static void describe_self(char *out, size_t cap) {
  char host[256] = "?", ts[32], cmdline[2048] = "";
  gethostname(host, sizeof host - 1);
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
  FILE *f = fopen("/proc/self/cmdline", "r");
  size_t n = f ? fread(cmdline, 1, sizeof cmdline - 1, f) : 0;
  if (f) fclose(f);
  for (size_t i = 0; i + 1 < n; i++)
    if (cmdline[i] == '\0') cmdline[i] = ' ';
  cmdline[n] = '\0';
  snprintf(out, cap, "pid %ld\nhost %s\nstarted %s\ncommand %s\n", (long)getpid(), host, ts,
           cmdline);
}

int cli_lock_record_pid(const char *record, long *pid) {
  *pid = 0;
  const char *line = record;
  while (line && strncmp(line, "pid ", 4) != 0) {
    line = strchr(line, '\n');
    if (line) line++;
  }
  if (!line) return 0;
  const char *p = line + 4, *end = p + strcspn(p, "\n");
  long v = 0;
  if (p == end) return -1;
  for (; p < end; p++) { /* digits only, checked before they can overflow */
    if (*p < '0' || *p > '9' || v > (INT_MAX - (*p - '0')) / 10) return -1;
    v = v * 10 + (*p - '0');
  }
  if (v < 1) return -1;
  *pid = v;
  return 1;
}

/* The holder's record, on one line: "pid 12, host h, started ..., command ...";
 * a pid that is not one is said to be damaged, not passed on. */
static void describe_holder(int fd, char *out, size_t cap) {
  char text[4096];
  ssize_t n = 0;
  /* a holder that has just taken the lock writes its record a moment later */
  for (int tries = 0; tries < 200 && (n = pread(fd, text, sizeof text - 1, 0)) <= 0; tries++) {
    struct timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  if (n <= 0) {
    snprintf(out, cap, "it has not recorded its pid yet");
    return;
  }
  text[n] = '\0';
  long pid;
  size_t k = 0;
  if (cli_lock_record_pid(text, &pid) < 0)
    k = (size_t)snprintf(out, cap, "its record is damaged, its pid is not a process id in "
                         "1..%d: ", INT_MAX);
  for (const char *p = text; *p && k + 3 < cap; p++) {
    if (*p != '\n') out[k++] = *p;
    else if (p[1]) { out[k++] = ','; out[k++] = ' '; }
  }
  out[k] = '\0';
}

int cli_run_lock(const char *run_dir, const char *cmd) {
  if (mkdir_parents(run_dir) != 0) {
    fprintf(stderr, "esmtrain-example: %s: cannot create %s: %s\n", cmd, run_dir, strerror(errno));
    return -1;
  }
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/" LOCK_NAME, run_dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "esmtrain-example: %s: cannot open the lock file %s: %s\n", cmd, path,
            strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EWOULDBLOCK) {
      char who[4096];
      describe_holder(fd, who, sizeof who);
      fprintf(stderr, "esmtrain-example: %s: %s is in use by another esmtrain process (%s). "
              "Only one process may write a run at a time: wait for it to end, stop it "
              "(`kill -TERM PID` saves a checkpoint), or choose another output directory\n",
              cmd, run_dir, who);
      close(fd);
      return -1;
    }
    /* a file system without locks: say so and go on (nothing to compare with) */
    fprintf(stderr, "[warn] %s: cannot lock %s (%s): another process could write this run at "
            "the same time\n", cmd, path, strerror(err));
  }
  char me[4096];
  describe_self(me, sizeof me);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me, strlen(me), 0) < 0)
    fprintf(stderr, "[warn] %s: cannot record this process in %s: %s\n", cmd, path,
            strerror(errno));
  return fd;
}

void cli_run_unlock(int fd) {
  if (fd < 0) return;
  if (ftruncate(fd, 0) != 0) { /* the record goes with the lock; nothing else to do */ }
  close(fd);
}

/* The absolute path of p with symbolic links resolved, also for a path
 * whose last components do not exist yet. */
static int canonical(const char *p, char *out) {
  if (realpath(p, out)) return 0;
  char dir[PATH_MAX], base[PATH_MAX];
  const char *slash = strrchr(p, '/');
  if (!slash) { snprintf(dir, sizeof dir, "."); snprintf(base, sizeof base, "%s", p); }
  else if (slash == p) { snprintf(dir, sizeof dir, "/"); snprintf(base, sizeof base, "%s", p + 1); }
  else { snprintf(dir, sizeof dir, "%.*s", (int)(slash - p), p); snprintf(base, sizeof base, "%s", slash + 1); }
  if (!strcmp(dir, p) || canonical(dir, out) != 0) return -1;
  if (!*base || !strcmp(base, ".")) return 0;
  if (!strcmp(base, "..")) {
    char *s = strrchr(out, '/');
    if (s && s != out) *s = '\0';
    else snprintf(out, PATH_MAX, "/");
    return 0;
  }
  size_t n = strlen(out);
  if (n + 1 + strlen(base) >= PATH_MAX) return -1;
  snprintf(out + n, PATH_MAX - n, "%s%s", out[n - 1] == '/' ? "" : "/", base);
  return 0;
}

int cli_path_inside(const char *inner, const char *outer) {
  char a[PATH_MAX], b[PATH_MAX];
  if (canonical(inner, a) != 0 || canonical(outer, b) != 0) return 0;
  size_t n = strlen(b);
  if (n == 1) return 1; /* everything is inside "/" */
  return !strncmp(a, b, n) && (a[n] == '/' || a[n] == '\0');
}

/* What esmtrain keeps in `dir` that no output may be written into, or
 * NULL: a dataset, a checkpoint, a run's checkpoints/ directory, a run, a
 * Hugging Face model directory. */
/* What `dir` is when esmtrain keeps it, else NULL. */
static const char *data_kind(const char *dir) {
  char ck[PATH_MAX + 64];
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

int cli_path_in_data(const char *path, char *what, size_t cap) {
  char p[PATH_MAX];
  if (canonical(path, p) != 0) return 0;
  for (;;) {
    struct stat sb;
    const char *kind = stat(p, &sb) == 0 && S_ISDIR(sb.st_mode) ? data_kind(p) : NULL;
    if (kind) {
      snprintf(what, cap, "%s (%s)", p, kind);
      return 1;
    }
    char *slash = strrchr(p, '/');
    if (!slash || slash == p) return 0;
    *slash = '\0';
  }
}
