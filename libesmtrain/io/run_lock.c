/* SPDX-License-Identifier: MIT */
/* run.lock (trainer.h): one writer per run directory. The lock is an
 * flock(2) on DIR/run.lock, so it dies with its process: a lock file left
 * by a process that ended is stale and simply taken again. The holder
 * records itself in the file ("pid N\nhost H\nstarted T\ncommand ARGS\n")
 * so that a refused writer can name it. */
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

#include "esmtrain/esmtrain.h" /* the run directories of trainer.h */
#include "fs_util.h"
#include "run_dir.h"

#define LOCK_NAME "run.lock"
#define PATH_CAP 4096

struct esmt_run_lock {
  int fd;
  char dir[PATH_CAP];
  char path[PATH_CAP + 16];
  char created[PATH_CAP]; /* topmost directory made for dir ("" when it existed) */
};

/* This process's record. */
static void describe_self(char *out, size_t cap) {
  char host[256] = "?", ts[32], cmdline[2048] = "";
  gethostname(host, sizeof host - 1);
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
  FILE *f = fopen("/proc/self/cmdline", "re");
  size_t n = f ? fread(cmdline, 1, sizeof cmdline - 1, f) : 0;
  if (f) fclose(f);
  for (size_t i = 0; i + 1 < n; i++)
    if (cmdline[i] == '\0') cmdline[i] = ' ';
  cmdline[n] = '\0';
  snprintf(out, cap, "pid %ld\nhost %s\nstarted %s\ncommand %s\n", (long)getpid(), host, ts,
           cmdline);
}

int esmt_run_lock_record_pid(const char *record, long *pid) {
  if (!pid) return -1;
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

/* The holder's record on one line: "pid 12, host h, started ..., command
 * ..."; a pid that is not one is said to be damaged, not passed on. */
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
  if (esmt_run_lock_record_pid(text, &pid) < 0)
    k = (size_t)snprintf(out, cap, "its record is damaged, its pid is not a process id in "
                         "1..%d: ", INT_MAX);
  for (const char *p = text; *p && k + 3 < cap; p++) {
    if (*p != '\n') out[k++] = *p;
    else if (p[1]) { out[k++] = ','; out[k++] = ' '; }
  }
  out[k] = '\0';
}

/* 1 when fd is still the file at path (not one unlinked by a holder that
 * released an empty run directory meanwhile). */
static int still_linked(int fd, const char *path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static esmt_status in_use(const char *fn, const char *dir, const char *who) {
  return esmt_fail(ESMT_ERR_STATE, "%s: %s is in use by another esmtrain process (%s). Only "
                   "one process may write a run at a time: wait for it to end, stop it (`kill "
                   "-TERM PID` saves a checkpoint), or choose another output directory", fn, dir,
                   who);
}

esmt_status esmt_run_lock_check_free(const char *fn, const char *dir) {
  char path[PATH_CAP + 16];
  snprintf(path, sizeof path, "%s/run.lock", dir);
  /* read-only and without creating: nothing in the directory changes */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return ESMT_OK;
  struct stat sb;
  esmt_status st = ESMT_OK;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && flock(fd, LOCK_SH | LOCK_NB) != 0 &&
      errno == EWOULDBLOCK) {
    char who[4096];
    describe_holder(fd, who, sizeof who);
    st = in_use(fn, dir, who);
  }
  close(fd); /* also drops the shared lock when it was granted */
  return st;
}

static esmt_status take(esmt_run_lock *lk, const char *fn) {
  for (int attempt = 0; attempt < 8; attempt++) {
    char made[PATH_CAP];
    esmt_status st = esmt_mkdir_p_created(lk->dir, made, sizeof made);
    if (st) return esmt_fail_prefix(st, "%s: ", fn);
    if (!lk->created[0]) snprintf(lk->created, sizeof lk->created, "%s", made);
    /* O_NOFOLLOW: a link planted as run.lock is not followed into a file
     * this process did not create */
    int fd = open(lk->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0)
      return esmt_fail(ESMT_ERR_IO, "%s: cannot open the lock file %s: %s", fn, lk->path,
                       strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
      close(fd);
      return esmt_fail(ESMT_ERR_IO, "%s: the lock file %s is not a regular file; nothing was "
                       "changed: remove it if it is not needed", fn, lk->path);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        char who[4096];
        describe_holder(fd, who, sizeof who);
        close(fd);
        return in_use(fn, lk->dir, who);
      }
      /* a file system without locks: nothing to compare with, go on */
      esmt_log(ESMT_LOG_WARN, "%s: cannot lock %s (%s): another process could write this run "
               "at the same time", fn, lk->path, strerror(err));
    }
    if (!still_linked(fd, lk->path)) { /* released and removed meanwhile: again */
      close(fd);
      continue;
    }
    char me[4096];
    describe_self(me, sizeof me);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, me, strlen(me), 0) < 0)
      esmt_log(ESMT_LOG_WARN, "%s: cannot record this process in %s: %s", fn, lk->path,
               strerror(errno));
    lk->fd = fd;
    return ESMT_OK;
  }
  return esmt_fail(ESMT_ERR_IO, "%s: %s keeps disappearing while it is being locked", fn,
                   lk->path);
}

esmt_status esmt_run_lock_take(const char *dir, esmt_run_lock **out) {
  const char *fn = "esmt_run_lock_take";
  ESMT_CHECK_ARG(out, fn, "out is NULL");
  *out = NULL;
  ESMT_CHECK_ARG(dir && *dir, fn, "dir must be a path");
  esmt_run_lock *lk = calloc(1, sizeof *lk);
  if (!lk) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  lk->fd = -1;
  if (strlen(dir) >= sizeof lk->dir) {
    free(lk);
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: the path is too long: %s", fn, dir);
  }
  snprintf(lk->dir, sizeof lk->dir, "%s", dir);
  for (size_t n = strlen(lk->dir); n > 1 && lk->dir[n - 1] == '/'; n--) lk->dir[n - 1] = '\0';
  snprintf(lk->path, sizeof lk->path, "%s/" LOCK_NAME, lk->dir);
  esmt_status st = take(lk, fn);
  if (st) {
    /* a directory made for the lock goes again (rmdir: only while empty) */
    if (lk->created[0]) esmt_run_lock_release(lk);
    else free(lk);
    return st;
  }
  *out = lk;
  return ESMT_OK;
}

/* 1 when dir holds nothing but run.lock. */
static int holds_only_lock(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *de;
  int other = 0;
  while (!other && (de = readdir(d)))
    other = strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, LOCK_NAME);
  closedir(d);
  return !other;
}

void esmt_run_lock_release(esmt_run_lock *lk) {
  if (!lk) return;
  /* A directory this lock made that received nothing else (a run that
   * failed before writing) is removed with its lock file, while still
   * held: a new run directory is left as it was found, absent. */
  if (lk->fd >= 0 && lk->created[0] && holds_only_lock(lk->dir)) unlink(lk->path);
  if (lk->fd >= 0) {
    if (ftruncate(lk->fd, 0) != 0) { /* the record goes with the lock; nothing else to do */ }
    close(lk->fd);
  }
  if (lk->created[0]) { /* from the deepest up to the topmost one made; rmdir refuses non-empty */
    char p[PATH_CAP];
    snprintf(p, sizeof p, "%s", lk->dir);
    for (;;) {
      if (rmdir(p) != 0) break;
      if (!strcmp(p, lk->created)) break;
      char *slash = strrchr(p, '/');
      if (!slash || slash == p) break;
      *slash = '\0';
    }
  }
  free(lk);
}
