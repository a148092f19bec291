/* A dataset directory opened for reading: manifest + memory-mapped
 * shards of one split, each verified (magic, version, sizes, crc32). */
#ifndef ESMTRAIN_SHARD_SET_H
#define ESMTRAIN_SHARD_SET_H

#include "internal.h"

typedef struct esmt_shard_map {
  void *map;
  size_t size;
  const uint8_t *tokens;
  const uint64_t *index;     /* records + 1 offsets */
  uint64_t records;
} esmt_shard_map;

typedef struct esmt_shard_set {
  esmt_shard_map *shards;
  int count;
  uint64_t *first;           /* global id of each shard's first record */
  uint64_t records;
} esmt_shard_set;

ESMT_HIDDEN esmt_status esmt_shard_set_open(const char *dir, int split, esmt_shard_set *set);
ESMT_HIDDEN void esmt_shard_set_close(esmt_shard_set *set);
/* Residues of record `id` (0 <= id < records). */
ESMT_HIDDEN const uint8_t *esmt_shard_set_record(const esmt_shard_set *set, uint64_t id,
                                                 uint32_t *len);

/* Drop the mapping's pages behind [p, p + n) from this process's resident
 * set (they stay in the page cache): keeps the loader's RSS independent
 * of dataset size however many records it visits. */
ESMT_HIDDEN void esmt_shard_release(const void *p, size_t n);

#endif
