/* SPDX-License-Identifier: MIT */
/* Test plugin: a backend built for ABI 1.6. Its flat ops table began with
 * the fields esmtb_backend still begins with (abi_major, abi_minor,
 * struct_size, caps, name, description, probe); the core must refuse it by
 * its major, naming both versions, before reading anything else. */
#include <stdint.h>

#include "esmtrain/backend.h"

typedef struct abi1_ops_head {
  uint32_t abi_major, abi_minor, struct_size, caps;
  const char *name, *description;
  void *probe;
  void *open, *close; /* the ABI 1 device calls followed: never read */
} abi1_ops_head;

static const abi1_ops_head g_ops = {
    .abi_major = 1,
    .abi_minor = 6,
    .struct_size = 336, /* sizeof(esmtb_ops) of ABI 1.6 on LP64 */
    .name = "abi1",
    .description = "test plugin built for backend ABI 1.6",
};

ESMTB_EXPORT const esmtb_backend *esmt_backend_init(const esmtb_host *host) {
  (void)host;
  return (const esmtb_backend *)(const void *)&g_ops;
}

ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  (void)job;
  return 1000;
}
