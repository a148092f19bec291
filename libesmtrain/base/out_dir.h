/* SPDX-License-Identifier: MIT */
/* An output directory of new files (an ingested dataset, a Hugging Face
 * export) written without ever harming what the user already has:
 *  - a destination that does not exist is built as a sibling temporary
 *    directory and renamed into place whole;
 *  - a destination the user made (empty) keeps its inode, owner and mode:
 *    the files are written into a temporary directory inside it and moved
 *    up one by one, `last` (the file that makes the whole valid: the
 *    manifest, the export marker) last;
 *  - a non-empty destination is refused, unless it carries `marker` (a
 *    file only esmtrain writes), replacing is allowed, and it holds only
 *    the names esmtrain writes there: then its files are replaced the same
 *    way. Nothing else in it is ever removed.
 * On failure only what this module created is removed: its temporary
 * directory and the parent directories it made. */
#ifndef ESMTRAIN_OUT_DIR_H
#define ESMTRAIN_OUT_DIR_H

#include "internal.h"

#define ESMT_OUT_DIR_PATH_CAP 4096

typedef struct esmt_out_dir {
  char dest[ESMT_OUT_DIR_PATH_CAP];
  char work[ESMT_OUT_DIR_PATH_CAP];    /* write the files here */
  char created[ESMT_OUT_DIR_PATH_CAP]; /* topmost parent directory made for dest, or "" */
  int into_existing;                   /* dest existed: files are moved into it */
  int was_empty;                       /* ... and held nothing */
} esmt_out_dir;

/* The rules for a destination that exists and is not empty. */
typedef struct esmt_out_dir_rules {
  const char *fn;           /* names the caller in messages */
  const char *marker;       /* a file that marks the destination as esmtrain's, or NULL */
  const char *const *names; /* NULL-terminated: the only names a replaceable one may hold */
  int replace;              /* a marked destination may be replaced */
  const char *replace_flag; /* how the user allows that, for the message ("--overwrite") */
} esmt_out_dir_rules;

/* Check `dest` under the rules and create the temporary directory. */
ESMT_HIDDEN esmt_status esmt_out_dir_begin(esmt_out_dir *od, const char *dest,
                                           const esmt_out_dir_rules *rules);

/* Everything is written and synced in od->work: publish it, `last` last. */
ESMT_HIDDEN esmt_status esmt_out_dir_publish(esmt_out_dir *od, const char *last);

/* After a failure: remove what begin created; keeps the current error. */
ESMT_HIDDEN void esmt_out_dir_abort(esmt_out_dir *od);

#endif
