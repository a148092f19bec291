/* SPDX-License-Identifier: MIT */
/* `esmtrain-example score`'s output: the CSV file (a temporary file
 * published whole, never over an existing one) and the progress line,
 * shared by both modes (score_pll.c, score_variants.c). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "score_common.h"

/* ---- the output file ---- */

FILE *score_out_file(score_out *o) { return o->f; }

void score_csv_field(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* The temporary file beside OUT, created exclusively. */
int score_out_open(score_out *o, const char *path) {
  memset(o, 0, sizeof *o);
  size_t cap = strlen(path) + 32;
  o->path = malloc(strlen(path) + 1);
  o->tmp = malloc(cap);
  if (!o->path || !o->tmp) {
    fprintf(stderr, SCORE_PREFIX "out of memory\n");
    return 1;
  }
  strcpy(o->path, path);
  snprintf(o->tmp, cap, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
  if (fd < 0) {
    fprintf(stderr, SCORE_PREFIX "cannot create the temporary output %s: %s\n", o->tmp,
            strerror(errno));
    return 1;
  }
  if (!(o->f = fdopen(fd, "w"))) {
    fprintf(stderr, SCORE_PREFIX "%s: %s\n", o->tmp, strerror(errno));
    close(fd);
    unlink(o->tmp);
    return 1;
  }
  return 0;
}

/* Remove the temporary file (if created); free. */
void score_out_discard(score_out *o) {
  if (o->f) {
    fclose(o->f);
    unlink(o->tmp);
  }
  free(o->path);
  free(o->tmp);
  memset(o, 0, sizeof *o);
}

static void sync_dir(const char *path) {
  char *dir = malloc(strlen(path) + 2);
  if (!dir) return;
  strcpy(dir, path);
  char *slash = strrchr(dir, '/');
  if (!slash) strcpy(dir, ".");
  else if (slash == dir) dir[1] = 0;
  else *slash = 0;
  int fd = open(dir, O_RDONLY);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
  free(dir);
}

/* Flush, fsync, and publish the temporary file as OUT without ever
 * replacing a file: link() fails when OUT exists; where links are not
 * supported, a check then rename(). Returns 0, or 1 after printing why. */
int score_out_commit(score_out *o) {
  FILE *f = o->f;
  o->f = NULL;
  int bad = fflush(f) != 0 || ferror(f), err = bad ? errno : 0;
  if (!bad && fsync(fileno(f)) != 0) bad = 1, err = errno;
  if (fclose(f) != 0 && !bad) bad = 1, err = errno;
  if (bad) {
    fprintf(stderr, SCORE_PREFIX "writing %s failed: %s; it was removed and %s was not "
            "written\n", o->tmp, err ? strerror(err) : "write error", o->path);
    unlink(o->tmp);
    return 1;
  }
  int rc = link(o->tmp, o->path);
  if (rc != 0 && errno != EEXIST) {
    struct stat sb;
    if (lstat(o->path, &sb) == 0) errno = EEXIST;
    else rc = rename(o->tmp, o->path);
  } else if (rc == 0) {
    unlink(o->tmp);
  }
  if (rc != 0) {
    if (errno == EEXIST)
      fprintf(stderr, SCORE_PREFIX "%s appeared while scoring: it was not overwritten; the "
              "results are in %s\n", o->path, o->tmp);
    else
      fprintf(stderr, SCORE_PREFIX "cannot rename %s to %s: %s; the results are in %s\n",
              o->tmp, o->path, strerror(errno), o->tmp);
    return 1;
  }
  sync_dir(o->path);
  return 0;
}

/* ---- progress ---- */

void score_progress_init(score_progress *p, int quiet) {
  memset(p, 0, sizeof *p);
  p->start = p->last = esmt_clock_seconds();
  p->quiet = quiet;
  p->tty = isatty(STDERR_FILENO);
}

void score_progress_tick(score_progress *p, uint64_t proteins, uint64_t positions,
                         double fraction, int force) {
  const double now = esmt_clock_seconds(), t = now - p->start;
  if (p->quiet || (now - p->last < 1.0 && !force) || (force && !p->printed)) return;
  p->last = now;
  p->printed = 1;
  char eta[64] = "";
  if (fraction > 0 && fraction <= 1) {
    const double left = t * (1 - fraction) / fraction;
    const long s = (long)(left + 0.5);
    if (s >= 3600) snprintf(eta, sizeof eta, ", %.1f%%, ETA %ldh%02ldm", 100 * fraction, s / 3600,
                            s / 60 % 60);
    else snprintf(eta, sizeof eta, ", %.1f%%, ETA %ldm%02lds", 100 * fraction, s / 60, s % 60);
  }
  fprintf(stderr, "%sscore: %llu proteins, %.1f proteins/s, %.0f positions/s%s%s",
          p->tty ? "\r" : "", (unsigned long long)proteins, t > 0 ? (double)proteins / t : 0.0,
          t > 0 ? (double)positions / t : 0.0, eta, p->tty ? "\033[K" : "\n");
}

void score_progress_end(score_progress *p) {
  if (p->printed && p->tty && !p->quiet) fputc('\n', stderr);
}

/* ---- the command ---- */
