/* SPDX-License-Identifier: MIT */
/* See trainer_fixture.h. */
#include "test_util.h"

#include <stdlib.h>

#include "checkpoint.h"
#include "trainer_fixture.h"

esmt_context *g_ctx;

esmt_context *fixture_context(int threads) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = threads;
  esmt_context *ctx = NULL;
  return esmt_context_create(&o, &ctx) == ESMT_OK ? ctx : NULL;
}

int fixture_setup(void **state) {
  (void)state;
  g_ctx = fixture_context(2);
  return g_ctx ? 0 : -1;
}

int fixture_teardown(void **state) {
  (void)state;
  esmt_context_destroy(g_ctx);
  return 0;
}

esmt_model *fixture_model_in(esmt_context *ctx) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2; c.hidden_size = 32; c.num_heads = 2; c.max_positions = 64;
  esmt_model *m = NULL;
  if (esmt_model_create(ctx, &c, 7, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return m;
}

esmt_model *fixture_model(void) { return fixture_model_in(g_ctx); }

float *fixture_weights(esmt_model *m) {
  float *h = malloc(m->layout.total * sizeof *h);
  assert_non_null(h);
  assert_int_equal(esmt_flat_download(m, h, m->mem.master), ESMT_OK);
  return h;
}
