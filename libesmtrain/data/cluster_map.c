/* SPDX-License-Identifier: MIT */
/* The cluster file of an ingest (cluster_map.h). */
#define _POSIX_C_SOURCE 200809L
#include "cluster_map.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "gz_input.h"
#include "input_reader.h"

typedef struct gz_src { gzFile gz; const char *path; } gz_src;

#define LINE_MAX_BYTES (1 << 16)

uint64_t esmt_id_hash_n(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a, then a finaliser */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

uint64_t esmt_id_hash(const char *s) { return esmt_id_hash_n(s, strlen(s)); }

/* Representative hash -> cluster index (open addressing; UINT32_MAX: empty). */
typedef struct rep_slot { uint64_t key; uint32_t val; } rep_slot;
typedef struct rep_table { rep_slot *slot; uint64_t cap, used; } rep_table;

static int rep_grow(rep_table *t) {
  uint64_t ncap = t->cap ? 2 * t->cap : 1 << 12;
  rep_slot *n = malloc(ncap * sizeof *n);
  if (!n) return -1;
  for (uint64_t i = 0; i < ncap; i++) n[i].val = UINT32_MAX;
  for (uint64_t i = 0; i < t->cap; i++)
    if (t->slot[i].val != UINT32_MAX) {
      uint64_t j = t->slot[i].key & (ncap - 1);
      while (n[j].val != UINT32_MAX) j = (j + 1) & (ncap - 1);
      n[j] = t->slot[i];
    }
  free(t->slot);
  t->slot = n;
  t->cap = ncap;
  return 0;
}

/* The cluster of representative `h`, added as cluster `next` when new;
 * UINT32_MAX when out of memory. */
static uint32_t rep_get(rep_table *t, uint64_t h, uint32_t next, int *added) {
  *added = 0;
  if (2 * (t->used + 1) > t->cap && rep_grow(t)) return UINT32_MAX;
  uint64_t j = h & (t->cap - 1);
  while (t->slot[j].val != UINT32_MAX) {
    if (t->slot[j].key == h) return t->slot[j].val;
    j = (j + 1) & (t->cap - 1);
  }
  t->slot[j].key = h;
  t->slot[j].val = next;
  t->used++;
  *added = 1;
  return next;
}

static int by_hash_then_line(const void *a, const void *b) {
  const esmt_cluster_member *x = a, *y = b;
  if (x->id_hash != y->id_hash) return x->id_hash < y->id_hash ? -1 : 1;
  return (x->line > y->line) - (x->line < y->line);
}

/* Sort, keep the first listing of every member, count the others, and
 * compact the lines into the two lookup arrays (the hashes in place). */
static esmt_status dedupe(esmt_cluster_map *m, esmt_cluster_member *lines, uint64_t n,
                          const char *path) {
  qsort(lines, n, sizeof *lines, by_hash_then_line);
  uint64_t k = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (k && lines[k - 1].id_hash == lines[i].id_hash) {
      m->duplicate_members++;
      continue;
    }
    lines[k++] = lines[i];
  }
  m->count = k;
  /* entry i's 12 bytes lie at or before record i's 16: compact in place
   * (through memcpy, so that no access is typed as the other struct) */
  unsigned char *bytes = (unsigned char *)lines;
  for (uint64_t i = 0; i < k; i++) {
    esmt_cluster_member r;
    memcpy(&r, bytes + i * sizeof r, sizeof r);
    const esmt_cluster_entry e = {r.id_hash, r.cluster};
    memcpy(bytes + i * sizeof e, &e, sizeof e);
  }
  esmt_cluster_entry *e = (esmt_cluster_entry *)(void *)bytes;
  esmt_cluster_entry *fit = realloc(e, (k ? k : 1) * sizeof *e);
  m->members = fit ? fit : e;
  /* a directory over the top bits: lookups touch one bucket, not log2(k)
   * places of a large array (each a cache and TLB miss) */
  while (m->dir_bits < 26 && (k >> m->dir_bits) > 4) m->dir_bits++;
  const uint64_t nb = (uint64_t)1 << m->dir_bits;
  if (!(m->dir = malloc((nb + 1) * sizeof *m->dir)))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  uint64_t at = 0;
  for (uint64_t b = 0; b < nb; b++) {
    m->dir[b] = at;
    while (at < k && (m->dir_bits ? m->members[at].id_hash >> (64 - m->dir_bits) : 0) == b) at++;
  }
  m->dir[nb] = k;
  return ESMT_OK;
}

typedef struct lines_buf { esmt_cluster_member *v; uint64_t n, cap; } lines_buf;

static esmt_status add_line(esmt_cluster_map *m, rep_table *reps, lines_buf *lb,
                            uint64_t *cap_reps, const char *path, uint64_t lineno, char *line,
                            size_t len) {
  while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
  if (len == 0) return ESMT_OK;
  char *tab = strchr(line, '\t');
  if (!tab || tab == line || tab[1] == '\0' || tab[1] == '\t')
    return esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu: not \"representative<TAB>member\" (the "
                     "two-column TSV of `mmseqs createtsv` or easy-cluster's *_cluster.tsv): "
                     "'%.60s'", path, (unsigned long long)lineno, line);
  char *member = tab + 1, *end = strchr(member, '\t');
  const size_t mlen = end ? (size_t)(end - member) : strlen(member);
  if (m->clusters >= UINT32_MAX - 1)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: more than 4 billion clusters", path);
  int added = 0;
  const uint32_t c = rep_get(reps, esmt_id_hash_n(line, (size_t)(tab - line)),
                             (uint32_t)m->clusters, &added);
  if (c == UINT32_MAX) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  if (added) {
    if (m->clusters == *cap_reps) {
      uint64_t ncap = *cap_reps ? 2 * *cap_reps : 1 << 12;
      uint64_t *n = realloc(m->rep_hash, ncap * sizeof *n);
      if (!n) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
      m->rep_hash = n;
      *cap_reps = ncap;
    }
    m->rep_hash[m->clusters++] = esmt_id_hash_n(line, (size_t)(tab - line));
  }
  if (lb->n == lb->cap) {
    uint64_t ncap = lb->cap ? lb->cap + lb->cap / 2 : 1 << 14;
    esmt_cluster_member *n = realloc(lb->v, ncap * sizeof *n);
    if (!n) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory (%llu members)", path,
                             (unsigned long long)lb->n);
    lb->v = n;
    lb->cap = ncap;
  }
  lb->v[lb->n++] = (esmt_cluster_member){
      esmt_id_hash_n(member, mlen), c, lineno > UINT32_MAX ? UINT32_MAX : (uint32_t)lineno};
  return ESMT_OK;
}

/* gzread as the line reader's source (input_reader.h). */
static esmt_status gz_source(void *src, void *buf, size_t cap, size_t *got) {
  gz_src *g = src;
  *got = 0;
  const int n = gzread(g->gz, buf, (unsigned)(cap > INT_MAX ? INT_MAX : cap));
  int zerr = Z_OK;
  const char *zmsg = gzerror(g->gz, &zerr);
  /* the end of the data: also where a truncated gzip stream says so */
  if (n > 0 || (n == 0 && (zerr == Z_OK || zerr == Z_STREAM_END))) {
    *got = (size_t)n;
    return ESMT_OK;
  }
  if (zerr == Z_ERRNO && errno == EINTR) {
    gzclearerr(g->gz);
    return ESMT_ERR_CANCELLED; /* a signal: the reader asks whether to stop */
  }
  return esmt_fail(zerr == Z_ERRNO ? ESMT_ERR_IO : ESMT_ERR_FORMAT, "%s: reading: %s", g->path,
                   zerr == Z_ERRNO ? strerror(errno) : zmsg);
}

/* The ingest's progress callback, called every 1 Mi lines. */
typedef struct every_mi_lines {
  esmt_progress_fn fn;
  void *user;
  uint64_t next;
  gzFile gz;
  uint64_t file_size;
} every_mi_lines;

static int clusters_progress(void *user, const esmt_progress *p) {
  every_mi_lines *e = user;
  if (!e->fn || p->items < e->next) return 0;
  e->next = p->items + (1u << 20);
  esmt_progress q = *p; /* in bytes of the file, as the FASTA's progress */
  q.stage = "clusters";
  q.done = esmt_gz_input_offset(e->gz, 0);
  q.total = e->file_size;
  return e->fn(e->user, &q);
}

esmt_status esmt_cluster_map_read(const char *path, esmt_cluster_map *m,
                                  esmt_progress_fn progress, void *user) {
  memset(m, 0, sizeof *m);
  if (!strcmp(path, "-")) /* standard input is the FASTA's, if anything's */
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "cluster file: '-' (standard input) is not "
                     "read; give the file's path");
  gz_src g = {NULL, path};
  esmt_status st = esmt_gz_input_open(path, "cluster file", "", &g.gz);
  if (st) return st;
  struct stat sb;
  every_mi_lines every = {progress, user, 1u << 20, g.gz,
                          stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0};
  esmt_line_reader_options ro = ESMT_LINE_READER_OPTIONS_INIT;
  ro.what = "cluster file";
  ro.max_bytes = ESMT_LINE_READER_NO_LIMIT; /* UniRef's are tens of GB */
  ro.max_line = LINE_MAX_BYTES;
  ro.progress = clusters_progress;
  ro.user = &every;
  esmt_line_reader *lr = NULL;
  st = esmt_line_reader_wrap(gz_source, &g, path, &ro, &lr);
  rep_table reps = {0};
  lines_buf lb = {0};
  uint64_t cap_reps = 0;
  for (int got = 1; !st;) {
    const char *text;
    size_t len;
    if ((st = esmt_line_reader_next(lr, &text, &len, &got)) || !got) break;
    st = add_line(m, &reps, &lb, &cap_reps, path, esmt_line_reader_line_number(lr),
                  (char *)text, len);
  }
  if (st == ESMT_ERR_CANCELLED) st = esmt_fail(ESMT_ERR_CANCELLED, "ingest: cancelled");
  esmt_line_reader_close(lr);
  gzclose(g.gz);
  free(reps.slot);
  if (!st && lb.n == 0)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: no \"representative<TAB>member\" lines", path);
  if (!st) st = dedupe(m, lb.v, lb.n, path); /* takes lb.v */
  else free(lb.v);
  if (st) esmt_cluster_map_free(m);
  return st;
}

int64_t esmt_cluster_map_find(const esmt_cluster_map *m, uint64_t h) {
  /* the bucket of h's top bits holds ~4 entries (one or two cache lines) */
  const esmt_cluster_entry *v = m->members;
  const uint64_t b = m->dir_bits ? h >> (64 - m->dir_bits) : 0;
  for (uint64_t k = m->dir[b]; k < m->dir[b + 1]; k++)
    if (v[k].id_hash == h) return (int64_t)v[k].cluster;
  return -1;
}

void esmt_cluster_map_free(esmt_cluster_map *m) {
  free(m->rep_hash);
  free(m->members);
  free(m->dir);
  memset(m, 0, sizeof *m);
}
