/* SPDX-License-Identifier: MIT */
/* <split>.clusters written and read (cluster_index.h). */
#define _POSIX_C_SOURCE 200809L
#include "cluster_index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset_manifest.h"
#include "fs_util.h"
#include "input_file.h"

#define CHUNK (1u << 20) /* crc32 and writes in pieces zlib's uInt takes */

static uLong crc_add(uLong crc, const void *p, uint64_t bytes) {
  const unsigned char *b = p;
  while (bytes) {
    const uInt n = bytes > CHUNK ? CHUNK : (uInt)bytes;
    crc = crc32(crc, b, n);
    b += n;
    bytes -= n;
  }
  return crc;
}

esmt_status esmt_cluster_index_write(const char *path, int split,
                                     const uint8_t dataset_id[ESMT_DATASET_ID_BYTES],
                                     const uint32_t *cluster_of, uint64_t n,
                                     uint64_t total_clusters, uint64_t *clusters, uint32_t *crc) {
  /* counting sort: where each cluster's members start, then the members */
  uint64_t *start = calloc(total_clusters + 1, sizeof *start);
  uint64_t *members = malloc((n ? n : 1) * sizeof *members);
  uint64_t *offsets = NULL;
  esmt_status st = ESMT_OK;
  if (!start || !members) {
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory (%llu members)", path,
                   (unsigned long long)n);
    goto out;
  }
  for (uint64_t i = 0; i < n; i++) start[cluster_of[i] + 1]++;
  uint64_t used = 0;
  for (uint64_t c = 0; c < total_clusters; c++) used += start[c + 1] != 0;
  if (!(offsets = malloc((used + 1) * sizeof *offsets))) {
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    goto out;
  }
  uint64_t k = 0;
  offsets[0] = 0;
  for (uint64_t c = 0; c < total_clusters; c++) {
    const uint64_t size = start[c + 1];
    start[c + 1] = start[c] + size;
    if (size) {
      k++;
      offsets[k] = start[c + 1];
    }
  }
  for (uint64_t i = 0; i < n; i++) members[start[cluster_of[i]]++] = i;
  esmt_cluster_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, ESMT_CLUSTER_MAGIC, 8);
  h.version = ESMT_CLUSTER_VERSION;
  h.header_size = sizeof h;
  h.clusters = used;
  h.members = n;
  h.split = (uint32_t)split;
  memcpy(h.dataset_id, dataset_id, ESMT_DATASET_ID_BYTES);
  uLong c32 = crc32(0L, Z_NULL, 0);
  c32 = crc_add(c32, offsets, (used + 1) * sizeof *offsets);
  c32 = crc_add(c32, members, n * sizeof *members);
  h.crc32 = (uint32_t)c32;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    st = esmt_fail(ESMT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    goto out;
  }
  st = esmt_write_all(fd, &h, sizeof h, path);
  if (!st) st = esmt_write_all(fd, offsets, (used + 1) * sizeof *offsets, path);
  if (!st) st = esmt_write_all(fd, members, n * sizeof *members, path);
  if (!st && fsync(fd) != 0) st = esmt_fail(ESMT_ERR_IO, "%s: fsync: %s", path, strerror(errno));
  if (close(fd) != 0 && !st) st = esmt_fail(ESMT_ERR_IO, "%s: close: %s", path, strerror(errno));
  *clusters = used;
  *crc = h.crc32;
out:
  free(start);
  free(members);
  free(offsets);
  return st;
}

static esmt_status read_at(const esmt_cluster_index *x, void *buf, size_t bytes, uint64_t off) {
  size_t got = 0;
  while (got < bytes) {
    ssize_t r = pread(x->fd, (char *)buf + got, bytes - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return esmt_fail(r < 0 ? ESMT_ERR_IO : ESMT_ERR_FORMAT, "%s: reading at byte %llu: %s",
                       x->path, (unsigned long long)(off + got),
                       r < 0 ? strerror(errno) : "the file ends early (changed since it was "
                                                 "checked?)");
    got += (size_t)r;
  }
  return ESMT_OK;
}

/* The whole body once: crc32, the offsets' shape, each record once. */
static esmt_status check_body(esmt_cluster_index *x, uint32_t crc_want) {
  const uint64_t noff = x->clusters + 1;
  uint64_t *buf = malloc(CHUNK);
  uint8_t *seen = calloc(x->members / 8 + 1, 1);
  esmt_status st = ESMT_OK;
  if (!buf || !seen) {
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", x->path);
    goto out;
  }
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t prev = 0;
  const uint64_t total = noff + x->members, per = CHUNK / sizeof *buf;
  for (uint64_t i = 0; i < total && !st; i += per) {
    const uint64_t m = total - i < per ? total - i : per;
    if ((st = read_at(x, buf, m * sizeof *buf, sizeof(esmt_cluster_header) + i * sizeof *buf)))
      break;
    crc = crc32(crc, (const Bytef *)buf, (uInt)(m * sizeof *buf));
    for (uint64_t j = 0; j < m && !st; j++) {
      const uint64_t at = i + j, v = buf[j];
      if (at < noff) { /* an offset */
        if ((at == 0 && v != 0) || (at > 0 && v <= prev) || (at == noff - 1 && v != x->members))
          st = esmt_fail(ESMT_ERR_FORMAT, "%s: offset %llu is %llu after %llu: offsets must "
                         "start at 0, grow (no empty cluster) and end at the %llu members; "
                         "ingest the dataset again", x->path, (unsigned long long)at,
                         (unsigned long long)v, (unsigned long long)prev,
                         (unsigned long long)x->members);
        prev = v;
      } else if (v >= x->members || (seen[v / 8] >> (v % 8)) & 1) {
        st = esmt_fail(ESMT_ERR_FORMAT, "%s: member %llu is record %llu, %s; ingest the dataset "
                       "again", x->path, (unsigned long long)(at - noff), (unsigned long long)v,
                       v >= x->members ? "past the split's records" : "listed twice");
      } else {
        seen[v / 8] |= (uint8_t)(1u << (v % 8));
      }
    }
  }
  if (!st && (uint32_t)crc != crc_want)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: crc32 %08x, the manifest and header say %08x: the file "
                   "is damaged; ingest the dataset again", x->path, (unsigned)crc, crc_want);
out:
  free(buf);
  free(seen);
  return st;
}

esmt_status esmt_cluster_index_open(const char *dir, const char *file, int split,
                                    const uint8_t dataset_id[ESMT_DATASET_ID_BYTES],
                                    uint64_t records, uint64_t clusters, uint32_t crc,
                                    esmt_cluster_index *x) {
  memset(x, 0, sizeof *x);
  x->fd = -1;
  const size_t cap = strlen(dir) + strlen(file) + 2;
  if (!(x->path = malloc(cap))) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
  snprintf(x->path, cap, "%s/%s", dir, file);
  struct stat sb;
  esmt_status st = esmt_open_input(x->path, "cluster index", &x->fd, &sb);
  esmt_cluster_header h;
  if (!st) st = read_at(x, &h, sizeof h, 0);
  const char *bad = NULL;
  if (st) {
  } else if (memcmp(h.magic, ESMT_CLUSTER_MAGIC, 8)) bad = "magic";
  else if (h.version != ESMT_CLUSTER_VERSION) bad = "version";
  else if (h.header_size != sizeof h) bad = "header_size";
  else if (h.split != (uint32_t)split) bad = "split";
  else if (memcmp(h.dataset_id, dataset_id, ESMT_DATASET_ID_BYTES)) bad = "dataset id (a file "
                                                                          "from another dataset)";
  else if (h.clusters != clusters || h.clusters == 0 || h.clusters > h.members) bad = "clusters";
  else if (h.members != records) bad = "members (the split's record count)";
  else if (h.crc32 != crc) bad = "crc32";
  else if ((uint64_t)sb.st_size != sizeof h + (h.clusters + 1 + h.members) * 8) bad = "file size";
  if (bad)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: %s does not match the manifest (clusters %llu, crc32 "
                   "%08x, %s records %llu): ingest the dataset again", x->path, bad,
                   (unsigned long long)clusters, crc, esmt_split_name(split),
                   (unsigned long long)records);
  if (!st) {
    x->clusters = h.clusters;
    x->members = h.members;
    st = check_body(x, crc);
  }
  if (st) esmt_cluster_index_close(x);
  return st;
}

void esmt_cluster_index_close(esmt_cluster_index *x) {
  if (x->fd >= 0) close(x->fd);
  free(x->path);
  memset(x, 0, sizeof *x);
  x->fd = -1;
}

esmt_status esmt_cluster_index_size(const esmt_cluster_index *x, uint64_t c, uint64_t *first,
                                    uint64_t *size) {
  uint64_t o[2];
  if (c >= x->clusters)
    return esmt_fail(ESMT_ERR_INTERNAL, "%s: cluster %llu of %llu", x->path,
                     (unsigned long long)c, (unsigned long long)x->clusters);
  esmt_status st = read_at(x, o, sizeof o, sizeof(esmt_cluster_header) + c * 8);
  if (st) return st;
  if (o[1] <= o[0] || o[1] > x->members)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: cluster %llu's offsets changed since the file was "
                     "checked", x->path, (unsigned long long)c);
  *first = o[0];
  *size = o[1] - o[0];
  return ESMT_OK;
}

esmt_status esmt_cluster_index_member(const esmt_cluster_index *x, uint64_t at,
                                      uint64_t *record) {
  esmt_status st = read_at(x, record, sizeof *record,
                           sizeof(esmt_cluster_header) + (x->clusters + 1 + at) * 8);
  if (!st && *record >= x->members)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: member %llu changed since the file was checked",
                     x->path, (unsigned long long)at);
  return st;
}
