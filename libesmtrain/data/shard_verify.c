/* SPDX-License-Identifier: MIT */
/* See shard_verify.h. */
#define _POSIX_C_SOURCE 200809L
#include "shard_verify.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_RECORDS (1ull << 40)
#define MAX_TOKENS (1ull << 50)

static esmt_status check_format(const char *path, const esmt_shard_header *h, uint64_t file_size,
                                int manifest_version) {
  if (memcmp(h->magic, ESMT_SHARD_MAGIC, 8) != 0)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: not an esmtrain shard (bad magic)", path);
  if (h->version < ESMT_DATASET_MIN_VERSION || h->version > ESMT_SHARD_VERSION)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: shard version %u, this library reads versions %d to "
                     "%u", path, h->version, ESMT_DATASET_MIN_VERSION, ESMT_SHARD_VERSION);
  if ((int)h->version != manifest_version)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: shard version %u in a version-%d dataset: the shard "
                     "comes from another dataset; re-ingest the dataset", path, h->version,
                     manifest_version);
  if (h->header_size != sizeof *h)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: header_size is %u, expected %zu: corrupt header", path,
                     h->header_size, sizeof *h);
  if (h->records > MAX_RECORDS)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: records is %llu, more than the %llu a shard can hold: "
                     "corrupt header", path, (unsigned long long)h->records, MAX_RECORDS);
  if (h->tokens > MAX_TOKENS)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: tokens is %llu, more than the %llu a shard can hold: "
                     "corrupt header", path, (unsigned long long)h->tokens, MAX_TOKENS);
  const uint64_t aligned = (sizeof *h + h->tokens + 7) & ~(uint64_t)7;
  if (h->index_offset != aligned)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: index_offset is %llu, expected %llu (64 + %llu tokens "
                     "rounded up to a multiple of 8): corrupt header", path,
                     (unsigned long long)h->index_offset, (unsigned long long)aligned,
                     (unsigned long long)h->tokens);
  const uint64_t need = aligned + (h->records + 1) * sizeof(uint64_t);
  if (file_size != need)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: %llu bytes on disk, %llu expected for %llu records of "
                     "%llu tokens: truncated or corrupt", path, (unsigned long long)file_size,
                     (unsigned long long)need, (unsigned long long)h->records,
                     (unsigned long long)h->tokens);
  if (h->split > 1)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: split field is %u, expected 0 (train) or 1 (valid): "
                     "corrupt header", path, h->split);
  return ESMT_OK;
}

static esmt_status differ(const char *path, const char *field, unsigned long long manifest,
                          unsigned long long file) {
  return esmt_fail(ESMT_ERR_FORMAT, "%s: %s: the manifest says %llu, the shard header says %llu: "
                   "the shard does not belong to this manifest (replaced or changed?); re-ingest "
                   "the dataset", path, field, manifest, file);
}

esmt_status esmt_shard_check_header(const char *path, const esmt_shard_header *h,
                                    uint64_t file_size, const esmt_dataset_manifest *m,
                                    const esmt_manifest_entry *e) {
  esmt_status st = check_format(path, h, file_size, m->version);
  if (st) return st;
  if ((int)h->split != e->split)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: split: the manifest says %s, the shard header says %s",
                     path, esmt_split_name(e->split), esmt_split_name((int)h->split));
  if (m->version >= 2 && memcmp(h->dataset_id, m->dataset_id, ESMT_DATASET_ID_BYTES) != 0) {
    char want[33], got[33];
    esmt_dataset_id_hex(m->dataset_id, want);
    esmt_dataset_id_hex(h->dataset_id, got);
    return esmt_fail(ESMT_ERR_FORMAT, "%s: dataset_id: the manifest says %s, the shard header "
                     "says %s: the shard belongs to another dataset (copied in from another "
                     "ingest?); re-ingest the dataset", path, want, got);
  }
  if (h->records != e->records) return differ(path, "records", e->records, h->records);
  if (h->tokens != e->tokens) return differ(path, "tokens", e->tokens, h->tokens);
  if (h->crc32 != e->crc32) return differ(path, "crc32", e->crc32, h->crc32);
  return ESMT_OK;
}

/* The record holding token `t` (a byte offset into the token area), found
 * by a binary search of the index; -1 when the index cannot say. Only on
 * the error path. */
static long long record_of(int fd, const esmt_shard_header *h, uint64_t t) {
  uint64_t lo = 0, hi = h->records; /* index[lo] <= t < index[hi] */
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2, v;
    if (pread(fd, &v, sizeof v, (off_t)(h->index_offset + mid * sizeof v)) != (ssize_t)sizeof v)
      return -1;
    if (v <= t) lo = mid;
    else hi = mid;
  }
  return h->records ? (long long)lo : -1;
}

static esmt_status bad_token(int fd, const char *path, const esmt_shard_header *h, uint64_t off,
                             unsigned value) {
  uint64_t t = off - sizeof *h;
  long long rec = record_of(fd, h, t);
  char where[64] = "an unknown record";
  if (rec >= 0) snprintf(where, sizeof where, "record %lld", rec);
  return esmt_fail(ESMT_ERR_FORMAT, "%s: %s, token %llu (byte %llu of the file): id %u is not a "
                   "residue id (%d..%d): corrupt shard; re-ingest the dataset", path, where,
                   (unsigned long long)t, (unsigned long long)off, value, ESMT_SHARD_TOKEN_MIN,
                   ESMT_SHARD_TOKEN_MAX);
}

/* Read with pread in 1 MiB chunks (the check does not make a mapping
 * resident). Chunks never straddle the end of the tokens, the padding or
 * the index, and index chunks hold whole entries. */
esmt_status esmt_shard_verify_body(int fd, const char *path, const esmt_shard_header *h) {
  static _Thread_local uint8_t buf[1 << 20];
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t prev = 0;
  const uint64_t tokens_end = sizeof *h + h->tokens;
  const uint64_t index_end = h->index_offset + (h->records + 1) * sizeof(uint64_t);
  for (uint64_t off = sizeof *h; off < index_end;) {
    uint64_t limit = off < tokens_end ? tokens_end : off < h->index_offset ? h->index_offset
                                                                           : index_end;
    size_t want = (size_t)(limit - off < sizeof buf ? limit - off : sizeof buf);
    ssize_t got = pread(fd, buf, want, (off_t)off);
    if (got != (ssize_t)want)
      return esmt_fail(ESMT_ERR_IO, "%s: read failed at byte %llu: %s", path,
                       (unsigned long long)off, got < 0 ? strerror(errno) : "file shrank");
    crc = crc32(crc, buf, (uInt)want);
    if (off < tokens_end) {
      for (size_t k = 0; k < want; k++)
        if (buf[k] < ESMT_SHARD_TOKEN_MIN || buf[k] > ESMT_SHARD_TOKEN_MAX)
          return bad_token(fd, path, h, off + k, buf[k]);
    } else if (off < h->index_offset) {
      for (size_t k = 0; k < want; k++)
        if (buf[k])
          return esmt_fail(ESMT_ERR_FORMAT, "%s: padding byte %llu is 0x%02x, expected 0: corrupt "
                           "shard", path, (unsigned long long)(off + k), buf[k]);
    } else {
      for (size_t k = 0; k + 8 <= want; k += 8) {
        uint64_t v;
        memcpy(&v, buf + k, 8);
        uint64_t entry = (off + k - h->index_offset) / 8;
        if ((entry == 0 && v != 0) || v < prev || v > h->tokens || v - prev > UINT32_MAX)
          return esmt_fail(ESMT_ERR_FORMAT, "%s: index entry %llu is %llu, out of order or "
                           "range (previous %llu, %llu tokens): corrupt shard", path,
                           (unsigned long long)entry, (unsigned long long)v,
                           (unsigned long long)prev, (unsigned long long)h->tokens);
        prev = v;
      }
    }
    off += want;
  }
  if (prev != h->tokens)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: the index ends at %llu, not at the token count %llu: "
                     "corrupt shard", path, (unsigned long long)prev, (unsigned long long)h->tokens);
  if ((uint32_t)crc != h->crc32)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: checksum mismatch (crc32 0x%08x, the header says "
                     "0x%08x): the shard is corrupt; re-ingest the dataset", path,
                     (unsigned)(uint32_t)crc, (unsigned)h->crc32);
  return ESMT_OK;
}
