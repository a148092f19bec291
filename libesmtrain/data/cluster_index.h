/* SPDX-License-Identifier: MIT */
/* A split's cluster index, DIR/<split>.clusters (docs/formats.md): which
 * records of the split form each cluster, written by ingest --clusters and
 * read by the loader's cluster sampling. A 64-byte header, (clusters + 1)
 * uint64 offsets into the member list, then one uint64 record number (in
 * the split's shard order) per member, each record exactly once, grouped
 * by cluster; crc32 (zlib) over everything after the header. The loader
 * reads entries with pread, as it reads the shards' indexes: random
 * clusters through a mapping would map their neighbours too and the
 * resident set would grow with the dataset. */
#ifndef ESMTRAIN_CLUSTER_INDEX_H
#define ESMTRAIN_CLUSTER_INDEX_H

#include "internal.h"
#include "shard_format.h"

#define ESMT_CLUSTER_MAGIC "ESMTCLST"
#define ESMT_CLUSTER_VERSION 1u

typedef struct esmt_cluster_header {
  char magic[8];
  uint32_t version;
  uint32_t header_size;      /* 64 */
  uint64_t clusters;
  uint64_t members;          /* = the split's records */
  uint32_t crc32;            /* of offsets and members */
  uint32_t split;            /* 0 train, 1 valid */
  uint64_t reserved;         /* 0 */
  uint8_t dataset_id[ESMT_DATASET_ID_BYTES];
} esmt_cluster_header;

_Static_assert(sizeof(esmt_cluster_header) == 64, "cluster header is 64 bytes");

/* Write the index of one split: record i (0 <= i < n) is in cluster
 * cluster_of[i] (< total_clusters; clusters without a record of this split
 * are left out, the others keep their order). *clusters and *crc get what
 * the manifest lists. */
ESMT_HIDDEN esmt_status esmt_cluster_index_write(const char *path, int split,
                                                 const uint8_t dataset_id[ESMT_DATASET_ID_BYTES],
                                                 const uint32_t *cluster_of, uint64_t n,
                                                 uint64_t total_clusters, uint64_t *clusters,
                                                 uint32_t *crc);

typedef struct esmt_cluster_index {
  int fd;
  char *path;
  uint64_t clusters, members;
} esmt_cluster_index;

/* Open DIR/<file> and check it whole against what the manifest says
 * (clusters, crc32), the split, the dataset id and the split's record
 * count: header fields, crc32, offsets that start at 0, grow and end at
 * the member count, and every record exactly once. Each refusal names the
 * file and the field. */
ESMT_HIDDEN esmt_status esmt_cluster_index_open(const char *dir, const char *file, int split,
                                                const uint8_t dataset_id[ESMT_DATASET_ID_BYTES],
                                                uint64_t records, uint64_t clusters,
                                                uint32_t crc, esmt_cluster_index *idx);
ESMT_HIDDEN void esmt_cluster_index_close(esmt_cluster_index *idx);

/* Size of cluster c and its member k (0 <= k < size): a record number. */
ESMT_HIDDEN esmt_status esmt_cluster_index_size(const esmt_cluster_index *idx, uint64_t c,
                                                uint64_t *first, uint64_t *size);
ESMT_HIDDEN esmt_status esmt_cluster_index_member(const esmt_cluster_index *idx, uint64_t at,
                                                  uint64_t *record);

#endif
