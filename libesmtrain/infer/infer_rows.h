/* SPDX-License-Identifier: MIT */
/* The row layout every inference caller shares (infer.h). */
#ifndef ESMT_INFER_ROWS_H
#define ESMT_INFER_ROWS_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

/* <cls> residues[0..n) <eos>, then <pad> up to T positions (T >= n + 2). */
ESMT_HIDDEN void esmt_row_write(int32_t *row, int T, const int32_t *residues, int n);

/* Windows of W residues over a protein of n > W residues (windows.c):
 * starts 0, S, 2S, ... while a window ends before the protein does, and a
 * last one ending at the protein's end. Returns the count; fills starts
 * when not NULL (room for n / S + 2). */
ESMT_HIDDEN int esmt_window_starts(int64_t n, int W, int S, int64_t *starts);

#endif
