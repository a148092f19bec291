/* SPDX-License-Identifier: MIT */
/* See fasta_magic.h. */
#include "fasta_magic.h"

#include <string.h>

typedef struct magic {
  const char *name;          /* "zstd-compressed" */
  size_t offset, len;
  const char *bytes;
  const char *decompress;    /* FILE to stdout; NULL for archives */
  const char *list, *extract; /* archives: list the members, one member to stdout */
} magic;

static const magic k_magic[] = {
    {"bzip2-compressed", 0, 3, "BZh", "bzip2 -dc", NULL, NULL},
    {"zstd-compressed", 0, 4, "\x28\xb5\x2f\xfd", "zstd -dc", NULL, NULL},
    {"xz-compressed", 0, 6, "\xfd" "7zXZ\x00", "xz -dc", NULL, NULL},
    {"lzma-compressed", 0, 3, "\x5d\x00\x00", "xz --format=lzma -dc", NULL, NULL},
    {"lz4-compressed", 0, 4, "\x04\x22\x4d\x18", "lz4 -dc", NULL, NULL},
    {"gzip-compressed twice", 0, 2, "\x1f\x8b", "gzip -dc", NULL, NULL},
    {"a zip archive", 0, 4, "PK\x03\x04", NULL, "unzip -l", "unzip -p"},
    {"a 7-zip archive", 0, 6, "7z\xbc\xaf\x27\x1c", NULL, "7z l", "7z x -so"},
    {"a tar archive", 257, 5, "ustar", NULL, "tar -tf", "tar -xOf"},
};

esmt_status esmt_fasta_check_magic(const char *path, const unsigned char *head, size_t n,
                                   int inside_gzip) {
  const int in = !strcmp(path, "-");
  const char *file = in ? "standard input" : path;
  for (size_t k = 0; k < sizeof k_magic / sizeof k_magic[0]; k++) {
    const magic *m = &k_magic[k];
    if (n < m->offset + m->len || memcmp(head + m->offset, m->bytes, m->len) != 0) continue;
    const char *layer = inside_gzip ? " inside its gzip layer" : "";
    if (m->decompress && in)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: is %s%s, not plain FASTA or gzip: decompress it "
                       "first (... | %s | esmtrain-example ingest - -o DIR)", file, m->name,
                       layer, m->decompress);
    if (m->decompress)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: is %s%s, not plain FASTA or gzip: decompress it "
                       "first (%s %s > FILE.fa) or pipe it: %s %s | esmtrain-example ingest - -o "
                       "DIR", file, m->name, layer, m->decompress, path, m->decompress, path);
    return esmt_fail(ESMT_ERR_FORMAT, "%s: is %s%s, not a FASTA file: extract the FASTA first, "
                     "or pipe it (%s %s lists the members): %s %s [MEMBER] | esmtrain-example "
                     "ingest - -o DIR", file, m->name, layer, m->list, in ? "FILE" : path, m->extract,
                     in ? "FILE" : path);
  }
  return ESMT_OK;
}
