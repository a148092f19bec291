/* SPDX-License-Identifier: MIT */
/* What an embed output was computed from (embed_dir.h), so that a resume
 * continues only the same work: the zlib crc32 of the model's weights as
 * loaded (a checkpoint trained further, another checkpoint or another
 * export changes it) and of the input's bytes (a FASTA file edited or
 * replaced; a dataset re-ingested, through its manifest.json, which holds
 * the dataset id and every shard's crc32). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "embed_dir.h"

esmt_status embed_model_checksum(esmt_model *m, char *out, size_t cap) {
  int count = 0;
  uint64_t total = 0;
  uLong crc = crc32_z(0L, Z_NULL, 0);
  float *buf = NULL;
  uint64_t buf_n = 0;
  esmt_status st = esmt_model_tensor_count(m, &count);
  for (int i = 0; i < count && !st; i++) {
    esmt_tensor_info ti = ESMT_TENSOR_INFO_INIT;
    if ((st = esmt_model_tensor_info(m, i, &ti))) break;
    if (ti.numel > buf_n) {
      float *b = realloc(buf, ti.numel * sizeof *b);
      if (!b) {
        free(buf);
        return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory reading tensor %s", ti.name);
      }
      buf = b;
      buf_n = ti.numel;
    }
    if ((st = esmt_model_read_tensor(m, ti.name, ESMT_BUF_PARAMS, buf, ti.numel))) break;
    crc = crc32_z(crc, (const Bytef *)ti.name, strlen(ti.name));
    crc = crc32_z(crc, (const Bytef *)buf, (z_size_t)(ti.numel * sizeof *buf));
    total += ti.numel;
  }
  free(buf);
  if (st) return esmt_fail_prefix(st, "reading the model's weights: ");
  snprintf(out, cap, "crc32:%08lx/%llu", (unsigned long)crc, (unsigned long long)total);
  return ESMT_OK;
}

esmt_status embed_input_checksum(const char *input, char *out, size_t cap) {
  if (!strcmp(input, "-")) return snprintf(out, cap, "stdin"), ESMT_OK;
  struct stat sb;
  char path[4200];
  snprintf(path, sizeof path, "%s", input);
  if (stat(input, &sb) == 0 && S_ISDIR(sb.st_mode))
    snprintf(path, sizeof path, "%s/manifest.json", input);
  /* the reader opened it already as a regular file; O_NONBLOCK in case it
   * was swapped for a FIFO since */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    const char *why = fd < 0 ? strerror(errno) : "not a regular file";
    if (fd >= 0) close(fd);
    return esmt_fail(ESMT_ERR_IO, "%s: cannot read it for its checksum: %s", path, why);
  }
  enum { CHUNK = 1 << 20 };
  unsigned char *buf = malloc(CHUNK);
  uLong crc = crc32_z(0L, Z_NULL, 0);
  uint64_t bytes = 0;
  ssize_t n = 0;
  while (buf && (n = read(fd, buf, CHUNK)) != 0) {
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) break;
    crc = crc32_z(crc, buf, (z_size_t)n);
    bytes += (uint64_t)n;
  }
  const int err = errno;
  close(fd);
  free(buf);
  if (!buf || n < 0)
    return esmt_fail(buf ? ESMT_ERR_IO : ESMT_ERR_OUT_OF_MEMORY,
                     "%s: cannot read it for its checksum: %s", path,
                     buf ? strerror(err) : "out of memory");
  snprintf(out, cap, "crc32:%08lx/%llu", (unsigned long)crc, (unsigned long long)bytes);
  return ESMT_OK;
}

uint64_t embed_id_hash(uint64_t h, const char *id) {
  if (!h) h = 1469598103934665603ull;
  for (const char *p = id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return (h ^ '\n') * 1099511628211ull;
}
