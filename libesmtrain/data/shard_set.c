/* SPDX-License-Identifier: MIT */
/* See shard_set.h. Checks run once at open (dataset_manifest.c,
 * shard_verify.c): everything a corrupt, truncated, replaced or foreign
 * shard could break is refused before any batch is made. */
#define _DEFAULT_SOURCE
#include "shard_set.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset_manifest.h"
#include "input_file.h"
#include "shard_verify.h"

/* Open a shard listed in the manifest (a regular file: never blocks on a
 * FIFO), check its header against the format and its entry; `body` also
 * reads it all (crc32, token ids, index) and maps it for the loader. */
static esmt_status open_shard(const char *path, const esmt_dataset_manifest *man,
                              const esmt_manifest_entry *e, int body, esmt_shard_map *m) {
  int fd;
  struct stat sb;
  esmt_shard_header h;
  esmt_status st = esmt_open_input(path, "dataset shard", &fd, &sb);
  if (st) return st;
  if (sb.st_size < (off_t)sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: %lld bytes, too short to be a shard (truncated?)", path,
                   (long long)sb.st_size);
  if (!st) st = esmt_shard_check_header(path, &h, (uint64_t)sb.st_size, man, e);
  if (!st && body) st = esmt_shard_verify_body(fd, path, &h);
  if (st || !body) {
    close(fd);
    return st;
  }
  void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) st = esmt_fail(ESMT_ERR_IO, "%s: mmap: %s", path, strerror(errno));
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

/* Every shard the manifest lists is checked (header against its entry);
 * those of `split` are read in full and mapped. */
static esmt_status open_listed(const char *dir, const esmt_dataset_manifest *man, int split,
                               esmt_shard_set *set) {
  size_t cap = strlen(dir) + 2 + 256;
  char *path = malloc(cap);
  if (!path) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "loader: out of memory");
  esmt_status st = ESMT_OK;
  for (size_t i = 0; i < man->count && !st; i++) {
    const esmt_manifest_entry *e = &man->entries[i];
    size_t need = strlen(dir) + strlen(e->file) + 2;
    if (need > cap) {
      char *p = realloc(path, need);
      if (!p) { st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "loader: out of memory"); break; }
      path = p;
      cap = need;
    }
    snprintf(path, cap, "%s/%s", dir, e->file);
    int mine = e->split == split;
    if ((st = open_shard(path, man, e, mine, &set->shards[set->count])) || !mine) continue;
    set->first[set->count] = set->records;
    set->records += set->shards[set->count].records;
    set->count++;
  }
  free(path);
  return st;
}

esmt_status esmt_shard_set_open(const char *dir, int split, esmt_shard_set *set) {
  memset(set, 0, sizeof *set);
  esmt_dataset_manifest man;
  esmt_status st = esmt_manifest_load(dir, &man);
  if (st) return st;
  if (man.version < ESMT_MANIFEST_VERSION)
    esmt_log(ESMT_LOG_WARN, "%s: a version-%d dataset (written by an older esmtrain): it has no "
             "dataset id, so a shard copied in from another dataset cannot be detected; "
             "re-ingest it to get one", dir, man.version);
  set->shards = calloc(man.count ? man.count : 1, sizeof *set->shards);
  set->first = calloc(man.count + 1, sizeof *set->first);
  if (!set->shards || !set->first) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "loader: out of memory");
  if (!st) st = open_listed(dir, &man, split, set);
  esmt_manifest_free(&man);
  if (!st && set->records == 0)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: the %s split is empty", dir, esmt_split_name(split));
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
