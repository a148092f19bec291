/* SPDX-License-Identifier: MIT */
/* A dataset's manifest.json read and checked on its own (format, version,
 * dataset id, one well-formed entry per shard, no shard listed twice,
 * stats totals equal to the entries' sums). The shard files are checked
 * against these entries by shard_verify.h. */
#ifndef ESMTRAIN_DATASET_MANIFEST_H
#define ESMTRAIN_DATASET_MANIFEST_H

#include "internal.h"
#include "shard_format.h"

typedef struct esmt_manifest_entry {
  char *file;                /* a name inside the dataset directory */
  int split;                 /* 0 train, 1 valid */
  uint64_t records, tokens;
  uint32_t crc32;
} esmt_manifest_entry;

/* A split's cluster index (ingest --clusters; cluster_index.h). */
typedef struct esmt_manifest_clusters {
  char *file;                /* NULL: the dataset has no clusters */
  uint64_t clusters;
  uint32_t crc32;
} esmt_manifest_clusters;

typedef struct esmt_dataset_manifest {
  char *path;                /* DIR/manifest.json, for messages */
  int version;               /* 1 (no dataset id) or 2 */
  uint8_t dataset_id[ESMT_DATASET_ID_BYTES]; /* version 2 */
  esmt_manifest_entry *entries;
  size_t count;
  esmt_manifest_clusters clusters[2]; /* per split; "clusters" in the manifest */
} esmt_dataset_manifest;

/* Read DIR/manifest.json (a regular file: never blocks on a FIFO). Every
 * failure is ESMT_ERR_FORMAT (ESMT_ERR_OUT_OF_MEMORY aside) with a message
 * naming the file and the field. */
ESMT_HIDDEN esmt_status esmt_manifest_load(const char *dir, esmt_dataset_manifest *m);
ESMT_HIDDEN void esmt_manifest_free(esmt_dataset_manifest *m);

/* "train" / "valid". */
ESMT_HIDDEN const char *esmt_split_name(int split);

/* 32 lowercase hex digits and a NUL into out[33]. */
ESMT_HIDDEN void esmt_dataset_id_hex(const uint8_t id[ESMT_DATASET_ID_BYTES], char out[33]);

#endif
