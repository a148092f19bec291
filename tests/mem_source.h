/* SPDX-License-Identifier: MIT */
/* A deterministic in-memory batch source for trainer tests: batch k is a
 * function of k alone (protein-like rows, ~15% masked), its cursor is the
 * batch number. */
#ifndef ESMT_TEST_MEM_SOURCE_H
#define ESMT_TEST_MEM_SOURCE_H

#include <stdint.h>

#include "esmtrain/esmtrain.h"

enum { MEM_T = 24, MEM_MAXB = 4 };

typedef struct mem_source {
  int rows;            /* rows per batch (<= MEM_MAXB) */
  int64_t index;       /* next batch number */
  int64_t limit;       /* batches before exhaustion (0 = endless) */
  int repeat;          /* always batch 0 (overfitting) */
  int offset, stride;  /* this source serves batches offset + stride * index (a rank's share;
                        * 0, 0 = every batch) */
  int32_t tok[MEM_MAXB * MEM_T], lab[MEM_MAXB * MEM_T];
} mem_source;

esmt_batch_source mem_source_as_source(mem_source *m);

/* Row r of batch k into tok/lab [MEM_T]. */
void mem_source_row(int64_t k, int r, int32_t *tok, int32_t *lab);

#endif
