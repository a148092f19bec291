/* SPDX-License-Identifier: MIT */
/* Clusters during an ingest (cluster_ingest.h). */
#define _POSIX_C_SOURCE 200809L
#include "cluster_ingest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_index.h"
#include "cluster_map.h"
#include "dataset_manifest.h"

struct esmt_cluster_ingest {
  char *source;                 /* the cluster file's name, for the manifest */
  esmt_cluster_map map;
  uint8_t *used;                /* bit per listed cluster: a record of the input is in it */
  uint64_t singletons;          /* records without a cluster: clusters C, C + 1, ... */
  uint32_t *cluster_of[2];      /* per split, per record */
  uint64_t n[2], cap[2];
  uint64_t valid_clusters;
  uint64_t held_out_below;      /* with valid_clusters: held out when rep hash % M <= this */
};

static int cmp_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static esmt_status choose_held_out(esmt_cluster_ingest *ci, const char *path) {
  const uint64_t n = ci->map.clusters;
  if (ci->valid_clusters >= n)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s lists %llu clusters: holding out %llu for "
                     "validation would leave none to train on", path, (unsigned long long)n,
                     (unsigned long long)ci->valid_clusters);
  uint64_t *u = malloc(n * sizeof *u);
  if (!u) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
  for (uint64_t c = 0; c < n; c++) u[c] = ci->map.rep_hash[c] % ESMT_SPLIT_MODULUS;
  qsort(u, n, sizeof *u, cmp_u64); /* once per ingest: a million clusters take ~0.1 s */
  ci->held_out_below = u[ci->valid_clusters - 1];
  free(u);
  return ESMT_OK;
}

int esmt_cluster_ingest_held_out(const esmt_cluster_ingest *ci, uint32_t c) {
  return c < ci->map.clusters && ci->map.rep_hash[c] % ESMT_SPLIT_MODULUS <= ci->held_out_below;
}

esmt_status esmt_cluster_ingest_open(const char *path, uint64_t valid_clusters,
                                     esmt_progress_fn progress, void *user,
                                     esmt_cluster_ingest **out) {
  *out = NULL;
  esmt_cluster_ingest *ci = calloc(1, sizeof *ci);
  if (!ci) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
  ci->valid_clusters = valid_clusters;
  const char *base = strrchr(path, '/');
  ci->source = strdup(base ? base + 1 : path);
  esmt_status st = ci->source ? esmt_cluster_map_read(path, &ci->map, progress, user)
                              : esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
  if (!st && !(ci->used = calloc(ci->map.clusters / 8 + 1, 1)))
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
  if (!st && valid_clusters) st = choose_held_out(ci, path);
  if (st) {
    esmt_cluster_ingest_free(ci);
    return st;
  }
  *out = ci;
  return ESMT_OK;
}

/* "sp|P12345|NAME_HUMAN" -> the hash of "P12345"; 0 for other ids. */
static uint64_t accession_hash(const char *id) {
  const char *a = strchr(id, '|');
  const char *b = a ? strchr(a + 1, '|') : NULL;
  return b && b > a + 1 ? esmt_id_hash_n(a + 1, (size_t)(b - a - 1)) : 0;
}

esmt_status esmt_cluster_ingest_assign(esmt_cluster_ingest *ci, const char *id, uint64_t id_hash,
                                       uint64_t *split_hash, uint32_t *cluster) {
  int64_t c = esmt_cluster_map_find(&ci->map, id_hash);
  const uint64_t acc = c < 0 ? accession_hash(id) : 0;
  if (acc) c = esmt_cluster_map_find(&ci->map, acc);
  if (c >= 0) {
    ci->used[c / 8] |= (uint8_t)(1u << (c % 8));
    *cluster = (uint32_t)c;
    *split_hash = ci->map.rep_hash[c];
    return ESMT_OK;
  }
  if (ci->map.clusters + ci->singletons >= UINT32_MAX)
    return esmt_fail(ESMT_ERR_FORMAT, "ingest: more than 4 billion clusters");
  *cluster = (uint32_t)(ci->map.clusters + ci->singletons++);
  *split_hash = id_hash; /* a cluster of its own: split as without clusters */
  return ESMT_OK;
}

esmt_status esmt_cluster_ingest_add(esmt_cluster_ingest *ci, int split, uint32_t cluster) {
  if (ci->n[split] == ci->cap[split]) {
    uint64_t ncap = ci->cap[split] ? 2 * ci->cap[split] : 1 << 16;
    uint32_t *p = realloc(ci->cluster_of[split], ncap * sizeof *p);
    if (!p) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "ingest: out of memory (cluster of each "
                             "record)");
    ci->cluster_of[split] = p;
    ci->cap[split] = ncap;
  }
  ci->cluster_of[split][ci->n[split]++] = cluster;
  return ESMT_OK;
}

esmt_status esmt_cluster_ingest_finish(esmt_cluster_ingest *ci, const char *dir,
                                       const uint8_t id[ESMT_DATASET_ID_BYTES],
                                       esmt_ingest_stats *stats, json_t **manifest) {
  *manifest = NULL;
  const uint64_t listed = ci->map.clusters, total = listed + ci->singletons;
  uint64_t empty = 0;
  for (uint64_t c = 0; c < listed; c++) empty += !((ci->used[c / 8] >> (c % 8)) & 1);
  stats->clusters_listed = listed;
  stats->unclustered_records = ci->singletons;
  stats->empty_clusters = empty;
  stats->duplicate_members = ci->map.duplicate_members;
  json_t *root = json_pack("{s:s,s:I,s:I,s:I,s:I}", "source", ci->source, "listed",
                           (json_int_t)listed, "unclustered_records",
                           (json_int_t)ci->singletons, "empty_clusters", (json_int_t)empty,
                           "duplicate_members", (json_int_t)ci->map.duplicate_members);
  esmt_cluster_map_free(&ci->map); /* its memory goes before the indexes are built */
  if (!root) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "ingest: out of memory");
  for (int split = 0; split < 2; split++) {
    if (ci->n[split] == 0) continue;
    char name[32], path[4200];
    snprintf(name, sizeof name, "%s.clusters", esmt_split_name(split));
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint64_t clusters = 0;
    uint32_t crc = 0;
    esmt_status st = esmt_cluster_index_write(path, split, id, ci->cluster_of[split],
                                              ci->n[split], total, &clusters, &crc);
    if (st) {
      json_decref(root);
      return st;
    }
    if (split) stats->valid_clusters = clusters;
    else stats->train_clusters = clusters;
    json_object_set_new(root, esmt_split_name(split),
                        json_pack("{s:s,s:I,s:I,s:I}", "file", name, "clusters",
                                  (json_int_t)clusters, "members", (json_int_t)ci->n[split],
                                  "crc32", (json_int_t)crc));
    free(ci->cluster_of[split]);
    ci->cluster_of[split] = NULL;
  }
  *manifest = root;
  return ESMT_OK;
}

void esmt_cluster_ingest_free(esmt_cluster_ingest *ci) {
  if (!ci) return;
  esmt_cluster_map_free(&ci->map);
  free(ci->used);
  free(ci->cluster_of[0]);
  free(ci->cluster_of[1]);
  free(ci->source);
  free(ci);
}
