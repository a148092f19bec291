/* SPDX-License-Identifier: MIT */
/* esmt_checkpoint_resolve: which checkpoint directory a spec names ("RUN",
 * "RUN/checkpoints", ".../latest" or a checkpoint directory). The pointer
 * file `latest` is read without blocking and checked: empty, garbage or a
 * name whose directory is gone is refused with what it holds and the
 * checkpoints that are there to resume instead. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "fs_util.h"
#include "input_file.h"

#define PATH_CAP 4096

static int is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* "step-" and 8 or more digits: the names esmt_checkpoint_save writes. */
int esmt_checkpoint_name_ok(const char *name) {
  if (strncmp(name, "step-", 5) != 0) return 0;
  size_t n = 0;
  for (const char *p = name + 5; *p; p++, n++)
    if (*p < '0' || *p > '9') return 0;
  return n >= 8 && n <= 19;
}

/* Up to `cap` bytes of what a pointer file holds, printable (others as
 * '?') and without its line end, for a message. */
static void printable(const char *raw, size_t n, char *out, size_t cap) {
  size_t k = 0;
  for (size_t i = 0; i < n && k + 4 < cap; i++)
    out[k++] = raw[i] >= 0x20 && raw[i] < 0x7f ? raw[i] : '?';
  if (n > 0 && k + 4 >= cap) { memcpy(out + k, "...", 3); k += 3; }
  out[k] = '\0';
}

static int by_name(const void *a, const void *b) {
  return strcmp((const char *)a, (const char *)b);
}

/* "; checkpoints present in CKDIR: step-A, step-B. Continue from one of
 * them by its path, e.g. --resume CKDIR/step-B (the newest)" or that there
 * are none.
 * Only directories holding state.json count; listed in step order (the
 * step numbers are zero-padded), the newest 16 at most. */
static void append_present(esmt_status st, const char *ckdir) {
  enum { MAX_LISTED = 16 };
  char names[MAX_LISTED][32], list[MAX_LISTED * 34] = "";
  int n = 0, total = 0;
  DIR *d = opendir(ckdir);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    char sp[PATH_CAP];
    if (!esmt_checkpoint_name_ok(de->d_name) || strlen(de->d_name) >= sizeof names[0]) continue;
    snprintf(sp, sizeof sp, "%s/%s/state.json", ckdir, de->d_name);
    if (access(sp, F_OK) != 0) continue;
    total++;
    if (n < MAX_LISTED) {
      snprintf(names[n++], sizeof names[0], "%s", de->d_name);
    } else { /* keep the newest: replace the oldest listed if this one is newer */
      int oldest = 0;
      for (int i = 1; i < n; i++)
        if (strcmp(names[i], names[oldest]) < 0) oldest = i;
      if (strcmp(de->d_name, names[oldest]) > 0)
        snprintf(names[oldest], sizeof names[0], "%s", de->d_name);
    }
  }
  if (d) closedir(d);
  if (!n) {
    esmt_fail_append(st, "; %s holds no step-* checkpoint with a state.json: there is nothing "
                     "to resume (start a new run, or --init-from another run)", ckdir);
    return;
  }
  qsort(names, (size_t)n, sizeof names[0], by_name);
  for (int i = 0; i < n; i++) {
    size_t len = strlen(list);
    snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", names[i]);
  }
  esmt_fail_append(st, "; checkpoints present in %s: %s%s. Name one by its path instead, e.g. "
                   "--resume %s/%s (the newest) to continue training, or rewrite %s/latest to "
                   "name it", ckdir,
                   total > n ? "... " : "", list, ckdir, names[n - 1], ckdir);
}

/* Read the pointer file `probe` (in directory ckdir) into out. */
static esmt_status follow_latest(const char *probe, const char *ckdir, char *out, size_t cap) {
  FILE *f = NULL;
  esmt_status st = esmt_fopen_input(probe, "checkpoint pointer (checkpoints/latest)", &f);
  if (st) return st;
  char raw[256], shown[96];
  size_t n = fread(raw, 1, sizeof raw - 1, f);
  int more = fgetc(f) != EOF;
  fclose(f);
  raw[n] = '\0';
  size_t len = n;
  while (len > 0 && (raw[len - 1] == '\n' || raw[len - 1] == '\r' || raw[len - 1] == ' '))
    raw[--len] = '\0';
  printable(raw, len, shown, sizeof shown);
  if (len == 0)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s is empty: it should name the newest checkpoint "
                   "(step-NNNNNNNN); a save was cut short or the file was truncated", probe);
  else if (more || strlen(raw) != len || !esmt_checkpoint_name_ok(raw))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s does not name a checkpoint: it holds '%s'%s, not "
                   "step-NNNNNNNN (the file is damaged)", probe, shown, more ? " (and more)" : "");
  else {
    snprintf(out, cap, "%s/%s", ckdir, raw);
    if (is_dir(out)) return ESMT_OK;
    st = esmt_fail(ESMT_ERR_IO, "%s names checkpoint '%s', which does not exist in %s (removed "
                   "or moved)", probe, raw, ckdir);
  }
  append_present(st, ckdir);
  return st;
}

esmt_status esmt_checkpoint_resolve(const char *spec, char *out, size_t cap) {
  char path[PATH_CAP], probe[PATH_CAP];
  snprintf(path, sizeof path, "%s", spec);
  size_t len = strlen(path);
  while (len > 1 && path[len - 1] == '/') path[--len] = '\0';
  snprintf(probe, sizeof probe, "%s/state.json", path);
  struct stat sb;
  if (lstat(probe, &sb) == 0) { snprintf(out, cap, "%s", path); return ESMT_OK; }
  /* RUN/checkpoints/latest, RUN/checkpoints, RUN */
  const char *suffixes[] = {"", "/latest", "/checkpoints/latest"};
  for (int i = 0; i < 3; i++) {
    snprintf(probe, sizeof probe, "%s%s", path, suffixes[i]);
    if (stat(probe, &sb) != 0 || (i == 0 && S_ISDIR(sb.st_mode))) continue;
    char ckdir[PATH_CAP];
    esmt_dirname(probe, ckdir, sizeof ckdir);
    return follow_latest(probe, ckdir, out, cap);
  }
  esmt_status st = esmt_fail(ESMT_ERR_IO, "'%s' is neither a checkpoint (no state.json) nor a "
                             "run directory with checkpoints/latest", spec);
  snprintf(probe, sizeof probe, "%s/checkpoints", path);
  if (is_dir(probe)) append_present(st, probe);
  return st;
}
