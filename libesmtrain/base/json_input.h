/* SPDX-License-Identifier: MIT */
/* Reading a JSON input file (state.json, config.json, an index) through
 * input_file.h: a FIFO, device or directory is refused at once instead of
 * blocking, and the file's size is bounded before it is parsed. */
#ifndef ESMTRAIN_JSON_INPUT_H
#define ESMTRAIN_JSON_INPUT_H

#include <jansson.h>

#include "internal.h"

/* Parse `path` (a regular file of at most 64 MiB) into *out. `what` names
 * its role in messages ("checkpoint state"). ESMT_ERR_IO when it cannot be
 * opened, ESMT_ERR_FORMAT when it is not a regular file or not JSON. */
ESMT_HIDDEN esmt_status esmt_json_load_input(const char *path, const char *what, json_t **out);

#endif
