/* SPDX-License-Identifier: MIT */
/* What the multi-process data-parallel tests (test_data_parallel,
 * test_dp_device, test_zero1, test_zero3) share: running each rank's spec
 * in a fork()ed process, passing results back through small files (an error text, the
 * trained fp32 weights), and what a killed rank must leave behind. */
#ifndef ESMT_TEST_RANK_RUNNER_H
#define ESMT_TEST_RANK_RUNNER_H

#include <stddef.h>

#include "esmtrain/esmtrain.h"

/* Runs fn(spec i) for i < n, each in its own process (specs is an array of
 * n elements of spec_size bytes); status[i] is its esmt_status, or 128 +
 * the signal that ended it. */
typedef esmt_status (*rank_fn)(const void *spec);
void run_ranks_forked(rank_fn fn, const void *specs, size_t spec_size, int n, int *status);

void write_text(const char *path, const char *text);
/* The model's fp32 weights into `path` (raw floats); nothing on failure. */
void write_weights(esmt_model *m, const char *path);
/* Reads a write_weights file (fails the test when it is missing); *n floats. */
float *read_weights(const char *path, size_t *n);
/* After a rank died: RUN/checkpoints holds `latest` naming `step` (e.g.
 * "step-00000002") and that checkpoint alone, nothing half-written beside
 * it, and it loads into m. */
void assert_last_good_checkpoint(const char *run_dir, const char *step, esmt_model *m);
/* The text of a small file written by a rank (fails the test when missing). */
void read_rank_text(const char *path, char *buf, size_t cap);

#endif
