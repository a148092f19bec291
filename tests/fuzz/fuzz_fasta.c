/* SPDX-License-Identifier: MIT */
/* libFuzzer: the FASTA(.gz) reader and the ingest tokenizer. Any input
 * must give records or a clean error, never a crash or a leak. */
#include <stdlib.h>
#include <string.h>

#include "fasta_stream.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  int fd = fuzz_memfile(data, size, path, sizeof path);
  if (fd < 0) return 0;
  esmt_fasta *f = NULL;
  if (esmt_fasta_open(path, &f) == ESMT_OK) {
    esmt_fasta_record r;
    size_t total = 0;
    while (esmt_fasta_next(f, &r) == 1) {
      for (size_t i = 0; i < r.len; i++) total += (size_t)(esmt_token_id((unsigned char)r.seq[i]) + 1);
      if (strlen(r.id) > 1u << 20) abort(); /* ids are NUL-terminated and bounded by the input */
    }
    (void)total;
    esmt_fasta_close(f);
  }
  close(fd);
  return 0;
}
