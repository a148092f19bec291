/* SPDX-License-Identifier: MIT */
/* One call at a time on a model (esmtrain.h, "Threads"): a model's
 * activations, gradients and staging buffers serve one pass, so a second
 * thread's call while one runs would read and write them at once and
 * return a wrong answer with ESMT_OK. The calls that use them enter this
 * guard: one atomic exchange when the model is free; a call from another
 * thread meanwhile is refused with ESMT_ERR_STATE naming the call in
 * progress and its thread. The thread that holds it may enter again (the
 * trainer's step calls forward, backward and the optimizer step). */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <unistd.h>

#include "model.h"

static long thread_id(void) { return (long)syscall(SYS_gettid); }

esmt_status esmt_model_enter(esmt_model *m, const char *fn) {
  const long self = thread_id();
  long holder = 0;
  if (atomic_compare_exchange_strong(&m->guard_thread, &holder, self)) {
    atomic_store(&m->guard_call, fn);
    m->guard_depth = 1;
    return ESMT_OK;
  }
  if (holder == self) {
    m->guard_depth++;
    return ESMT_OK;
  }
  const char *other = atomic_load(&m->guard_call);
  return esmt_fail(ESMT_ERR_STATE, "%s: the model is in use by another thread (%s, thread %ld): "
                   "a model runs one call at a time. Nothing was done: give each thread its own "
                   "model (they may share one context), or let one call end before the next",
                   fn, other ? other : "a call just starting", holder);
}

void esmt_model_leave(esmt_model *m) {
  if (--m->guard_depth > 0) return;
  atomic_store(&m->guard_call, NULL);
  atomic_store(&m->guard_thread, 0);
}
