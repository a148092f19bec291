/* See shard_set.h. Checks run once at open: everything a corrupt or
 * truncated shard could break is refused before any batch is made. */
#define _POSIX_C_SOURCE 200809L
#include "shard_set.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "shard_format.h"

static esmt_status map_shard(const char *path, int split, esmt_shard_map *m) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return esmt_fail(ESMT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || sb.st_size < (off_t)sizeof(esmt_shard_header)) {
    close(fd);
    return esmt_fail(ESMT_ERR_FORMAT, "%s: too short to be a shard (truncated?)", path);
  }
  void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return esmt_fail(ESMT_ERR_IO, "%s: mmap: %s", path, strerror(errno));
  esmt_shard_header h;
  memcpy(&h, map, sizeof h);
  esmt_status st = ESMT_OK;
  uint64_t need = sizeof h + h.tokens + (h.records + 1) * sizeof(uint64_t);
  if (memcmp(h.magic, ESMT_SHARD_MAGIC, 8) != 0)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: not an esmtrain shard (bad magic)", path);
  else if (h.version != ESMT_SHARD_VERSION || h.header_size != sizeof h)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: shard version %u, this library reads %u", path,
                   h.version, ESMT_SHARD_VERSION);
  else if (h.records > (1ull << 40) || h.tokens > (1ull << 50) || h.index_offset != sizeof h + h.tokens ||
           need != (uint64_t)sb.st_size)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: sizes do not add up (%llu bytes on disk, %llu expected): "
                   "truncated or corrupt", path, (unsigned long long)sb.st_size,
                   (unsigned long long)need);
  else if ((int)h.split != split)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: shard of the wrong split", path);
  if (!st) {
    const uint8_t *base = map;
    uLong crc = crc32(0L, Z_NULL, 0);
    for (uint64_t off = sizeof h; off < (uint64_t)sb.st_size;) {
      uint64_t chunk = (uint64_t)sb.st_size - off > (1u << 30) ? (1u << 30) : (uint64_t)sb.st_size - off;
      crc = crc32(crc, base + off, (uInt)chunk);
      off += chunk;
    }
    if ((uint32_t)crc != h.crc32)
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: checksum mismatch: the shard is corrupt", path);
  }
  if (!st) {
    m->map = map;
    m->size = (size_t)sb.st_size;
    m->tokens = (const uint8_t *)map + sizeof h;
    m->index = (const uint64_t *)((const uint8_t *)map + h.index_offset);
    m->records = h.records;
    /* offsets must be monotone and inside the token area */
    for (uint64_t i = 0; i < h.records && !st; i++)
      if (m->index[i] > m->index[i + 1] || m->index[i + 1] > h.tokens ||
          m->index[i + 1] - m->index[i] > UINT32_MAX)
        st = esmt_fail(ESMT_ERR_FORMAT, "%s: record %llu has a bad offset", path,
                       (unsigned long long)i);
    for (uint64_t k = 0; k < h.tokens && !st; k++)
      if (m->tokens[k] >= ESMT_VOCAB_SIZE)
        st = esmt_fail(ESMT_ERR_FORMAT, "%s: token %u at byte %llu is not in the alphabet", path,
                       m->tokens[k], (unsigned long long)k);
  }
  if (st) munmap(map, (size_t)sb.st_size);
  return st;
}

esmt_status esmt_shard_set_open(const char *dir, int split, esmt_shard_set *set) {
  memset(set, 0, sizeof *set);
  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: %s (is '%s' a dataset made by `esmtrain-example "
                     "ingest`?)", path, err.text, dir);
  const char *fmt = json_string_value(json_object_get(root, "format"));
  json_t *shards = json_object_get(root, "shards");
  esmt_status st = ESMT_OK;
  if (!fmt || strcmp(fmt, ESMT_MANIFEST_FORMAT) != 0 || !json_is_array(shards))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: not an esmtrain dataset manifest", path);
  size_t n = st ? 0 : json_array_size(shards);
  set->shards = calloc(n ? n : 1, sizeof *set->shards);
  set->first = calloc(n + 1, sizeof *set->first);
  if (!st && (!set->shards || !set->first)) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "loader: out of memory");
  const char *want = split ? "valid" : "train";
  for (size_t i = 0; i < n && !st; i++) {
    json_t *e = json_array_get(shards, i);
    const char *file = json_string_value(json_object_get(e, "file"));
    const char *sp = json_string_value(json_object_get(e, "split"));
    if (!file || !sp || strchr(file, '/')) {
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: shard entry %zu is malformed", path, i);
      break;
    }
    if (strcmp(sp, want) != 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    esmt_shard_map *m = &set->shards[set->count];
    if ((st = map_shard(path, split, m))) break;
    set->first[set->count] = set->records;
    set->records += m->records;
    set->count++;
  }
  json_decref(root);
  if (!st && set->records == 0)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: the %s split is empty", dir, want);
  if (st) esmt_shard_set_close(set);
  else set->first[set->count] = set->records;
  return st;
}

void esmt_shard_set_close(esmt_shard_set *set) {
  for (int i = 0; i < set->count; i++) munmap(set->shards[i].map, set->shards[i].size);
  free(set->shards);
  free(set->first);
  memset(set, 0, sizeof *set);
}

const uint8_t *esmt_shard_set_record(const esmt_shard_set *set, uint64_t id, uint32_t *len) {
  int lo = 0, hi = set->count - 1; /* the shard holding id */
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (set->first[mid] <= id) lo = mid;
    else hi = mid - 1;
  }
  const esmt_shard_map *m = &set->shards[lo];
  uint64_t k = id - set->first[lo];
  *len = (uint32_t)(m->index[k + 1] - m->index[k]);
  return m->tokens + m->index[k];
}
