/* SPDX-License-Identifier: MIT */
/* Small file-system helpers for crash-safe writes: write everything or
 * fail, fsync files and directories, make directories, remove trees. */
#ifndef ESMTRAIN_FS_UTIL_H
#define ESMTRAIN_FS_UTIL_H

#include "internal.h"

/* A hint after strerror for a failed write: " (the disk is full)" for
 * ENOSPC, the `ulimit -f` file size limit for EFBIG; "" otherwise. */
ESMT_HIDDEN const char *esmt_write_errno_hint(int err);

/* write(2) until done; EINTR retried; a short write is an error (ENOSPC). */
ESMT_HIDDEN esmt_status esmt_write_all(int fd, const void *data, size_t n, const char *path);

/* pwrite(2) of all n bytes at `offset`, short writes continued. */
ESMT_HIDDEN esmt_status esmt_pwrite_all(int fd, const void *data, size_t n, uint64_t offset,
                                        const char *path);

/* fsync a directory so that a rename/creation inside it is durable. */
ESMT_HIDDEN esmt_status esmt_fsync_dir(const char *dir);

/* The fsync of `dir` after a rename that published a finished file or
 * directory. The data were synced before the rename, so whether or not
 * the rename survives a crash, readers see either the old or the new
 * complete state; a failure here is therefore logged as a warning and
 * not returned (an error would claim the new state does not exist). */
ESMT_HIDDEN void esmt_fsync_dir_published(const char *dir);

/* mkdir -p with mode 0755. */
ESMT_HIDDEN esmt_status esmt_mkdir_p(const char *dir);

/* The same; `created` (may be NULL) receives the topmost directory it
 * made ("" when all existed), so that a failed caller can remove exactly
 * what it created and nothing else. */
ESMT_HIDDEN esmt_status esmt_mkdir_p_created(const char *dir, char *created, size_t cap);

/* rm -rf of a directory that esmtrain created (no symlink following). */
ESMT_HIDDEN esmt_status esmt_remove_tree(const char *dir);

/* Best-effort removal on an error path: keeps the current error message. */
ESMT_HIDDEN void esmt_cleanup_tree(const char *dir);

/* Directory part of `path` into out ("." when none). */
ESMT_HIDDEN void esmt_dirname(const char *path, char *out, size_t cap);

#endif
