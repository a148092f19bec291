/* SPDX-License-Identifier: MIT */
/* See micro_batch_fixture.h. */
#include "micro_batch_fixture.h"

#include <stdio.h>
#include <string.h>

#include "test_util.h"

void fill_micro_batch(esmt_micro_batch *mb, int B, int T, int u, int k, int32_t *tok,
                      int32_t *lab) {
  for (int i = 0; i < B * T; i++) {
    int t = i % T, row = i / T, len = T - (row + u + k) % 5;
    tok[i] = t >= len ? ESMT_TOKEN_PAD : t % 6 == 3 ? ESMT_TOKEN_MASK : 4 + (i * 7 + u * 3 + k) % 20;
    lab[i] = t < len && (t % 6 == 3 || t % 11 == 1) ? 4 + (i + u + k) % 20 : ESMT_LABEL_IGNORE;
  }
  memset(mb, 0, sizeof *mb); /* right-padded: no segments */
  mb->B = B;
  mb->T = T;
  mb->tokens = tok;
  mb->labels = lab;
  esmt_micro_batch_count(mb);
}

const char *fixture_dataset(const char *dir) {
  static char data[600];
  char fa[600];
  snprintf(fa, sizeof fa, "%s/p.fa", dir);
  snprintf(data, sizeof data, "%s/data", dir);
  FILE *f = fopen(fa, "w");
  assert_non_null(f);
  for (int r = 0; r < 40; r++) {
    fprintf(f, ">s%d\n", r);
    for (int i = 0; i < 20 + r; i++) fputc("ACDEFGHIKLMNPQRSTVWY"[(r * 7 + i) % 20], f);
    fputc('\n', f);
  }
  fclose(f);
  esmt_ingest_options io = ESMT_INGEST_OPTIONS_INIT;
  const char *in[] = {fa};
  io.inputs = in;
  io.n_inputs = 1;
  io.output_dir = data;
  io.valid_fraction = 0.2;
  assert_int_equal(esmt_ingest(&io, NULL), ESMT_OK);
  return data;
}

char g_log[16384];

static void capture(void *user, esmt_log_level level, const char *msg) {
  (void)user;
  (void)level;
  size_t n = strlen(g_log);
  snprintf(g_log + n, sizeof g_log - n, "%s\n", msg);
}

void fixture_api_steps(esmt_model *m, const esmt_micro_batch *mb, int steps, double *norm) {
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = mb->B;
  b.seq_len = mb->T;
  b.tokens = mb->tokens;
  b.labels = mb->labels;
  for (int s = 1; s <= steps; s++) {
    assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
    if (esmt_model_forward(m, &b, NULL, NULL) || esmt_model_backward(m))
      fail_msg("%s", esmt_last_error());
    assert_int_equal(esmt_model_grad_norm(m, norm), ESMT_OK);
    esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
    assert_int_equal(esmt_model_optimizer_step(m, &ac, 1e-3, 1.0, s), ESMT_OK);
  }
}

esmt_context *g_fixture_ctx;
static const esmt_backend_entry *g_fixture_backend;

int fixture_group_setup(void **state) {
  (void)state;
  if (!(g_fixture_ctx = fixture_logging_context())) return -1;
  g_fixture_backend = g_fixture_ctx->backend;
  return 0;
}

int fixture_group_teardown(void **state) {
  (void)state;
  g_fixture_ctx->backend = g_fixture_backend;
  esmt_context_destroy(g_fixture_ctx);
  g_fixture_ctx = NULL;
  return 0;
}

esmt_context *fixture_logging_context(void) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 2;
  o.log = capture;
  o.log_level = ESMT_LOG_INFO;
  esmt_context *ctx = NULL;
  return esmt_context_create(&o, &ctx) == ESMT_OK ? ctx : NULL;
}
