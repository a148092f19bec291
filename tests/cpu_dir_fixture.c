/* SPDX-License-Identifier: MIT */
/* See cpu_dir_fixture.h. */
#include "cpu_dir_fixture.h"

#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

esmt_context *g_ctx;
char g_dir[256];

int cpu_dir_setup(void **s) {
  (void)s;
  snprintf(g_dir, sizeof g_dir, "%s", test_mkdtemp());
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  /* ESMT_TEST_THREADS=1 under ThreadSanitizer: OpenMP's own workers
   * synchronise inside an uninstrumented libgomp, which TSan would report;
   * the races it is run for are between the test's own threads */
  const char *threads = getenv("ESMT_TEST_THREADS");
  if (threads) o.num_threads = atoi(threads);
  return esmt_context_create(&o, &g_ctx) == ESMT_OK ? 0 : -1;
}

int cpu_dir_teardown(void **s) {
  (void)s;
  esmt_context_destroy(g_ctx);
  test_rmtree(g_dir);
  return 0;
}

esmt_status cpu_dir_small_model(int hidden, int max_positions, esmt_model **out) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2;
  c.hidden_size = hidden;
  c.num_heads = 2;
  c.max_positions = max_positions;
  c.precision = ESMT_PRECISION_FP32;
  return esmt_model_create(g_ctx, &c, 11, out);
}

const char *path_in(const char *name) {
  static char buf[8][600];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
  return buf[k];
}

void write_text(const char *path, const char *text) { test_put_text(path, text); }

int ingest_random_proteins(const char *prefix, int records, int min_len, int len_spread,
                           unsigned seed, double valid_fraction, char *data, size_t cap) {
  const char *fa = path_in("prot.fa");
  FILE *f = fopen(fa, "w");
  if (!f) return -1;
  unsigned x = seed;
  for (int r = 0; r < records; r++) {
    fprintf(f, ">%s%d\n", prefix, r);
    for (int i = 0; i < min_len + r % len_spread; i++) {
      x = x * 1103515245u + 12345u;
      fputc("ACDEFGHIKLMNPQRSTVWY"[(x >> 16) % 20], f);
    }
    fputc('\n', f);
  }
  if (fclose(f)) return -1;
  snprintf(data, cap, "%s", path_in("data"));
  const char *in[] = {fa};
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  o.inputs = in;
  o.n_inputs = 1;
  o.output_dir = data;
  o.valid_fraction = valid_fraction;
  esmt_ingest_stats st = ESMT_INGEST_STATS_INIT;
  return esmt_ingest(&o, &st) == ESMT_OK && (valid_fraction <= 0 || st.valid_records > 0) ? 0 : -1;
}
