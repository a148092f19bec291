/* SPDX-License-Identifier: MIT */
/* metrics.jsonl and the TensorBoard event file of a run (metrics_sink.h). */
#define _POSIX_C_SOURCE 200809L
#include "metrics_sink.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fs_util.h"
#include "tfevents.h"

/* At most this often the files are fsync'ed between evaluations (each
 * record reaches the kernel at once; this is only about crashes). */
#define SYNC_EVERY_S 30.0

struct esmt_metrics_sink {
  char path[4096];             /* metrics.jsonl */
  FILE *jsonl;                 /* NULL: off (failed) */
  esmt_tfevents *events;       /* NULL: off (failed) */
  int64_t last_train, last_eval; /* steps written; records at or before them are skipped */
  double last_sync;
};

/* Close the event file after a failure, keeping that failure's message. */
static void drop_events(esmt_metrics_sink *s) {
  char why[1024];
  snprintf(why, sizeof why, "%s", esmt_last_error());
  (void)esmt_tfevents_close(s->events);
  s->events = NULL;
  (void)esmt_fail(ESMT_ERR_IO, "%s", why);
}

/* The "step" of one jsonl line; 0 when it has none it can be read from. */
static int line_step(const char *line, int64_t *step) {
  json_t *j = json_loads(line, JSON_DECODE_ANY, NULL);
  json_t *s = json_is_object(j) ? json_object_get(j, "step") : NULL;
  const int ok = json_is_integer(s);
  if (ok) *step = (int64_t)json_integer_value(s);
  const char *kind = ok ? json_string_value(json_object_get(j, "kind")) : NULL;
  const int is_eval = kind && !strcmp(kind, "eval");
  json_decref(j);
  return ok ? 1 + is_eval : 0; /* 1: train (or other), 2: eval */
}

/* Keep the lines of `path` up to start_step (and those without a step);
 * drop later ones and a torn last line (no newline: a crash mid-write),
 * replacing the file atomically, only if something is dropped. The last
 * evaluation kept goes to *last_eval. */
static esmt_status trim_jsonl(const char *path, int64_t start_step, int64_t *last_eval) {
  const char *fn = "metrics.jsonl";
  FILE *in = fopen(path, "r");
  if (!in) {
    if (errno == ENOENT) return ESMT_OK;
    return esmt_fail(ESMT_ERR_IO, "%s: cannot read %s: %s", fn, path, strerror(errno));
  }
  char *kept = NULL, *line = NULL;
  size_t kept_len = 0, cap = 0;
  FILE *mem = open_memstream(&kept, &kept_len);
  ssize_t n;
  int dropped = 0;
  while (mem && (n = getline(&line, &cap, in)) > 0) {
    int64_t step = 0;
    const int kind = line[n - 1] == '\n' ? line_step(line, &step) : -1;
    if (kind < 0 || (kind > 0 && step > start_step)) {
      dropped++;
      continue;
    }
    if (kind == 2 && step > *last_eval) *last_eval = step;
    fwrite(line, 1, (size_t)n, mem);
  }
  const int read_err = ferror(in);
  free(line);
  fclose(in);
  if (!mem || fclose(mem) != 0 || read_err) {
    free(kept);
    return esmt_fail(ESMT_ERR_IO, "%s: cannot read %s%s", fn, path,
                     read_err ? "" : " (out of memory)");
  }
  esmt_status st = ESMT_OK;
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path); /* one writer per run: a fixed name */
  (void)unlink(tmp); /* left by a process killed here (ENOENT otherwise) */
  if (dropped) { /* temp file, fsync, rename: a crash leaves the old or the new file */
    FILE *out = fopen(tmp, "w");
    if (!out)
      st = esmt_fail(ESMT_ERR_IO, "%s: cannot create %s: %s", fn, tmp, strerror(errno));
    else {
      const int ok = fwrite(kept, 1, kept_len, out) == kept_len && fflush(out) == 0 &&
                     fsync(fileno(out)) == 0;
      const int e = errno;
      if (fclose(out) != 0 || !ok)
        st = esmt_fail(ESMT_ERR_IO, "%s: writing %s: %s%s", fn, tmp, strerror(e),
                       esmt_write_errno_hint(e));
      else if (rename(tmp, path) != 0)
        st = esmt_fail(ESMT_ERR_IO, "%s: renaming %s to %s: %s", fn, tmp, path, strerror(errno));
      if (st) unlink(tmp);
      else {
        char dir[4096];
        esmt_dirname(path, dir, sizeof dir);
        esmt_fsync_dir_published(dir);
      }
    }
  }
  free(kept);
  return st;
}

esmt_status esmt_metrics_sink_open(const char *run_dir, int64_t start_step,
                                   esmt_metrics_sink **out) {
  const char *fn = "esmt_metrics_sink_open";
  ESMT_CHECK_ARG(run_dir && out, fn, "run_dir and out must not be NULL");
  *out = NULL;
  esmt_metrics_sink *s = calloc(1, sizeof *s);
  if (!s) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  s->last_train = start_step;
  s->last_eval = -1;
  s->last_sync = esmt_now_s();
  *out = s;
  esmt_status st = esmt_mkdir_p(run_dir);
  if (st) return esmt_fail_prefix(st, "%s: ", fn);
  snprintf(s->path, sizeof s->path, "%s/metrics.jsonl", run_dir);
  st = trim_jsonl(s->path, start_step, &s->last_eval);
  if (!st && !(s->jsonl = fopen(s->path, "a")))
    st = esmt_fail(ESMT_ERR_IO, "%s: cannot open %s: %s", fn, s->path, strerror(errno));
  char why[1024] = "";
  if (st) snprintf(why, sizeof why, "%s", esmt_last_error());
  /* the event file on its own: a new one per opening; its session starts
   * after start_step, so TensorBoard forgets later steps of earlier files */
  esmt_status es = esmt_tfevents_open(run_dir, &s->events);
  if (!es && (es = esmt_tfevents_session_start(s->events, start_step + 1))) drop_events(s);
  if (st && es) return esmt_fail(st, "%s; %s", why, esmt_last_error());
  return st ? esmt_fail(st, "%s", why) : es;
}

/* A number for JSON: non-finite values (a skipped update's loss) as null. */
static const char *jnum(char *buf, size_t cap, char style, int prec, double v) {
  if (!isfinite(v)) return "null";
  if (style == 'e') snprintf(buf, cap, "%.*e", prec, v);
  else if (style == 'g') snprintf(buf, cap, "%.*g", prec, v);
  else snprintf(buf, cap, "%.*f", prec, v);
  return buf;
}

/* Resident memory now, in MiB (/proc/self/statm; else the peak). */
static double rss_mib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  const int ok = f && fscanf(f, "%ld %ld", &pages, &resident) == 2;
  if (f) fclose(f);
  if (ok) return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

/* A line to metrics.jsonl, flushed to the kernel (readers follow the file). */
static esmt_status put_line(esmt_metrics_sink *s, const char *line) {
  if (!s->jsonl) return ESMT_OK;
  if (fputs(line, s->jsonl) >= 0 && fflush(s->jsonl) == 0) return ESMT_OK;
  const int e = errno;
  fclose(s->jsonl);
  s->jsonl = NULL;
  return esmt_fail(ESMT_ERR_IO, "%s: write failed: %s%s; no more metrics are written to it",
                   s->path, strerror(e), esmt_write_errno_hint(e));
}

static esmt_status put_scalars(esmt_metrics_sink *s, int64_t step, const esmt_tfevents_scalar *v,
                               size_t n) {
  if (!s->events) return ESMT_OK;
  esmt_status st = esmt_tfevents_scalars(s->events, step, v, n);
  if (!st) return ESMT_OK;
  drop_events(s);
  return esmt_fail_append(st, "; no more TensorBoard events are written");
}

/* fsync both files (forced, or SYNC_EVERY_S after the last). */
static esmt_status sync_files(esmt_metrics_sink *s, int force) {
  const double now = esmt_now_s();
  if (!force && now - s->last_sync < SYNC_EVERY_S) return ESMT_OK;
  s->last_sync = now;
  esmt_status st = ESMT_OK;
  if (s->jsonl && fsync(fileno(s->jsonl)) != 0) {
    const int e = errno;
    st = esmt_fail(ESMT_ERR_IO, "%s: fsync: %s%s", s->path, strerror(e), esmt_write_errno_hint(e));
  }
  if (s->events && !st) st = esmt_tfevents_flush(s->events);
  return st;
}

/* The first failure of several steps (each part fails once, then is off). */
static esmt_status first(esmt_status a, esmt_status b) { return a ? a : b; }

/* ,"device_mem_mib":..,"device_util":.. on GPU backends; "" elsewhere. */
static void device_fields(char *out, size_t cap, const esmt_train_metrics *m) {
  out[0] = '\0';
  if (m->device_memory_total_mib < 0 && m->device_util_percent < 0) return;
  char b[4][32];
  snprintf(out, cap,
           ",\"device_mem_mib\":%s,\"device_mem_total_mib\":%s,\"device_util\":%s,"
           "\"device_temp_c\":%s",
           jnum(b[0], 32, 'f', 1, m->device_memory_used_mib < 0 ? NAN : m->device_memory_used_mib),
           jnum(b[1], 32, 'f', 1,
                m->device_memory_total_mib < 0 ? NAN : m->device_memory_total_mib),
           jnum(b[2], 32, 'f', 1, m->device_util_percent < 0 ? NAN : m->device_util_percent),
           jnum(b[3], 32, 'f', 1, m->device_temperature_c < 0 ? NAN : m->device_temperature_c));
}

esmt_status esmt_metrics_sink_train(esmt_metrics_sink *s, const esmt_train_metrics *m,
                                    int64_t max_steps) {
  if (!s || !m || m->step <= s->last_train) return ESMT_OK;
  s->last_train = m->step;
  const double rss = rss_mib();
  char line[1400], dev[256], b[8][32];
  device_fields(dev, sizeof dev, m);
  snprintf(line, sizeof line,
           "{\"kind\":\"train\",\"step\":%lld,\"max_steps\":%lld,\"loss\":%s,\"lr\":%s,"
           "\"grad_norm\":%s,\"tokens\":%llu,\"tokens_per_s\":%s,\"mfu\":%.4f,\"step_ms\":%.1f,"
           "\"data_ms\":%.2f,\"overhead_ms\":%.2f,\"skipped\":%lld,\"loss_scale\":%s,"
           "\"overflows\":%lld,\"elapsed_s\":%.1f,\"eta_s\":%s,\"padding\":%.4f,"
           "\"rss_mib\":%.1f%s}\n",
           (long long)m->step, (long long)max_steps, jnum(b[0], 32, 'f', 6, m->loss),
           jnum(b[1], 32, 'e', 3, m->lr), jnum(b[2], 32, 'f', 4, m->grad_norm),
           (unsigned long long)m->tokens, jnum(b[3], 32, 'f', 1, m->tokens_per_s), m->mfu,
           m->step_ms, m->data_ms, m->overhead_ms, (long long)m->skipped,
           jnum(b[4], 32, 'g', 6, m->loss_scale), (long long)m->overflows, m->elapsed_s,
           jnum(b[5], 32, 'f', 1, max_steps > 0 ? m->eta_s : NAN), m->padding_fraction, rss, dev);
  esmt_tfevents_scalar v[14] = {
      {"train/loss", m->loss},           {"train/lr", m->lr},
      {"train/grad_norm", m->grad_norm}, {"train/tokens_per_s", m->tokens_per_s},
      {"train/mfu", m->mfu},             {"train/padding", m->padding_fraction},
      {"train/loss_scale", m->loss_scale}, {"train/overflows", (double)m->overflows},
      {"train/skipped", (double)m->skipped}, {"train/rss_mib", rss},
  };
  size_t n = 10;
  if (m->device_memory_used_mib >= 0) v[n++] = (esmt_tfevents_scalar){"train/device_memory_mib",
                                                                     m->device_memory_used_mib};
  if (m->device_util_percent >= 0) v[n++] = (esmt_tfevents_scalar){"train/device_util",
                                                                  m->device_util_percent};
  if (m->device_temperature_c >= 0) v[n++] = (esmt_tfevents_scalar){"train/device_temperature_c",
                                                                   m->device_temperature_c};
  esmt_status st = put_line(s, line);
  st = first(st, put_scalars(s, m->step, v, n));
  return first(st, sync_files(s, 0));
}

/* A task head's metrics (those it has: not NAN), as ,"macro_f1":.. and
 * eval/macro_f1 scalars; "" without a task head. */
static void task_fields(char *out, size_t cap, const esmt_eval_metrics *m,
                        esmt_tfevents_scalar *v, size_t *nv) {
  out[0] = '\0';
  if (m->struct_size <= offsetof(esmt_eval_metrics, task) || !m->task) return;
  const struct {
    const char *key, *tag;
    double value;
  } f[] = {{"macro_f1", "eval/macro_f1", m->task->macro_f1},
           {"auroc", "eval/auroc", m->task->auroc},
           {"auprc", "eval/auprc", m->task->auprc},
           {"pearson", "eval/pearson", m->task->pearson},
           {"spearman", "eval/spearman", m->task->spearman},
           {"rmse", "eval/rmse", m->task->rmse}};
  size_t at = 0;
  for (size_t k = 0; k < sizeof f / sizeof *f; k++) {
    if (isnan(f[k].value)) continue;
    char num[32];
    at += (size_t)snprintf(out + at, cap - at, ",\"%s\":%s", f[k].key,
                           jnum(num, sizeof num, 'f', 6, f[k].value));
    v[(*nv)++] = (esmt_tfevents_scalar){f[k].tag, f[k].value};
  }
}

esmt_status esmt_metrics_sink_eval(esmt_metrics_sink *s, const esmt_eval_metrics *m) {
  if (!s || !m || m->step <= s->last_eval) return ESMT_OK;
  s->last_eval = m->step;
  char line[1024], b[4][32], task[512];
  esmt_tfevents_scalar v[11] = {
      {"eval/loss", m->loss},
      {"eval/perplexity", m->perplexity},
      {"eval/accuracy", m->accuracy},
      {"eval/unigram_perplexity", m->unigram_perplexity},
  };
  size_t nv = 4;
  task_fields(task, sizeof task, m, v, &nv);
  snprintf(line, sizeof line,
           "{\"kind\":\"eval\",\"step\":%lld,\"loss\":%s,\"perplexity\":%s,\"accuracy\":%.4f,"
           "\"unigram_perplexity\":%s,\"selected\":%llu%s}\n",
           (long long)m->step, jnum(b[0], 32, 'f', 6, m->loss), jnum(b[1], 32, 'f', 4, m->perplexity),
           m->accuracy, jnum(b[2], 32, 'f', 4, m->unigram_perplexity),
           (unsigned long long)m->selected, task);
  esmt_status st = put_line(s, line);
  st = first(st, put_scalars(s, m->step, v, nv));
  return first(st, sync_files(s, 1)); /* evaluations are rare: always durable */
}

esmt_status esmt_metrics_sink_close(esmt_metrics_sink *s) {
  if (!s) return ESMT_OK;
  esmt_status st = sync_files(s, 1);
  if (s->jsonl && fclose(s->jsonl) != 0 && !st)
    st = esmt_fail(ESMT_ERR_IO, "%s: close: %s", s->path, strerror(errno));
  st = first(st, esmt_tfevents_close(s->events));
  free(s);
  return st;
}
