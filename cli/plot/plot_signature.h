/* SPDX-License-Identifier: MIT */
/* The mark every figure of `plot` carries, so that --force replaces an
 * earlier figure and never any other file: a PNG "Software" tEXt chunk
 * right after the header chunk, an SVG comment right after the XML
 * declaration. Known by content, not by the file's name. */
#ifndef ESMT_CLI_PLOT_SIGNATURE_H
#define ESMT_CLI_PLOT_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PLOT_SOFTWARE "esmtrain-example plot"

/* cairo's output stream on its way to a file, the mark put in. */
typedef struct plot_signer {
  FILE *out;
  int svg;
  uint64_t passed;       /* bytes of cairo's stream written so far */
  int marked;
  int (*stopped)(void);  /* nonzero: give up writing (a stop signal came) */
} plot_signer;

/* Pass cairo's next bytes on, the mark inserted where it belongs. Returns
 * 0, or -1 after a write error or when s->stopped() says so. */
int plot_signer_write(plot_signer *s, const unsigned char *data, size_t len);

/* An esmt_output_replace_fn: 1 when the open file fd is a figure `plot`
 * wrote (it carries the mark), else 0 with the reason in why. */
int plot_is_figure(int fd, void *user, char *why, size_t cap);

#endif
