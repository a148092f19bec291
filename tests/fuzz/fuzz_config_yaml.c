/* SPDX-License-Identifier: MIT */
/* libFuzzer: the YAML configuration loader. */
#include <stdlib.h>

#include "esmtrain/esmtrain.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  int fd = fuzz_memfile(data, size, path, sizeof path);
  if (fd < 0) return 0;
  esmt_config *c = NULL;
  if (esmt_config_create(&c) == ESMT_OK) {
    if (esmt_config_load_yaml(c, path) == ESMT_OK) {
      esmt_config_validate(c);
      char *y = NULL;
      if (esmt_config_to_yaml(c, &y) == ESMT_OK) free(y);
    }
    esmt_config_destroy(c);
  }
  close(fd);
  return 0;
}
