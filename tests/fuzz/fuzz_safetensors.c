/* SPDX-License-Identifier: MIT */
/* libFuzzer: the safetensors reader (checkpoints, HF imports, fixtures). */
#include <stdlib.h>

#include "fuzz_common.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  int fd = fuzz_memfile(data, size, path, sizeof path);
  if (fd < 0) return 0;
  esmt_st_file f;
  if (esmt_st_open(path, &f) == ESMT_OK) {
    for (int i = 0; i < f.count; i++) {
      const esmt_st_tensor *t = &f.tensors[i];
      if (t->numel > (1u << 20)) continue;
      double *out = malloc((t->numel ? t->numel : 1) * sizeof *out);
      if (out) esmt_st_to_f64(t, out);
      free(out);
    }
    esmt_st_meta_get(&f, "format");
    esmt_st_close(&f);
  }
  close(fd);
  return 0;
}
