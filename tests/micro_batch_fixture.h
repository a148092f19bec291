/* SPDX-License-Identifier: MIT */
/* Deterministic inputs for the update-level tests (test_offload,
 * test_recompute): right-padded micro-batches (micro-batch k of update u,
 * B rows of T, row lengths T - (row + u + k) % 5, some positions masked
 * with labels), a tiny ingested dataset for config-driven trainers, and a
 * 2-thread cpu context whose INFO+ log lines collect in g_log. */
#ifndef ESMT_TEST_MICRO_BATCH_FIXTURE_H
#define ESMT_TEST_MICRO_BATCH_FIXTURE_H

#include <stdint.h>

#include "esmtrain/esmtrain.h"
#include "trainer_update.h"

/* Every log line of fixture_logging_context()'s context, newline-ended. */
extern char g_log[16384];
/* A cpu context (2 threads, INFO) logging into g_log; NULL on failure. */
esmt_context *fixture_logging_context(void);

/* A cmocka group setup and teardown around fixture_logging_context():
 * g_fixture_ctx is the context; the teardown puts back the backend it had
 * (a test may swap in another ops table, e.g. half_emu_ops) and destroys it. */
extern esmt_context *g_fixture_ctx;
int fixture_group_setup(void **state);
int fixture_group_teardown(void **state);

/* Fills tok/lab [B*T] and points mb at them (every other field zeroed:
 * no packed segments), with the counts filled in. */
void fill_micro_batch(esmt_micro_batch *mb, int B, int T, int u, int k, int32_t *tok,
                      int32_t *lab);

/* `steps` steps through the public model API alone, on one micro-batch:
 * zero_grad, forward, backward, the gradient norm (into *norm), an AdamW
 * step at lr 1e-3; fails the test on any error. */
void fixture_api_steps(esmt_model *m, const esmt_micro_batch *mb, int steps, double *norm);

/* 40 protein-like records of 20..59 residues ingested into <dir>/data
 * (20% validation); returns that path (static storage). */
const char *fixture_dataset(const char *dir);

#endif
