/* SPDX-License-Identifier: MIT */
/* esmt_remove_dead_temporaries (infer.h): what a writer killed before it
 * finished left beside its output, "BASE.PID.KIND", removed once PID no
 * longer runs. Only the writer's own kind of entry is removed: a regular
 * file of one link, or a directory of nothing but such files named as
 * esmt_contact_dir names them; a link, or anything holding more, stays. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"
#include "fs_util.h"

/* 1 when `name` is "BASE.PID.KIND" of a process that no longer runs. */
static int dead_name(const char *name, const char *base, size_t bl,
                     const char *const *kinds, int n_kinds) {
  if (strncmp(name, base, bl) || name[bl] != '.') return 0;
  char *end = NULL;
  errno = 0;
  const long pid = strtol(name + bl + 1, &end, 10);
  if (errno || pid <= 0 || end == name + bl + 1 || *end != '.' || pid == (long)getpid()) return 0;
  int known = 0;
  for (int i = 0; i < n_kinds && !known; i++) known = !strcmp(end + 1, kinds[i]);
  return known && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static int contact_file_name(const char *name) {
  const size_t n = strlen(name);
  return !strcmp(name, "index.tsv") ||
         (n > 4 && (!strcmp(name + n - 4, ".npy") || !strcmp(name + n - 4, ".png")));
}

/* A directory of esmt_contact_dir's files only, emptied and removed. */
static int remove_file_dir(const char *path) {
  struct stat sb;
  if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid()) return 0;
  DIR *d = opendir(path);
  if (!d) return 0;
  int ok = 1;
  char p[8300];
  for (struct dirent *e; ok && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    ok = contact_file_name(e->d_name) && esmt_owned_file_is_own(p, NULL);
  }
  if (ok) {
    rewinddir(d);
    for (struct dirent *e; (e = readdir(d));)
      if (contact_file_name(e->d_name)) {
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        unlink(p);
      }
  }
  closedir(d);
  return ok && rmdir(path) == 0;
}

int esmt_remove_dead_temporaries(const char *out, const char *const *kinds, int n_kinds,
                                 esmt_removed_fn removed, void *user) {
  if (!out || !kinds || n_kinds <= 0) return 0;
  char o[4096], dir[4096];
  snprintf(o, sizeof o, "%s", out);
  for (size_t n = strlen(o); n > 1 && o[n - 1] == '/'; n--) o[n - 1] = 0;
  esmt_dirname(o, dir, sizeof dir);
  const char *slash = strrchr(o, '/');
  const char *base = slash ? slash + 1 : o;
  const size_t bl = strlen(base);
  DIR *dd = opendir(dir);
  if (!dd) return 0;
  int count = 0;
  for (struct dirent *e; (e = readdir(dd));) {
    if (!dead_name(e->d_name, base, bl, kinds, n_kinds)) continue;
    char path[8300];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(path, &sb) != 0) continue;
    const int gone = S_ISDIR(sb.st_mode) ? remove_file_dir(path)
                                         : esmt_owned_file_is_own(path, NULL) && unlink(path) == 0;
    if (gone) {
      count++;
      if (removed) removed(path, user);
    }
  }
  closedir(dd);
  return count;
}
