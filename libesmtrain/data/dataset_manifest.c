/* SPDX-License-Identifier: MIT */
/* See dataset_manifest.h. */
#define _POSIX_C_SOURCE 200809L
#include "dataset_manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input_file.h"

const char *esmt_split_name(int split) { return split ? "valid" : "train"; }

void esmt_dataset_id_hex(const uint8_t id[ESMT_DATASET_ID_BYTES], char out[33]) {
  for (int i = 0; i < ESMT_DATASET_ID_BYTES; i++) snprintf(out + 2 * i, 3, "%02x", id[i]);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int parse_id(const char *hex, uint8_t id[ESMT_DATASET_ID_BYTES]) {
  if (!hex || strlen(hex) != 2 * ESMT_DATASET_ID_BYTES) return 0;
  for (int i = 0; i < ESMT_DATASET_ID_BYTES; i++) {
    int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return 0;
    id[i] = (uint8_t)(hi << 4 | lo);
  }
  return 1;
}

/* A non-negative integer field of entry i, at most `max`. */
static esmt_status entry_uint(const esmt_dataset_manifest *m, json_t *e, size_t i, const char *key,
                              uint64_t max, uint64_t *out) {
  json_t *v = json_object_get(e, key);
  if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: shard entry %zu has no valid \"%s\" (a non-negative "
                     "integer): the manifest is damaged; re-ingest the dataset", m->path, i, key);
  *out = (uint64_t)json_integer_value(v);
  return ESMT_OK;
}

static esmt_status load_entry(esmt_dataset_manifest *m, json_t *e, size_t i) {
  esmt_manifest_entry *d = &m->entries[i];
  const char *file = json_string_value(json_object_get(e, "file"));
  const char *sp = json_string_value(json_object_get(e, "split"));
  if (!json_is_object(e) || !file || !*file || strchr(file, '/') || !strcmp(file, ".") ||
      !strcmp(file, ".."))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: shard entry %zu has no valid \"file\" (a file name "
                     "inside the dataset directory)", m->path, i);
  if (!sp || (strcmp(sp, "train") && strcmp(sp, "valid")))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: shard %s: \"split\" is %s%s%s, expected \"train\" or "
                     "\"valid\"", m->path, file, sp ? "\"" : "", sp ? sp : "missing", sp ? "\"" : "");
  d->split = !strcmp(sp, "valid");
  /* ingest names a shard after its split: a renamed entry is a mix-up */
  const char *other = esmt_split_name(!d->split);
  if (!strncmp(file, other, 5) && file[5] == '-')
    return esmt_fail(ESMT_ERR_FORMAT, "%s: shard %s: the file name says %s, the manifest's "
                     "\"split\" says %s", m->path, file, other, sp);
  uint64_t crc = 0;
  esmt_status st;
  if ((st = entry_uint(m, e, i, "records", UINT64_MAX >> 1, &d->records)) ||
      (st = entry_uint(m, e, i, "tokens", UINT64_MAX >> 1, &d->tokens)) ||
      (st = entry_uint(m, e, i, "crc32", UINT32_MAX, &crc)))
    return st;
  d->crc32 = (uint32_t)crc;
  for (size_t k = 0; k < i; k++)
    if (!strcmp(m->entries[k].file, file))
      return esmt_fail(ESMT_ERR_FORMAT, "%s: shard %s is listed twice (entries %zu and %zu): "
                       "each shard must be listed once; re-ingest the dataset", m->path, file, k, i);
  if (!(d->file = strdup(file))) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", m->path);
  return ESMT_OK;
}

/* "stats" is optional; each total it has must equal the entries' sum. */
static esmt_status check_stats(const esmt_dataset_manifest *m, json_t *stats) {
  if (!stats) return ESMT_OK;
  if (!json_is_object(stats))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: \"stats\" is not an object", m->path);
  uint64_t sum[4] = {0, 0, 0, 0}; /* records, residues, train_records, valid_records */
  for (size_t i = 0; i < m->count; i++) {
    sum[0] += m->entries[i].records;
    sum[1] += m->entries[i].tokens;
    sum[2 + m->entries[i].split] += m->entries[i].records;
  }
  static const char *const keys[4] = {"records", "residues", "train_records", "valid_records"};
  for (int k = 0; k < 4; k++) {
    json_t *v = json_object_get(stats, keys[k]);
    if (!v) continue;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) != sum[k])
      return esmt_fail(ESMT_ERR_FORMAT, "%s: stats.%s is %lld, the shard entries add up to %llu: "
                       "the manifest is inconsistent; re-ingest the dataset", m->path, keys[k],
                       json_is_integer(v) ? (long long)json_integer_value(v) : -1LL,
                       (unsigned long long)sum[k]);
  }
  return ESMT_OK;
}

/* "clusters": {"train": {"file", "clusters", "crc32"}, "valid": {...}, ...}
 * (optional; ingest --clusters). The files are checked when a loader opens
 * them for cluster sampling. */
static esmt_status load_clusters(esmt_dataset_manifest *m, json_t *cl) {
  if (!cl) return ESMT_OK;
  if (!json_is_object(cl))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: \"clusters\" is not an object", m->path);
  for (int split = 0; split < 2; split++) {
    json_t *e = json_object_get(cl, esmt_split_name(split));
    if (!e) continue;
    const char *file = json_string_value(json_object_get(e, "file"));
    json_t *n = json_object_get(e, "clusters"), *c = json_object_get(e, "crc32");
    char want[32];
    snprintf(want, sizeof want, "%s.clusters", esmt_split_name(split));
    if (!json_is_object(e) || !file || strcmp(file, want) || !json_is_integer(n) ||
        json_integer_value(n) < 1 || !json_is_integer(c) || json_integer_value(c) < 0 ||
        json_integer_value(c) > (json_int_t)UINT32_MAX)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: clusters.%s must be {\"file\": \"%s\", "
                       "\"clusters\": N >= 1, \"crc32\": C}; re-ingest the dataset", m->path,
                       esmt_split_name(split), want);
    esmt_manifest_clusters *d = &m->clusters[split];
    if (!(d->file = strdup(file))) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
    d->clusters = (uint64_t)json_integer_value(n);
    d->crc32 = (uint32_t)json_integer_value(c);
  }
  return ESMT_OK;
}

static esmt_status load_root(esmt_dataset_manifest *m, json_t *root, const char *dir) {
  const char *fmt = json_string_value(json_object_get(root, "format"));
  if (!json_is_object(root) || !fmt || strcmp(fmt, ESMT_MANIFEST_FORMAT) != 0)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: not an esmtrain dataset manifest (\"format\" is not "
                     "\"%s\"; is '%s' a dataset made by `esmtrain-example ingest`?)", m->path,
                     ESMT_MANIFEST_FORMAT, dir);
  json_t *ver = json_object_get(root, "version");
  json_int_t v = json_is_integer(ver) ? json_integer_value(ver) : -1;
  if (v < ESMT_DATASET_MIN_VERSION || v > ESMT_MANIFEST_VERSION)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: dataset version %lld, this library reads versions "
                     "%d to %d: ingest the FASTA again with this esmtrain", m->path,
                     (long long)v, ESMT_DATASET_MIN_VERSION, ESMT_MANIFEST_VERSION);
  m->version = (int)v;
  if (m->version >= 2 &&
      !parse_id(json_string_value(json_object_get(root, "dataset_id")), m->dataset_id))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: \"dataset_id\" is missing or not %d hex digits: the "
                     "manifest is damaged; re-ingest the dataset", m->path,
                     2 * ESMT_DATASET_ID_BYTES);
  json_t *shards = json_object_get(root, "shards");
  if (!json_is_array(shards))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: \"shards\" is missing or not a list", m->path);
  size_t n = json_array_size(shards);
  m->entries = calloc(n ? n : 1, sizeof *m->entries);
  if (!m->entries) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", m->path);
  esmt_status st = ESMT_OK;
  for (size_t i = 0; i < n && !st; i++)
    if (!(st = load_entry(m, json_array_get(shards, i), i))) m->count = i + 1;
  if (!st) st = check_stats(m, json_object_get(root, "stats"));
  return st ? st : load_clusters(m, json_object_get(root, "clusters"));
}

esmt_status esmt_manifest_load(const char *dir, esmt_dataset_manifest *m) {
  memset(m, 0, sizeof *m);
  size_t cap = strlen(dir) + sizeof "/manifest.json";
  if (!(m->path = malloc(cap))) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
  snprintf(m->path, cap, "%s/manifest.json", dir);
  FILE *f = NULL;
  esmt_status st = esmt_fopen_input(m->path, "dataset manifest", &f);
  if (st) {
    esmt_fail_append(ESMT_ERR_FORMAT, " (is '%s' a dataset made by `esmtrain-example ingest`?)", dir);
    esmt_manifest_free(m);
    return ESMT_ERR_FORMAT;
  }
  json_error_t err;
  json_t *root = json_loadf(f, 0, &err);
  fclose(f);
  if (!root)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: line %d: %s: not a readable manifest (is '%s' a dataset "
                   "made by `esmtrain-example ingest`?)", m->path, err.line, err.text, dir);
  else
    st = load_root(m, root, dir);
  json_decref(root);
  if (st) esmt_manifest_free(m);
  return st;
}

void esmt_manifest_free(esmt_dataset_manifest *m) {
  for (size_t i = 0; i < m->count; i++) free(m->entries[i].file);
  free(m->entries);
  free(m->clusters[0].file);
  free(m->clusters[1].file);
  free(m->path);
  memset(m, 0, sizeof *m);
}
