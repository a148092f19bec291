/* SPDX-License-Identifier: MIT */
/* A dataset directory opened for reading: manifest + memory-mapped
 * shards of one split, each verified (magic, version, sizes, crc32). */
#ifndef ESMTRAIN_SHARD_SET_H
#define ESMTRAIN_SHARD_SET_H

#include "internal.h"

typedef struct esmt_shard_map {
  void *map;
  size_t size;
  int fd;                    /* kept open: index entries are read with pread */
  char *path;
  const uint8_t *tokens;
  uint64_t index_offset;     /* file offset of the records + 1 offsets */
  uint64_t records, token_count;
} esmt_shard_map;

typedef struct esmt_shard_set {
  esmt_shard_map *shards;
  int count;
  uint64_t *first;           /* global id of each shard's first record */
  uint64_t records;
} esmt_shard_set;

ESMT_HIDDEN esmt_status esmt_shard_set_open(const char *dir, int split, esmt_shard_set *set);
ESMT_HIDDEN void esmt_shard_set_close(esmt_shard_set *set);
/* Residues of record `id` (0 <= id < records), a view into the mapping.
 * The index entries are read with pread rather than through the mapping:
 * the loader visits records in random order, and every page touched in a
 * file mapping maps its neighbours too (fault-around, large folios). An
 * index that no longer fits the shard (the file changed after the checks)
 * is an error, never an out-of-bounds read. */
ESMT_HIDDEN esmt_status esmt_shard_set_record(const esmt_shard_set *set, uint64_t id,
                                              const uint8_t **residues, uint32_t *len);

/* Drop the pages a record's residues (from esmt_shard_set_record) brought
 * in, with the neighbours the kernel mapped alongside, so that the
 * resident set holds the records in use only, whatever the dataset's size. */
ESMT_HIDDEN void esmt_shard_set_release(const esmt_shard_set *set, const uint8_t *residues,
                                        uint32_t len);

#endif
