/* SPDX-License-Identifier: MIT */
/* Sizes written as text; esmt_parse_size (esmtrain/config.h) is the public
 * form with a message. */
#ifndef ESMTRAIN_SIZE_TEXT_H
#define ESMTRAIN_SIZE_TEXT_H

#include "internal.h"

/* "8GiB", "512MiB", "1.5G", "1000" -> bytes; 0 when not a size. */
ESMT_HIDDEN int esmt_parse_bytes(const char *s, uint64_t *out);

#endif
