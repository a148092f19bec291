/* SPDX-License-Identifier: MIT */
/* A protein's contact map as a PNG heat map (plot_contact_map.c), drawn
 * with `plot`'s primitives: residue i down, residue j across, probability
 * 0..1 in viridis with a colour bar, the id and length in the title, the
 * top-L/5 long-range pairs (|i - j| >= 24) circled above the diagonal. */
#ifndef ESMT_CLI_PLOT_CONTACT_MAP_H
#define ESMT_CLI_PLOT_CONTACT_MAP_H

#include "plot_signature.h"

#define PLOT_CONTACT_MAP_WIDTH 900
#define PLOT_CONTACT_MAP_HEIGHT 800
#define PLOT_CONTACT_LONG_RANGE 24

/* map: n x n, row-major. Returns 0, or -1 with the reason in err. */
int plot_contact_map(const float *map, int n, const char *id, plot_signer *out, char *err,
                     size_t cap);

#endif
