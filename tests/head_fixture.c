/* SPDX-License-Identifier: MIT */
/* See head_fixture.h. */
#include "head_fixture.h"

#include <stdlib.h>
#include <string.h>

#include "test_util.h"

esmt_context *head_fixture_ctx(void) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 1;
  o.log_level = ESMT_LOG_WARN;
  esmt_context *ctx = NULL;
  if (esmt_context_create(&o, &ctx) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return ctx;
}

esmt_model_config head_fixture_config(esmt_head_kind head, int num_labels) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.num_heads = 4;
  c.max_positions = 16;
  c.precision = ESMT_PRECISION_FP32;
  c.head = head;
  c.num_labels = num_labels;
  return c;
}

void head_fixture_set_lora_b(esmt_model *m, float step, unsigned period, float offset) {
  int count = 0;
  assert_int_equal(esmt_model_tensor_count(m, &count), ESMT_OK);
  for (int i = 0; i < count; i++) {
    esmt_tensor_info t = ESMT_TENSOR_INFO_INIT;
    assert_int_equal(esmt_model_tensor_info(m, i, &t), ESMT_OK);
    if (!strstr(t.name, ".lora_B")) continue;
    float *v = malloc(t.numel * sizeof *v);
    assert_non_null(v);
    for (uint64_t k = 0; k < t.numel; k++) v[k] = step * (float)((k * 7 + (uint64_t)i) % period) - offset;
    assert_int_equal(esmt_model_write_tensor(m, t.name, ESMT_BUF_PARAMS, v, t.numel), ESMT_OK);
    free(v);
  }
}
