/* SPDX-License-Identifier: MIT */
/* The one reading policy for text inputs (esmt_line_reader, data.h): what
 * may be opened, how much may be read, and when to stop. The public reader
 * opens a path; the library's own readers use these entry points too: a
 * configuration file read whole, a gzip stream (cluster files) read
 * through a source of its own. */
#ifndef ESMTRAIN_INPUT_READER_H
#define ESMTRAIN_INPUT_READER_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

/* A source of bytes: *got bytes into buf (0 at the end) and ESMT_OK; an
 * error status after esmt_fail; ESMT_ERR_CANCELLED when a signal
 * interrupted the read (the reader asks the progress callback, then calls
 * again). */
typedef esmt_status (*esmt_input_read_fn)(void *src, void *buf, size_t cap, size_t *got);

/* A reader over `read`/`src`; `name` names the input in messages (the
 * path). The caller keeps src open until esmt_line_reader_close. */
ESMT_HIDDEN esmt_status esmt_line_reader_wrap(esmt_input_read_fn read, void *src, const char *name,
                                              const esmt_line_reader_options *opts,
                                              esmt_line_reader **out);

/* The whole of `path` as text (under opts' limits; lines joined by '\n',
 * one ending the text, NUL-terminated) into *text (free it) and *len. */
ESMT_HIDDEN esmt_status esmt_input_read_all(const char *path, const esmt_line_reader_options *opts,
                                            char **text, size_t *len);

/* "1 MiB", "64 KiB", "1000 bytes": a limit as messages name it. */
ESMT_HIDDEN const char *esmt_limit_text(uint64_t bytes, char *out, size_t cap);

#endif
