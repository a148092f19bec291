/* SPDX-License-Identifier: MIT */
/* The row layout every inference caller shares (infer.h). */
#ifndef ESMT_INFER_ROWS_H
#define ESMT_INFER_ROWS_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

/* <cls> residues[0..n) <eos>, then <pad> up to T positions (T >= n + 2). */
ESMT_HIDDEN void esmt_row_write(int32_t *row, int T, const int32_t *residues, int n);

#endif
