/* SPDX-License-Identifier: MIT */
/* Who writes a run, for `watch` (watch_screen.h): RUN/run.lock's record,
 * checked against the processes of this machine. */
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "watch_screen.h"

/* The pid of a record's "pid N" line `line` (esmt_run_lock_record_pid: a whole
 * decimal number a pid_t can hold, so never truncated to another process,
 * 4294967297 to init), else 0 with the reason in `damaged`. */
static long parse_pid(const char *line, char *damaged, size_t cap) {
  long pid = 0;
  if (esmt_run_lock_record_pid(line, &pid) > 0) return pid;
  const char *text = line + 4;
  char shown[32];
  size_t k = 0;
  for (const char *p = text; *p && k + 1 < sizeof shown; p++)
    shown[k++] = isprint((unsigned char)*p) ? *p : '?';
  shown[k] = '\0';
  snprintf(damaged, cap, "its pid '%s%s' is not a process id", shown, text[k] ? "..." : "");
  return 0;
}

/* Whether process pid has the file `lock` open: 1 yes, 0 no, -1 cannot
 * tell (another user's process, or no /proc). */
static int has_open(long pid, const struct stat *lock) {
  char dir[64], fd_path[128];
  snprintf(dir, sizeof dir, "/proc/%ld/fd", pid);
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT && access("/proc/self/fd", F_OK) == 0 ? 0 : -1;
  int found = 0;
  struct dirent *de;
  while (!found && (de = readdir(d))) {
    struct stat sb;
    snprintf(fd_path, sizeof fd_path, "%s/%s", dir, de->d_name);
    found = de->d_name[0] != '.' && stat(fd_path, &sb) == 0 && sb.st_dev == lock->st_dev &&
            sb.st_ino == lock->st_ino;
  }
  closedir(d);
  return found;
}

/* Whether the writer recorded, pid on this machine, is running. */
static int writer_running(watch_run_state *st, const struct stat *lock) {
  if (kill((pid_t)st->pid, 0) != 0 && errno != EPERM) return 0; /* ESRCH: no such process */
  if (has_open(st->pid, lock) != 0) return 1;
  snprintf(st->gone_why, sizeof st->gone_why,
           "is another process now: it does not hold run.lock");
  return 0;
}

void watch_run_state_read(const char *run_dir, watch_run_state *st) {
  memset(st, 0, sizeof *st);
  char path[4096], text[4096];
  snprintf(path, sizeof path, "%s/run.lock", run_dir);
  /* never blocks: a FIFO put there is not read */
  const int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat sb;
  const int regular = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
  const ssize_t n = regular ? read(fd, text, sizeof text - 1) : -1;
  close(fd);
  text[n > 0 ? n : 0] = '\0';
  for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    if (!strncmp(l, "pid ", 4)) st->pid = parse_pid(l, st->damaged, sizeof st->damaged);
    else if (!strncmp(l, "host ", 5)) snprintf(st->host, sizeof st->host, "%s", l + 5);
    else if (!strncmp(l, "started ", 8)) snprintf(st->started, sizeof st->started, "%s", l + 8);
  }
  if (st->pid <= 0) return;
  char me[256] = "";
  gethostname(me, sizeof me - 1);
  st->other_host = st->host[0] && strcmp(st->host, me) != 0;
  /* a pid on another machine cannot be checked from here: taken as running */
  st->running = st->other_host || writer_running(st, &sb);
}
