/* SPDX-License-Identifier: MIT */
/* The context object: the registry, the chosen backend, threads and sinks. */
#ifndef ESMTRAIN_CONTEXT_H
#define ESMTRAIN_CONTEXT_H

#include "esmtrain/esmtrain.h"
#include "registry.h"

struct esmt_context {
  esmt_registry registry;
  const esmt_backend_entry *backend;  /* the chosen one */
  int num_threads;
  uint64_t device_memory_limit; /* bytes each model's backend device may allocate; 0 = no cap */
  esmt_logger logger;
  esmt_progress_fn progress;
  void *progress_user;
};

/* The device a model opens: 0, or for a multi-device backend (one process
 * per GPU) the GPU of this process's local rank, modulo the GPUs it sees
 * (one when the launcher gives each rank its own CUDA_VISIBLE_DEVICES). */
ESMT_HIDDEN int esmt_context_device_index(const esmt_context *ctx);

/* Report *p to `fn` (an object's own callback) or, when that is NULL, to
 * the context's esmt_context_options.progress; non-zero: the callee asked
 * to stop. p->struct_size is set here. */
ESMT_HIDDEN int esmt_report_progress(const esmt_context *ctx, esmt_progress_fn fn, void *user,
                                     esmt_progress *p);

#endif
