/* SPDX-License-Identifier: MIT */
/* A cmocka group fixture shared by suites that write files through the
 * library: a context on the build's cpu backend (ESMT_TEST_THREADS, when
 * set, its thread count) and a fresh temporary directory, removed
 * afterwards. */
#ifndef ESMT_CPU_DIR_FIXTURE_H
#define ESMT_CPU_DIR_FIXTURE_H

#include "esmtrain/esmtrain.h"

extern esmt_context *g_ctx; /* the cpu backend */
extern char g_dir[256];     /* the group's temporary directory */

/* Group setup and teardown (cmocka_run_group_tests). */
int cpu_dir_setup(void **state);
int cpu_dir_teardown(void **state);

/* The small fp32 model the inference suites share, on g_ctx: 2 layers of
 * `hidden` units and 2 heads, max_positions positions, weights from seed 11. */
esmt_status cpu_dir_small_model(int hidden, int max_positions, esmt_model **out);

/* g_dir/name; each result lives for 8 calls. */
const char *path_in(const char *name);

/* Create or replace a file with `text`; fails the test when it cannot. */
void write_text(const char *path, const char *text);

/* Proteins for a trainer's data: g_dir/prot.fa holds `records` random
 * sequences (record r: ">{prefix}{r}", min_len + r % len_spread residues,
 * drawn from `seed`), ingested into g_dir/data with `valid_fraction`.
 * The dataset's path goes to `data` (cap bytes); 0 on success. */
int ingest_random_proteins(const char *prefix, int records, int min_len, int len_spread,
                           unsigned seed, double valid_fraction, char *data, size_t cap);

#endif
