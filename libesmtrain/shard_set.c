/* See shard_set.h. Checks run once at open: everything a corrupt or
 * truncated shard could break is refused before any batch is made. */
#define _DEFAULT_SOURCE
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

/* Verify a shard by reading it (pread, so that the check does not make the
 * whole mapping resident), then map it for the loader's random access. */
static esmt_status verify_shard(int fd, const char *path, const esmt_shard_header *h,
                                uint64_t size) {
  static _Thread_local uint8_t buf[1 << 20];
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t prev = 0;
  const uint64_t index_end = h->index_offset + (h->records + 1) * sizeof(uint64_t);
  for (uint64_t off = sizeof *h; off < size;) {
    /* chunks never straddle the token/index boundary, and index chunks
     * hold whole entries */
    uint64_t limit = off < h->index_offset ? h->index_offset : index_end;
    size_t want = (size_t)(limit - off < sizeof buf ? limit - off : sizeof buf);
    ssize_t got = pread(fd, buf, want, (off_t)off);
    if (got != (ssize_t)want)
      return esmt_fail(ESMT_ERR_IO, "%s: read failed at byte %llu", path, (unsigned long long)off);
    crc = crc32(crc, buf, (uInt)want);
    if (off < h->index_offset) {
      for (size_t k = 0; k < want; k++)
        if (buf[k] >= ESMT_VOCAB_SIZE)
          return esmt_fail(ESMT_ERR_FORMAT, "%s: token %u at byte %llu is not in the alphabet",
                           path, buf[k], (unsigned long long)(off + k));
    } else {
      for (size_t k = 0; k + 8 <= want; k += 8) {
        uint64_t v;
        memcpy(&v, buf + k, 8);
        uint64_t entry = (off + k - h->index_offset) / 8;
        if ((entry == 0 && v != 0) || v < prev || v > h->tokens || v - prev > UINT32_MAX)
          return esmt_fail(ESMT_ERR_FORMAT, "%s: index entry %llu is out of order or range", path,
                           (unsigned long long)entry);
        prev = v;
      }
    }
    off += want;
  }
  if (prev != h->tokens)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: the index does not end at the token count", path);
  if ((uint32_t)crc != h->crc32)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: checksum mismatch: the shard is corrupt", path);
  return ESMT_OK;
}

static esmt_status map_shard(const char *path, int split, esmt_shard_map *m) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return esmt_fail(ESMT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  esmt_shard_header h;
  esmt_status st = ESMT_OK;
  if (fstat(fd, &sb) != 0 || sb.st_size < (off_t)sizeof h ||
      pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: too short to be a shard (truncated?)", path);
  const uint64_t aligned = (sizeof h + h.tokens + 7) & ~(uint64_t)7; /* index is 8-aligned */
  uint64_t need = st ? 0 : aligned + (h.records + 1) * sizeof(uint64_t);
  if (st) {
  } else if (memcmp(h.magic, ESMT_SHARD_MAGIC, 8) != 0) {
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: not an esmtrain shard (bad magic)", path);
  } else if (h.version != ESMT_SHARD_VERSION || h.header_size != sizeof h) {
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: shard version %u, this library reads %u", path,
                   h.version, ESMT_SHARD_VERSION);
  } else if (h.records > (1ull << 40) || h.tokens > (1ull << 50) ||
             h.index_offset != aligned || need != (uint64_t)sb.st_size) {
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: sizes do not add up (%llu bytes on disk, %llu "
                   "expected): truncated or corrupt", path, (unsigned long long)sb.st_size,
                   (unsigned long long)need);
  } else if ((int)h.split != split) {
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: shard of the wrong split", path);
  } else {
    st = verify_shard(fd, path, &h, (uint64_t)sb.st_size);
  }
  void *map = MAP_FAILED;
  if (!st) {
    map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) st = esmt_fail(ESMT_ERR_IO, "%s: mmap: %s", path, strerror(errno));
  }
  if (!st && !(m->path = strdup(path))) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  if (st) {
    if (map != MAP_FAILED) munmap(map, (size_t)sb.st_size);
    close(fd);
    return st;
  }
  /* Records are visited in random order: no read-ahead. */
  madvise(map, (size_t)sb.st_size, MADV_RANDOM);
  m->map = map;
  m->size = (size_t)sb.st_size;
  m->fd = fd;
  m->tokens = (const uint8_t *)map + sizeof h;
  m->index_offset = h.index_offset;
  m->records = h.records;
  m->token_count = h.tokens;
  return ESMT_OK;
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
  for (int i = 0; i < set->count; i++) {
    munmap(set->shards[i].map, set->shards[i].size);
    close(set->shards[i].fd);
    free(set->shards[i].path);
  }
  free(set->shards);
  free(set->first);
  memset(set, 0, sizeof *set);
}

static int shard_of(const esmt_shard_set *set, uint64_t id) {
  int lo = 0, hi = set->count - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (set->first[mid] <= id) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

esmt_status esmt_shard_set_record(const esmt_shard_set *set, uint64_t id,
                                  const uint8_t **residues, uint32_t *len) {
  int s = shard_of(set, id);
  const esmt_shard_map *m = &set->shards[s];
  uint64_t k = id - set->first[s], e[2];
  ssize_t got = pread(m->fd, e, sizeof e, (off_t)(m->index_offset + k * sizeof(uint64_t)));
  if (got != (ssize_t)sizeof e || e[0] > e[1] || e[1] > m->token_count || e[1] - e[0] > UINT32_MAX)
    return esmt_fail(got < 0 ? ESMT_ERR_IO : ESMT_ERR_FORMAT, "%s: record %llu: %s", m->path,
                     (unsigned long long)k, got < 0 ? strerror(errno)
                     : "index entry out of range (was the shard changed after it was opened?)");
  *residues = m->tokens + e[0];
  *len = (uint32_t)(e[1] - e[0]);
  return ESMT_OK;
}

/* A page fault on a file mapping maps more than the page: Linux's
 * fault-around (64 KiB, aligned in the address space) and, on filesystems
 * with large folios (ext4, xfs), the whole folio (up to 2 MiB, aligned in
 * the file). Release the 2 MiB blocks of the file around [p, p + n), plus
 * a fault-around's worth either side: O(1) work, whatever the file size. */
#define FOLIO_MAX ((uintptr_t)2 << 20)
#define FAULT_AROUND ((uintptr_t)64 << 10)

/* Unmap [a, a + n) of a mapping from this process's resident set (the
 * pages stay in the page cache). */
static void unmap_pages(uintptr_t a, size_t n) {
  static long page;
  if (!page) page = sysconf(_SC_PAGESIZE);
  uintptr_t lo = a & ~(uintptr_t)(page - 1);
  uintptr_t hi = (a + n + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
  madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void release_around(const esmt_shard_map *m, const void *p, size_t n) {
  uintptr_t base = (uintptr_t)m->map; /* file offset 0 */
  uintptr_t a = (((uintptr_t)p - base) & ~(FOLIO_MAX - 1));
  uintptr_t b = (((uintptr_t)p - base + n + FOLIO_MAX - 1) & ~(FOLIO_MAX - 1)) + FAULT_AROUND;
  a = a > FAULT_AROUND ? a - FAULT_AROUND : 0;
  if (b > m->size) b = m->size;
  if (b > a) unmap_pages(base + a, b - a);
}

void esmt_shard_set_release(const esmt_shard_set *set, const uint8_t *residues, uint32_t len) {
  for (int s = 0; s < set->count; s++) {
    const esmt_shard_map *m = &set->shards[s];
    uintptr_t p = (uintptr_t)residues, t = (uintptr_t)m->tokens;
    if (p >= t && p < t + m->token_count) {
      release_around(m, residues, len);
      return;
    }
  }
}
