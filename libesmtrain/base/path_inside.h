/* SPDX-License-Identifier: MIT */
/* Paths compared by what they name (esmt_path_inside is public). */
#ifndef ESMTRAIN_PATH_INSIDE_H
#define ESMTRAIN_PATH_INSIDE_H
#include <stddef.h>

#include "internal.h"

/* The absolute path of `path`, symbolic links resolved, its components
 * that do not exist yet appended as written; -1 when it cannot be made or
 * does not fit `cap`. */
ESMT_HIDDEN int esmt_path_canonical(const char *path, char *out, size_t cap);
#endif
