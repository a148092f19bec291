/* Deterministic right-padded micro-batches for the update-level tests
 * (test_offload, test_recompute): micro-batch k of update u, B rows of T,
 * row lengths T - (row + u + k) % 5, some positions masked with labels. */
#ifndef ESMT_TEST_MICRO_BATCH_FIXTURE_H
#define ESMT_TEST_MICRO_BATCH_FIXTURE_H

#include <stdint.h>

#include "trainer_update.h"

/* Fills tok/lab [B*T] and points mb at them (every other field zeroed:
 * no packed segments), with the counts filled in. */
void fill_micro_batch(esmt_micro_batch *mb, int B, int T, int u, int k, int32_t *tok,
                      int32_t *lab);

#endif
