/* SPDX-License-Identifier: MIT */
/* On-disk token shards (docs/formats.md). A dataset directory holds
 *   manifest.json                 written last; lists every shard
 *   train-00000.shard, valid-00000.shard, ...
 * A shard is a 64-byte header, the uint8 residue ids of every record back
 * to back (no cls/eos), zero padding to a multiple of 8 bytes, then
 * (records + 1) little-endian uint64 offsets into the token area. The
 * crc32 covers everything after the header.
 *
 * Version 2 (manifest and shards) adds the dataset id: 16 random bytes
 * written by ingest into manifest.json ("dataset_id", hex) and into every
 * shard header, so that a shard copied in from another dataset is refused.
 * Version 1 (older builds) is still read, with every check but that one. */
#ifndef ESMTRAIN_SHARD_FORMAT_H
#define ESMTRAIN_SHARD_FORMAT_H

#include <stdint.h>

#define ESMT_SHARD_MAGIC "ESMTSHRD"
#define ESMT_SHARD_VERSION 2u
#define ESMT_MANIFEST_FORMAT "esmtrain-dataset"
#define ESMT_MANIFEST_VERSION 2
#define ESMT_DATASET_MIN_VERSION 1 /* the oldest version still read */
#define ESMT_DATASET_ID_BYTES 16

/* The ids ingest writes into a shard: <unk> (3), the letters (4..28), '.'
 * (29) and '-' (30); anything else in a shard is corruption. */
#define ESMT_SHARD_TOKEN_MIN 3
#define ESMT_SHARD_TOKEN_MAX 30

typedef struct esmt_shard_header {
  char magic[8];
  uint32_t version;
  uint32_t header_size;      /* 64 */
  uint64_t records;
  uint64_t tokens;
  uint64_t index_offset;     /* 64 + tokens rounded up to a multiple of 8 */
  uint32_t crc32;            /* of tokens, padding and index */
  uint32_t split;            /* 0 train, 1 valid */
  uint8_t dataset_id[ESMT_DATASET_ID_BYTES]; /* version 2; zero (reserved) in version 1 */
} esmt_shard_header;

_Static_assert(sizeof(esmt_shard_header) == 64, "shard header is 64 bytes");

#endif
