/* SPDX-License-Identifier: MIT */
/* Run directories (esmt_run_dir_check, trainer.h): what a directory holds
 * before a run writes into it. */
#ifndef ESMTRAIN_RUN_DIR_H
#define ESMTRAIN_RUN_DIR_H
#include <stddef.h>

#include "internal.h"

/* Refuses (ESMT_ERR_STATE, naming the path and what it is) a directory no
 * run may be written into whatever the resume: a path through a file, a
 * dataset, a checkpoint, a run's checkpoints/ directory, checkpoints/ as a
 * symbolic link. Otherwise *holds_run is 1 when it already holds a run's
 * checkpoints, described in `what`. `fn` names the caller. */
ESMT_HIDDEN esmt_status esmt_run_dir_inspect(const char *fn, const char *run_dir, int *holds_run,
                                             char *what, size_t cap);

/* The refusal of a new run (resume NULL) or of another run's checkpoint
 * (resume given) into run_dir, which holds the run `what` describes. */
ESMT_HIDDEN esmt_status esmt_run_dir_refuse(const char *fn, const char *run_dir, const char *what,
                                            const char *resume);
/* ESMT_ERR_STATE naming the holder when another process holds dir's
 * run.lock, else ESMT_OK; reads only (the lock file is neither created nor
 * written). A run found in a directory is refused with this first, so the
 * refusal says who is writing it. */
ESMT_HIDDEN esmt_status esmt_run_lock_check_free(const char *fn, const char *dir);
#endif
