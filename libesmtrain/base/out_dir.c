/* SPDX-License-Identifier: MIT */
/* See out_dir.h. */
#define _POSIX_C_SOURCE 200809L
#include "out_dir.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_util.h"

#define TMP_PREFIX ".esmtrain-tmp-"

/* The pid in a name this module gives its temporaries inside a
 * destination, or 0 when `name` is not one of them. */
static long tmp_owner(const char *name) {
  if (strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)) != 0) return 0;
  long pid = strtol(name + strlen(TMP_PREFIX), NULL, 10);
  return pid > 0 ? pid : 0;
}

static int listed(const char *name, const char *const *names) {
  for (int i = 0; names && names[i]; i++)
    if (strcmp(name, names[i]) == 0) return 1;
  return 0;
}

/* Walk an existing destination: *count its entries (our temporaries of
 * dead processes removed, live ones skipped), *marked whether it carries
 * the marker, and the first entry not in rules->names into foreign. */
static esmt_status survey(const char *dest, const esmt_out_dir_rules *r, int *count, int *marked,
                          char *foreign, size_t cap) {
  DIR *d = opendir(dest);
  if (!d) return esmt_fail(ESMT_ERR_IO, "%s: cannot list %s: %s", r->fn, dest, strerror(errno));
  struct dirent *de;
  *count = *marked = 0;
  foreign[0] = '\0';
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    long owner = tmp_owner(de->d_name);
    if (owner) {
      if (kill((pid_t)owner, 0) != 0 && errno == ESRCH) { /* left by a killed run of ours */
        char stale[ESMT_OUT_DIR_PATH_CAP + 256];
        snprintf(stale, sizeof stale, "%s/%s", dest, de->d_name);
        esmt_remove_tree(stale);
      }
      continue;
    }
    (*count)++;
    if (r->marker && !strcmp(de->d_name, r->marker)) *marked = 1;
    if (!foreign[0] && !listed(de->d_name, r->names)) snprintf(foreign, cap, "%s", de->d_name);
  }
  closedir(d);
  return ESMT_OK;
}

/* An existing destination may be used: empty, or marked and replaceable. */
static esmt_status check_existing(esmt_out_dir *od, const esmt_out_dir_rules *r) {
  int count = 0, marked = 0;
  char foreign[256];
  esmt_status st = survey(od->dest, r, &count, &marked, foreign, sizeof foreign);
  if (st) return st;
  od->was_empty = count == 0;
  if (count == 0) return ESMT_OK;
  if (!r->marker || !marked)
    return esmt_fail(ESMT_ERR_IO, "%s: output directory %s is not empty%s; it was left as it is: "
                     "choose a new or empty directory", r->fn, od->dest,
                     r->marker ? " and is not something esmtrain wrote" : "");
  if (!r->replace)
    return esmt_fail(ESMT_ERR_IO, "%s: %s is not empty: it holds an earlier export (pass %s to "
                     "replace it)", r->fn, od->dest, r->replace_flag);
  if (foreign[0])
    return esmt_fail(ESMT_ERR_IO, "%s: %s holds '%s', which esmtrain did not write there: "
                     "refusing to replace that directory (move the file away or choose another "
                     "one)", r->fn, od->dest, foreign);
  return ESMT_OK;
}

/* mkdir a fresh "<base>-<pid>-<n>": never reuses (or removes) a name that exists. */
static esmt_status make_work(esmt_out_dir *od, const char *base, const char *fn) {
  for (int n = 0; n < 1000; n++) {
    snprintf(od->work, sizeof od->work, "%s%ld-%d", base, (long)getpid(), n);
    if (mkdir(od->work, 0755) == 0) return ESMT_OK;
    if (errno != EEXIST) break;
  }
  esmt_status st = esmt_fail(ESMT_ERR_IO, "%s: cannot create %s: %s", fn, od->work, strerror(errno));
  od->work[0] = '\0';
  return st;
}

esmt_status esmt_out_dir_begin(esmt_out_dir *od, const char *dest, const esmt_out_dir_rules *r) {
  memset(od, 0, sizeof *od);
  size_t len = strlen(dest);
  while (len > 1 && dest[len - 1] == '/') len--; /* "out/" names "out" */
  if (len >= sizeof od->dest - 64)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: the path %s is too long", r->fn, dest);
  memcpy(od->dest, dest, len);
  od->dest[len] = '\0';
  struct stat sb;
  char base[ESMT_OUT_DIR_PATH_CAP];
  if (lstat(od->dest, &sb) == 0 || stat(od->dest, &sb) == 0) {
    if (stat(od->dest, &sb) != 0 || !S_ISDIR(sb.st_mode))
      return esmt_fail(ESMT_ERR_IO, "%s: %s exists and is not a directory", r->fn, od->dest);
    esmt_status st = check_existing(od, r);
    if (st) return st;
    od->into_existing = 1;
    snprintf(base, sizeof base, "%s/" TMP_PREFIX, od->dest);
    return make_work(od, base, r->fn);
  }
  char parent[ESMT_OUT_DIR_PATH_CAP];
  esmt_dirname(od->dest, parent, sizeof parent);
  if (esmt_mkdir_p_created(parent, od->created, sizeof od->created) != ESMT_OK) {
    esmt_status st = esmt_fail_prefix(ESMT_ERR_IO, "%s: cannot create the output's parent: ", r->fn);
    esmt_out_dir_abort(od);
    return st;
  }
  snprintf(base, sizeof base, "%s.esmtrain-tmp-", od->dest);
  esmt_status st = make_work(od, base, r->fn);
  if (st) esmt_out_dir_abort(od);
  return st;
}

/* Move work/name to dest/name. */
static esmt_status move_up(esmt_out_dir *od, const char *name) {
  char from[ESMT_OUT_DIR_PATH_CAP + 256], to[ESMT_OUT_DIR_PATH_CAP + 256];
  snprintf(from, sizeof from, "%s/%s", od->work, name);
  snprintf(to, sizeof to, "%s/%s", od->dest, name);
  if (rename(from, to) != 0)
    return esmt_fail(ESMT_ERR_IO, "cannot move %s to %s: %s", from, to, strerror(errno));
  return ESMT_OK;
}

/* Take back what an interrupted move put into a destination that was empty. */
static void unmove(esmt_out_dir *od, char **names, int n) {
  for (int i = 0; i < n; i++) {
    char from[ESMT_OUT_DIR_PATH_CAP + 256], to[ESMT_OUT_DIR_PATH_CAP + 256];
    snprintf(from, sizeof from, "%s/%s", od->dest, names[i]);
    snprintf(to, sizeof to, "%s/%s", od->work, names[i]);
    rename(from, to);
  }
}

static esmt_status publish_into(esmt_out_dir *od, const char *last) {
  DIR *d = opendir(od->work);
  if (!d) return esmt_fail(ESMT_ERR_IO, "%s: cannot list: %s", od->work, strerror(errno));
  char **names = NULL;
  int n = 0, cap = 0, has_last = 0;
  esmt_status st = ESMT_OK;
  struct dirent *de;
  while (!st && (de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (last && !strcmp(de->d_name, last)) { has_last = 1; continue; }
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      char **nn = realloc(names, (size_t)cap * sizeof *nn);
      if (!nn) { st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory"); break; }
      names = nn;
    }
    if (!(names[n] = strdup(de->d_name))) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
    else n++;
  }
  closedir(d);
  int moved = 0;
  while (!st && moved < n && !(st = move_up(od, names[moved]))) moved++;
  if (!st && has_last) st = move_up(od, last);
  if (st && od->was_empty) unmove(od, names, moved);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  if (st) return st;
  if (rmdir(od->work) == 0) od->work[0] = '\0';
  esmt_fsync_dir_published(od->dest);
  return ESMT_OK;
}

esmt_status esmt_out_dir_publish(esmt_out_dir *od, const char *last) {
  esmt_status st = esmt_fsync_dir(od->work);
  if (!st && od->into_existing) st = publish_into(od, last);
  else if (!st && rename(od->work, od->dest) != 0)
    st = esmt_fail(ESMT_ERR_IO, "cannot rename %s to %s: %s (did %s appear meanwhile?)", od->work,
                   od->dest, strerror(errno), od->dest);
  if (st) return st;
  if (!od->into_existing) {
    od->work[0] = '\0';
    char parent[ESMT_OUT_DIR_PATH_CAP];
    esmt_dirname(od->dest, parent, sizeof parent);
    esmt_fsync_dir_published(parent);
  }
  od->created[0] = '\0'; /* published: the parents are in use */
  return ESMT_OK;
}

void esmt_out_dir_abort(esmt_out_dir *od) {
  if (od->work[0]) esmt_cleanup_tree(od->work);
  od->work[0] = '\0';
  if (!od->created[0]) return;
  /* rmdir (empty directories only) from dest's parent up to the topmost one made */
  char dir[ESMT_OUT_DIR_PATH_CAP];
  esmt_dirname(od->dest, dir, sizeof dir);
  size_t top = strlen(od->created);
  while (strlen(dir) >= top && rmdir(dir) == 0 && strlen(dir) > top) {
    char up[ESMT_OUT_DIR_PATH_CAP];
    esmt_dirname(dir, up, sizeof up);
    snprintf(dir, sizeof dir, "%s", up);
  }
  od->created[0] = '\0';
}
