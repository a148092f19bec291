/* SPDX-License-Identifier: MIT */
/* Checks of one shard file: its header on its own and against its
 * manifest entry (one message per field, naming both values), then one
 * read of the body that computes the crc32 and, in the same pass, checks
 * every token id, the zero padding and the index. */
#ifndef ESMTRAIN_SHARD_VERIFY_H
#define ESMTRAIN_SHARD_VERIFY_H

#include "dataset_manifest.h"
#include "shard_format.h"

/* The header of `path` (file_size bytes on disk) against the format and
 * against entry `e` of manifest `m`. */
ESMT_HIDDEN esmt_status esmt_shard_check_header(const char *path, const esmt_shard_header *h,
                                                uint64_t file_size, const esmt_dataset_manifest *m,
                                                const esmt_manifest_entry *e);

/* The body of the shard open on `fd`, whose header passed the check above. */
ESMT_HIDDEN esmt_status esmt_shard_verify_body(int fd, const char *path, const esmt_shard_header *h);

#endif
