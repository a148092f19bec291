/* SPDX-License-Identifier: MIT */
/* esmt_ingest: FASTA(.gz) or standard input ("-") -> token shards +
 * manifest, both carrying a new random dataset id. Everything is written
 * into a temporary directory that is published only when complete
 * (out_dir.h), so a failed or interrupted ingest leaves no dataset behind,
 * never touches an existing one, and leaves a directory the user made
 * (empty) as it was: same mode, still there. */
#define _GNU_SOURCE /* getrandom */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cluster_ingest.h"
#include "cluster_map.h"
#include "dataset_manifest.h"
#include "fasta_stream.h"
#include "fs_util.h"
#include "out_dir.h"
#include "record_source.h" /* FASTA or a table, by input_format */
#include "shard_format.h"

#define PATH_CAP 4096

typedef struct shard_out {
  int fd;
  int split, number;
  char name[64];
  uint64_t *index;           /* offsets, records + 1 */
  uint64_t records, index_cap, tokens;
  uLong crc;
  json_t *list;              /* manifest entries (borrowed) */
} shard_out;

typedef struct ingest {
  const esmt_ingest_options *o;
  esmt_ingest_stats *st;
  esmt_out_dir od;
  const char *tmp;           /* od.work */
  shard_out out[2];
  uint64_t *seen;            /* open-addressing set of id hashes (duplicates) */
  uint64_t seen_cap, seen_count;
  uint8_t *tok;
  size_t tok_cap;
  uint64_t total_bytes, done_bytes; /* total 0: unknown (standard input) */
  uint8_t dataset_id[ESMT_DATASET_ID_BYTES];
  double t0;
  json_t *shards;
  esmt_cluster_ingest *clusters; /* with options.clusters */
} ingest;

#define hash_id esmt_id_hash /* cluster_map.h: one id hash for splits, duplicates, clusters */

/* 1 when h was already present. */
static int seen_insert(ingest *g, uint64_t h) {
  if (h == 0) h = 1;
  if (4 * (g->seen_count + 1) > 3 * g->seen_cap) { /* load <= 3/4: 11-21 bytes a record */
    uint64_t ncap = g->seen_cap ? 2 * g->seen_cap : 1 << 16;
    uint64_t *n = calloc(ncap, sizeof *n);
    if (!n) return -1;
    for (uint64_t i = 0; i < g->seen_cap; i++)
      if (g->seen[i]) {
        uint64_t j = g->seen[i] & (ncap - 1);
        while (n[j]) j = (j + 1) & (ncap - 1);
        n[j] = g->seen[i];
      }
    free(g->seen);
    g->seen = n;
    g->seen_cap = ncap;
  }
  uint64_t j = h & (g->seen_cap - 1);
  while (g->seen[j]) {
    if (g->seen[j] == h) return 1;
    j = (j + 1) & (g->seen_cap - 1);
  }
  g->seen[j] = h;
  g->seen_count++;
  return 0;
}

static esmt_status shard_open(ingest *g, shard_out *s) {
  snprintf(s->name, sizeof s->name, "%s-%05d.shard", s->split ? "valid" : "train", s->number);
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/%s", g->tmp, s->name);
  s->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (s->fd < 0) return esmt_fail(ESMT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  esmt_shard_header h;
  memset(&h, 0, sizeof h); /* placeholder; rewritten by shard_close */
  s->records = s->tokens = 0;
  s->crc = crc32(0L, Z_NULL, 0);
  return esmt_write_all(s->fd, &h, sizeof h, path);
}

static esmt_status shard_add(ingest *g, shard_out *s, const uint8_t *tok, size_t n) {
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/%s", g->tmp, s->name);
  if (s->fd < 0) {
    esmt_status st = shard_open(g, s);
    if (st) return st;
  }
  if (s->records + 2 > s->index_cap) {
    uint64_t cap = s->index_cap ? 2 * s->index_cap : 4096;
    uint64_t *idx = realloc(s->index, cap * sizeof *idx);
    if (!idx) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "ingest: out of memory (shard index)");
    s->index = idx;
    s->index_cap = cap;
  }
  s->index[s->records] = s->tokens;
  esmt_status st = esmt_write_all(s->fd, tok, n, path);
  if (st) return st;
  s->crc = crc32(s->crc, tok, (uInt)n);
  s->records++;
  s->tokens += n;
  return ESMT_OK;
}

/* Append the index, write the real header, fsync, close; list it. */
static esmt_status shard_close(ingest *g, shard_out *s) {
  if (s->fd < 0) return ESMT_OK;
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/%s", g->tmp, s->name);
  s->index[s->records] = s->tokens;
  size_t ibytes = (size_t)(s->records + 1) * sizeof(uint64_t);
  /* zero padding so that the index is 8-byte aligned in the mapping */
  static const uint8_t zeros[8] = {0};
  size_t pad = (size_t)((8 - (sizeof(esmt_shard_header) + s->tokens) % 8) % 8);
  esmt_status st = esmt_write_all(s->fd, zeros, pad, path);
  s->crc = crc32(s->crc, zeros, (uInt)pad);
  if (!st) st = esmt_write_all(s->fd, s->index, ibytes, path);
  if (!st) {
    esmt_shard_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, ESMT_SHARD_MAGIC, 8);
    h.version = ESMT_SHARD_VERSION;
    h.header_size = sizeof h;
    h.records = s->records;
    h.tokens = s->tokens;
    h.index_offset = sizeof h + s->tokens + pad;
    h.crc32 = (uint32_t)crc32(s->crc, (const Bytef *)s->index, (uInt)ibytes);
    h.split = (uint32_t)s->split;
    memcpy(h.dataset_id, g->dataset_id, sizeof h.dataset_id);
    st = esmt_pwrite_all(s->fd, &h, sizeof h, 0, path);
    if (!st && fsync(s->fd) != 0)
      st = esmt_fail(ESMT_ERR_IO, "%s: fsync: %s", path, strerror(errno));
    if (!st)
      json_array_append_new(g->shards, json_pack("{s:s,s:s,s:I,s:I,s:I}", "file", s->name, "split",
                                                 s->split ? "valid" : "train", "records",
                                                 (json_int_t)s->records, "tokens",
                                                 (json_int_t)s->tokens, "crc32",
                                                 (json_int_t)h.crc32));
  }
  if (close(s->fd) != 0 && !st) st = esmt_fail(ESMT_ERR_IO, "%s: close: %s", path, strerror(errno));
  s->fd = -1;
  s->number++;
  g->st->shards++;
  return st;
}

/* Map a record's characters to token ids under the policies; returns the
 * count, 0 for "skip this record", or -1 on an error (message set). */
static long tokenize(ingest *g, const char *file, const esmt_fasta_record *r) {
  if (r->len + 1 > g->tok_cap) {
    uint8_t *t = realloc(g->tok, r->len + 1);
    if (!t) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "ingest: out of memory"), -1;
    g->tok = t;
    g->tok_cap = r->len + 1;
  }
  size_t len = r->len, n = 0;
  if (len && r->seq[len - 1] == '*') { /* a terminal stop codon */
    len--;
    g->st->terminal_stops++;
  }
  uint64_t unknown = 0;
  for (size_t i = 0; i < len; i++) {
    int c = (unsigned char)r->seq[i];
    int id = esmt_token_id(c);
    if (id == 29 || id == 30) {
      if (g->o->gaps == ESMT_GAPS_DROP) { g->st->gaps_dropped++; continue; }
      if (g->o->gaps == ESMT_GAPS_FAIL)
        return esmt_fail(ESMT_ERR_FORMAT, "%s: record '%s' (line %llu): gap character '%c' "
                         "(--gaps keep|drop to accept)", file, r->id,
                         (unsigned long long)r->header_line, c), -1;
    } else if (id < 0) {
      int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '*';
      if (!letter)
        return esmt_fail(ESMT_ERR_FORMAT, "%s: record '%s' (line %llu): character '%c' is not an "
                         "amino-acid letter", file, r->id, (unsigned long long)r->header_line,
                         c), -1;
      if (g->o->unknown == ESMT_UNKNOWN_FAIL)
        return esmt_fail(ESMT_ERR_FORMAT, "%s: record '%s' (line %llu): unknown residue '%c' "
                         "(--unknown unk|skip to accept)", file, r->id,
                         (unsigned long long)r->header_line, c), -1;
      if (g->o->unknown == ESMT_UNKNOWN_SKIP) {
        g->st->skipped_records++;
        return 0;
      }
      unknown++;
      id = ESMT_TOKEN_UNK;
    } else if (c >= 'a' && c <= 'z') {
      g->st->lowercase_letters++;
    }
    g->tok[n++] = (uint8_t)id;
  }
  g->st->unknown_letters += unknown;
  return (long)n;
}

static int report(ingest *g, uint64_t file_offset) {
  if (!g->o->progress) return 0;
  esmt_progress p = {sizeof p, "ingest", g->done_bytes + file_offset, g->total_bytes, "bytes",
                     esmt_now_s() - g->t0, g->st->records};
  return g->o->progress(g->o->progress_user, &p);
}

static esmt_status ingest_file(ingest *g, const char *path) {
  esmt_record_source *f = NULL;
  esmt_status st = esmt_record_source_open(path, g->o, &f);
  if (st) return st;
  esmt_fasta_record r;
  int rc;
  uint64_t next_report = 1 << 20;
  while ((rc = esmt_record_source_next(f, &r)) == 1) {
    long n = tokenize(g, path, &r);
    if (n < 0) { st = ESMT_ERR_FORMAT; break; }
    if (seen_insert(g, hash_id(r.id)) == 1) g->st->duplicate_ids++;
    if (n == 0) {
      if (r.len == 0) g->st->empty_records++;
      continue;
    }
    if (g->o->max_residues && (uint64_t)n > g->o->max_residues) {
      g->st->too_long_records++;
      continue;
    }
    /* the split by a hash of the id, or of the cluster's representative:
     * whole clusters go to validation */
    uint64_t h = hash_id(r.id);
    uint32_t cluster = 0;
    if (g->clusters && (st = esmt_cluster_ingest_assign(g->clusters, r.id, h, &h, &cluster))) break;
    int valid = g->clusters && g->o->valid_clusters
                    ? esmt_cluster_ingest_held_out(g->clusters, cluster)
                    : (double)(h % ESMT_SPLIT_MODULUS) / (double)ESMT_SPLIT_MODULUS <
                          g->o->valid_fraction;
    shard_out *s = &g->out[valid];
    if ((st = shard_add(g, s, g->tok, (size_t)n))) break;
    if (g->clusters && (st = esmt_cluster_ingest_add(g->clusters, valid, cluster))) break;
    g->st->records++;
    g->st->residues += (uint64_t)n;
    if ((uint64_t)n > g->st->longest) g->st->longest = (uint64_t)n;
    if (valid) { g->st->valid_records++; g->st->valid_residues += (uint64_t)n; }
    else { g->st->train_records++; g->st->train_residues += (uint64_t)n; }
    if (s->tokens >= g->o->shard_tokens && (st = shard_close(g, s))) break;
    uint64_t off = esmt_record_source_offset(f);
    if (off >= next_report) {
      next_report = off + (1 << 20);
      if (report(g, off)) { st = esmt_fail(ESMT_ERR_CANCELLED, "ingest: cancelled"); break; }
    }
  }
  if (rc < 0 && !st) st = esmt_last_error()[0] ? ESMT_ERR_FORMAT : ESMT_ERR_IO;
  g->done_bytes += esmt_record_source_offset(f);
  esmt_record_source_close(f);
  return st;
}

static esmt_status write_manifest(ingest *g, json_t *clusters) {
  char id[33];
  esmt_dataset_id_hex(g->dataset_id, id);
  json_t *root = json_pack("{s:s,s:i,s:s,s:O}", "format", ESMT_MANIFEST_FORMAT, "version",
                           ESMT_MANIFEST_VERSION, "dataset_id", id, "shards", g->shards);
  const esmt_ingest_stats *s = g->st;
  json_object_set_new(root, "stats", json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "records",
      (json_int_t)s->records, "residues", (json_int_t)s->residues, "train_records",
      (json_int_t)s->train_records, "valid_records", (json_int_t)s->valid_records, "empty_records",
      (json_int_t)s->empty_records, "skipped_records", (json_int_t)s->skipped_records,
      "unknown_letters", (json_int_t)s->unknown_letters, "duplicate_ids",
      (json_int_t)s->duplicate_ids, "longest", (json_int_t)s->longest, "too_long_records",
      (json_int_t)s->too_long_records));
  json_object_set_new(root, "valid_fraction", json_real(g->o->valid_fraction));
  if (clusters) json_object_set(root, "clusters", clusters);
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!text) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "ingest: manifest");
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/manifest.json", g->tmp);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  esmt_status st = fd < 0 ? esmt_fail(ESMT_ERR_IO, "%s: cannot create: %s", path, strerror(errno))
                          : esmt_write_all(fd, text, strlen(text), path);
  if (fd >= 0 && !st && fsync(fd) != 0) st = esmt_fail(ESMT_ERR_IO, "%s: fsync: %s", path, strerror(errno));
  if (fd >= 0) close(fd);
  free(text);
  return st;
}

/* A random identity for the new dataset, written into the manifest and
 * every shard header: the loader refuses a shard whose id differs. */
static esmt_status new_dataset_id(uint8_t id[ESMT_DATASET_ID_BYTES]) {
  size_t got = 0;
  while (got < ESMT_DATASET_ID_BYTES) {
    ssize_t n = getrandom(id + got, ESMT_DATASET_ID_BYTES - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return esmt_fail(ESMT_ERR_IO, "esmt_ingest: getrandom (a dataset id): %s",
                       n < 0 ? strerror(errno) : "no bytes");
    got += (size_t)n;
  }
  return ESMT_OK;
}

esmt_status esmt_ingest(const esmt_ingest_options *o, esmt_ingest_stats *stats) {
  const char *fn = "esmt_ingest";
  ESMT_CHECK_ARG(o, fn, "options are NULL");
  /* an older caller's shorter struct: the appended fields keep their defaults */
  esmt_status st = esmt_check_struct(fn, "esmt_ingest_options", o->struct_size,
                                     offsetof(esmt_ingest_options, clusters));
  if (st) return st;
  esmt_ingest_options full = ESMT_INGEST_OPTIONS_INIT;
  memcpy(&full, o, o->struct_size < sizeof full ? o->struct_size : sizeof full);
  full.struct_size = sizeof full;
  o = &full;
  if (!o->inputs || o->n_inputs < 1 || !o->output_dir || !*o->output_dir)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: need at least one input and an output_dir", fn);
  if (!(o->valid_fraction >= 0 && o->valid_fraction < 1) || o->shard_tokens == 0 ||
      (unsigned)o->unknown > ESMT_UNKNOWN_FAIL || (unsigned)o->gaps > ESMT_GAPS_FAIL)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: valid_fraction must be in [0, 1), "
                     "shard_tokens > 0, and the policies known", fn);
  /* counted in a whole struct, copied out up to the caller's size */
  if (stats && (st = esmt_check_struct(fn, "esmt_ingest_stats", stats->struct_size,
                                       offsetof(esmt_ingest_stats, clusters_listed))))
    return st;
  esmt_ingest_stats *caller_stats = stats, whole = ESMT_INGEST_STATS_INIT;
  stats = &whole;

  ingest g;
  memset(&g, 0, sizeof g);
  g.o = o;
  g.st = stats;
  g.t0 = esmt_now_s();
  g.out[0].fd = g.out[1].fd = -1;
  g.out[1].split = 1;
  struct stat sb;
  int stdin_at = -1;
  for (int i = 0; i < o->n_inputs; i++) {
    if (!o->inputs[i]) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: input %d is NULL", fn, i);
    if (!strcmp(o->inputs[i], "-")) {
      if (stdin_at >= 0)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: standard input ('-') is given twice "
                         "(inputs %d and %d): it can be read once", fn, stdin_at + 1, i + 1);
      stdin_at = i;
    }
  }
  /* the size of the whole input when every input is a regular file;
   * unknown (0) with standard input */
  for (int i = 0; i < o->n_inputs && stdin_at < 0; i++)
    if (stat(o->inputs[i], &sb) == 0 && S_ISREG(sb.st_mode)) g.total_bytes += (uint64_t)sb.st_size;
  if ((st = new_dataset_id(g.dataset_id))) return st;
  /* the cluster file before anything is created: a bad one leaves nothing */
  if (o->valid_clusters && !o->clusters)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: valid_clusters (%llu) needs a cluster file "
                     "(options.clusters, ingest --clusters FILE)", fn,
                     (unsigned long long)o->valid_clusters);
  if (o->clusters && (st = esmt_cluster_ingest_open(o->clusters, o->valid_clusters, o->progress,
                                                    o->progress_user, &g.clusters)))
    return esmt_fail_prefix(st, "%s: clusters: ", fn);
  /* The destination must be new or empty: never mix or clobber datasets. */
  const esmt_out_dir_rules rules = {fn, NULL, NULL, 0, NULL};
  if ((st = esmt_out_dir_begin(&g.od, o->output_dir, &rules))) {
    esmt_cluster_ingest_free(g.clusters);
    return st;
  }
  g.tmp = g.od.work;
  g.shards = json_array();
  for (int i = 0; i < o->n_inputs && !st; i++) st = ingest_file(&g, o->inputs[i]);
  if (!st && stats->records == 0)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: no residues found in the input (%llu empty records, "
                   "%llu skipped, %llu longer than max_residues)", fn,
                   (unsigned long long)stats->empty_records,
                   (unsigned long long)stats->skipped_records,
                   (unsigned long long)stats->too_long_records);
  free(g.seen); /* the inputs are read: its memory goes before the cluster indexes' */
  g.seen = NULL;
  if (!st) st = shard_close(&g, &g.out[0]);
  if (!st) st = shard_close(&g, &g.out[1]);
  json_t *clusters_json = NULL;
  if (!st && g.clusters)
    st = esmt_cluster_ingest_finish(g.clusters, g.tmp, g.dataset_id, stats, &clusters_json);
  if (!st) st = write_manifest(&g, clusters_json);
  json_decref(clusters_json);
  for (int k = 0; k < 2; k++)
    if (g.out[k].fd >= 0) { close(g.out[k].fd); g.out[k].fd = -1; }
  if (!st) st = esmt_out_dir_publish(&g.od, "manifest.json"); /* the manifest last */
  if (st) esmt_out_dir_abort(&g.od); /* nothing partial survives */
  for (int k = 0; k < 2; k++) free(g.out[k].index);
  free(g.seen);
  free(g.tok);
  json_decref(g.shards);
  esmt_cluster_ingest_free(g.clusters);
  stats->bytes_read = g.done_bytes;
  stats->seconds = esmt_now_s() - g.t0;
  if (caller_stats) {
    const uint32_t size = caller_stats->struct_size;
    memcpy(caller_stats, stats, size < sizeof *stats ? size : sizeof *stats);
    caller_stats->struct_size = size;
  }
  return st;
}
