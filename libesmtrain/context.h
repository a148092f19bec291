/* The context object: the registry, the chosen backend, threads and sinks. */
#ifndef ESMTRAIN_CONTEXT_H
#define ESMTRAIN_CONTEXT_H

#include "registry.h"

struct esmt_context {
  esmt_registry registry;
  const esmt_backend_entry *backend;  /* the chosen one */
  int num_threads;
  esmt_logger logger;
  esmt_progress_fn progress;
  void *progress_user;
};

#endif
