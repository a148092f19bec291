/* SPDX-License-Identifier: MIT */
/* Backend registry: finds backend shared objects, checks their ABI, probes
 * them for this machine and job, and chooses one. */
#ifndef ESMTRAIN_REGISTRY_H
#define ESMTRAIN_REGISTRY_H

#include "esmtrain/backend.h"
#include "internal.h"
#include "ops_table.h"

typedef struct esmt_backend_entry {
  char path[512];
  char name[32];
  char description[128];
  char reason[256];          /* why it did not load / is unavailable */
  void *handle;              /* dlopen handle, NULL when not loaded */
  const esmtb_ops *ops;      /* NULL when not loaded */
  int loaded;
  int score;
  esmtb_probe probe;
  esmtb_ops *resolved;       /* what `ops` points to when loaded from a plugin: freed here */
} esmt_backend_entry;

typedef struct esmt_registry {
  esmt_backend_entry *entries;
  int count, cap;
  int chosen;                /* index into entries, -1 when none */
  char searched[1024];       /* the directories searched, for messages */
  char only[64];             /* load only NAME.so ("": every plugin) */
} esmt_registry;

/* Search `path` (colon-separated) if non-NULL, else $ESMTRAIN_BACKEND_PATH,
 * else the installed and next-to-library dirs; load and probe everything,
 * or, when `only` names a backend, only its plugin ONLY.so (all of them
 * when no file has that name). Fails only when nothing loadable was found
 * in any searched directory. */
ESMT_HIDDEN esmt_status esmt_registry_load(esmt_registry *r, const char *path, const char *only,
                                           const esmtb_job *job, const esmt_logger *lg);

/* Choose `forced` (NULL: $ESMTRAIN_BACKEND, else the highest score). */
ESMT_HIDDEN esmt_status esmt_registry_choose(esmt_registry *r, const char *forced);

ESMT_HIDDEN void esmt_registry_release(esmt_registry *r);

/* The directory of the loaded libesmtrain (shared library or the program
 * that links the static archive), or "" when unknown; plugins of this
 * installation are found below it (esmtrain/backends, esmtrain/comm). */
ESMT_HIDDEN void esmt_library_dir(char *out, size_t cap);

/* The host services table handed to backends (backend_host.c). */
ESMT_HIDDEN const esmtb_host *esmt_backend_host(void);

/* The plugins of `kind` ("backends", "comm") of the loaded library: its
 * version's <libdir>/esmtrain-MAJOR.MINOR/KIND, where two installed
 * versions keep theirs apart, else <libdir>/esmtrain/KIND (a build tree);
 * "" when the library's place is unknown. */
#define ESMT_PLUGIN_DIR_NAME_STR2(x) #x
#define ESMT_PLUGIN_DIR_NAME_STR(x) ESMT_PLUGIN_DIR_NAME_STR2(x)
#define ESMT_PLUGIN_DIR_NAME                                                  \
  "esmtrain-" ESMT_PLUGIN_DIR_NAME_STR(ESMT_VERSION_MAJOR) "." ESMT_PLUGIN_DIR_NAME_STR(ESMT_VERSION_MINOR)
ESMT_HIDDEN void esmt_plugin_dir(const char *kind, char *out, size_t cap);

/* 1 when `ops` has `field` (set, and inside a table a test may shorten). */
#define ESMTB_OPS_HAS(ops, field)                                                 \
  ((ops)->struct_size >= offsetof(esmtb_ops, field) + sizeof((ops)->field) &&     \
   (ops)->field != NULL)

/* The communicator ops: a MULTI_DEVICE backend the core gives a communicator. */
static inline int esmt_ops_has_comm(const esmtb_ops *ops) {
  return (ops->caps & ESMTB_CAP_MULTI_DEVICE) && ESMTB_OPS_HAS(ops, comm_unique_id) &&
         ESMTB_OPS_HAS(ops, comm_init) && ops->allreduce;
}

/* reduce_scatter + allgather: ZeRO-1 on the device path. */
static inline int esmt_ops_has_shard_comm(const esmtb_ops *ops) {
  return ESMTB_OPS_HAS(ops, reduce_scatter) && ESMTB_OPS_HAS(ops, allgather);
}

/* lion: optimizer.kind lion. */
static inline int esmt_ops_has_lion(const esmtb_ops *ops) { return ESMTB_OPS_HAS(ops, lion); }

/* pci_bus_id: the device in NVML. */
static inline int esmt_ops_has_pci_bus_id(const esmtb_ops *ops) {
  return ESMTB_OPS_HAS(ops, pci_bus_id);
}

#endif
