/* SPDX-License-Identifier: MIT */
/* A cluster file read at ingest: "representative TAB member" lines (MMseqs2
 * easy-cluster/createtsv, or UniRef50 -> UniRef90 ids), plain or gzip, as a
 * lookup from a member id to its cluster. Ids are kept as 64-bit hashes
 * (the ingest's own id hash), so memory is 12 bytes per member and 8 per
 * cluster whatever the ids' lengths (16 while reading): 5 million members
 * take 60 MB. Two ids
 * with one hash would be one id; at 5 million members the chance of that
 * is below 1e-6. */
#ifndef ESMTRAIN_CLUSTER_MAP_H
#define ESMTRAIN_CLUSTER_MAP_H

#include "internal.h"

typedef struct esmt_cluster_member {
  uint64_t id_hash;
  uint32_t cluster;          /* index into rep_hash */
  uint32_t line;             /* the line's order, for "the first listed wins" (saturates) */
} esmt_cluster_member;

typedef struct __attribute__((packed)) esmt_cluster_entry {
  uint64_t id_hash;
  uint32_t cluster;
} esmt_cluster_entry;

_Static_assert(sizeof(esmt_cluster_entry) == 12, "a member takes 12 bytes");

typedef struct esmt_cluster_map {
  uint64_t *rep_hash;        /* hash of each cluster's representative id, in order of listing */
  uint64_t clusters;
  /* one entry per member id, sorted by hash: 12 bytes a member, hash and
   * cluster side by side so that a lookup misses the cache once (the
   * lines' 16-byte records are compacted into these once read) */
  struct esmt_cluster_entry *members;
  uint64_t count;
  uint64_t *dir;             /* [2^dir_bits + 1]: first entry of each top-bits bucket */
  int dir_bits;
  uint64_t duplicate_members; /* repeated lines, or a member listed in a second cluster */
} esmt_cluster_map;

/* The id hash that ingest uses for splits and duplicates (FNV-1a + finaliser). */
ESMT_HIDDEN uint64_t esmt_id_hash(const char *id);
ESMT_HIDDEN uint64_t esmt_id_hash_n(const char *id, size_t len);

/* Read `path`. A line is "REP<TAB>MEMBER" (more columns are ignored; a
 * '\r' before the newline and blank lines too); any other line fails with
 * ESMT_ERR_FORMAT naming the file and line. `progress`/`user` get stage
 * "clusters" in bytes read (may be NULL; non-zero cancels). */
ESMT_HIDDEN esmt_status esmt_cluster_map_read(const char *path, esmt_cluster_map *map,
                                              esmt_progress_fn progress, void *user);

/* The cluster of member `id_hash`, or -1 when no line names it. */
ESMT_HIDDEN int64_t esmt_cluster_map_find(const esmt_cluster_map *map, uint64_t id_hash);

ESMT_HIDDEN void esmt_cluster_map_free(esmt_cluster_map *map);

#endif
