/* SPDX-License-Identifier: MIT */
/* The trainer's hold on its run directory (trainer.h in the public API
 * says the rules): checked at create, taken (run.lock, rank 0) before the
 * first write, released on destroy. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "dp_group.h"
#include "run_dir.h"
#include "trainer.h"

esmt_status esmt_trainer_inspect_run(esmt_trainer *t, const char *fn) {
  if (!t->run_dir) return ESMT_OK;
  return esmt_run_dir_inspect(fn, t->run_dir, &t->run_exists, t->run_what, sizeof t->run_what);
}

esmt_status esmt_trainer_claim_run(esmt_trainer *t, const char *fn) {
  if (!t->run_dir || t->run_taken) return ESMT_OK;
  if (t->run_exists) { /* a live writer is the better reason to give */
    esmt_status held = esmt_run_lock_check_free(fn, t->run_dir);
    return held ? held : esmt_run_dir_refuse(fn, t->run_dir, t->run_what, NULL);
  }
  if (esmt_dp_rank(t->dp) != 0) { /* rank 0 holds the lock for every rank */
    t->run_taken = 1;
    return ESMT_OK;
  }
  esmt_status st = esmt_run_lock_take(t->run_dir, &t->run_lock);
  if (st) return esmt_fail_prefix(st, "%s: ", fn);
  /* a run may have appeared between create and the lock */
  int exists = 0;
  char what[sizeof t->run_what];
  st = esmt_run_dir_inspect(fn, t->run_dir, &exists, what, sizeof what);
  if (!st && exists && !t->run_resumed) st = esmt_run_dir_refuse(fn, t->run_dir, what, NULL);
  if (st) {
    esmt_run_lock_release(t->run_lock);
    t->run_lock = NULL;
    return st;
  }
  t->run_taken = 1;
  return ESMT_OK;
}

esmt_status esmt_trainer_resume_run(esmt_trainer *t, const char *spec, const char *fn) {
  if (!t->run_dir) return ESMT_OK;
  const int own = esmt_path_inside(spec, t->run_dir);
  if (t->run_exists && !own) return esmt_run_dir_refuse(fn, t->run_dir, t->run_what, spec);
  t->run_exists = 0;
  t->run_resumed = own;
  return esmt_trainer_claim_run(t, fn);
}

esmt_status esmt_trainer_take_run(esmt_trainer *t) {
  ESMT_CHECK_ARG(t, "esmt_trainer_take_run", "trainer is NULL");
  return esmt_trainer_claim_run(t, "esmt_trainer_take_run");
}
