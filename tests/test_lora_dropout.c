/* SPDX-License-Identifier: MIT */
/* LoRA dropout (esmt_model_config.lora_dropout, docs/finetune.md): identity
 * at inference and under esmt_model_set_training(m, 0), a change in
 * training forwards, the same masks from the same seed, and gradients that
 * are the derivative of the loss the masked forward computes (central
 * differences with the draw held), and a refusal on a backend without the
 * dropout op. */
#include "test_util.h"
#include "head_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "model.h"

enum { B = 2, T = 8, C = 3 };

static const int32_t tokens[B * T] = {0, 5, 6, 7, 8, 9, 10, 2, 0, 11, 12, 13, 2, 1, 1, 1};
static const float targets[B] = {2, 0};

/* A 2-layer model with LoRA on query, value and the FFN's down map (whose
 * input gradient crosses the mask), B set nonzero so the adapters count. */
static esmt_model *make(esmt_context *ctx, float dropout) {
  esmt_model_config c = head_fixture_config(ESMT_HEAD_SEQ_CLASS, C);
  c.lora_rank = 4;
  c.lora_alpha = 8.0f;
  c.lora_dropout = dropout;
  c.lora_targets = ESMT_LORA_QUERY | ESMT_LORA_VALUE | ESMT_LORA_FFN_DOWN;
  esmt_model *m = NULL;
  if (esmt_model_create(ctx, &c, 7, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  head_fixture_set_lora_b(m, 0.02f, 9, 0.08f);
  return m;
}

static esmt_batch batch(void) {
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tokens;
  b.targets = targets;
  return b;
}

static double forward(esmt_model *m, float *out) {
  esmt_batch b = batch();
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  if (esmt_model_forward(m, &b, &r, out)) fail_msg("%s", esmt_last_error());
  return r.loss;
}

static void infer(esmt_model *m, float *out) {
  esmt_batch b = batch();
  esmt_infer_request rq = ESMT_INFER_REQUEST_INIT;
  rq.outputs = ESMT_INFER_HEAD;
  rq.head = out;
  if (esmt_model_infer(m, &b, &rq)) fail_msg("%s", esmt_last_error());
}

/* Inference, and evaluation forwards, compute as without dropout, bit for bit. */
static void test_identity_at_inference(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model *drop = make(ctx, 0.5f), *none = make(ctx, 0.0f);
  float a[B * C], b[B * C];
  infer(drop, a);
  infer(none, b);
  assert_memory_equal(a, b, sizeof a);
  assert_int_equal(esmt_model_set_training(drop, 0), ESMT_OK);
  assert_true(forward(drop, a) == forward(none, b));
  assert_memory_equal(a, b, sizeof a);
  assert_int_equal(esmt_model_set_training(drop, 2), ESMT_ERR_INVALID_ARGUMENT);
  esmt_model_destroy(drop);
  esmt_model_destroy(none);
  esmt_context_destroy(ctx);
}

/* Training forwards drop: the outputs change, a new mask each forward, the
 * same masks (and gradients) for two models of the same seed. */
static void test_changes_training(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model *d1 = make(ctx, 0.5f), *d2 = make(ctx, 0.5f), *none = make(ctx, 0.0f);
  float a[B * C], b[B * C], z[B * C];
  forward(none, z);
  forward(d1, a);
  assert_memory_not_equal(a, z, sizeof a);
  forward(d2, b);
  assert_memory_equal(a, b, sizeof a);
  const char *g = "base_model.model.esm.encoder.layer.0.attention.self.query.lora_A.weight";
  float ga[4 * 32], gb[4 * 32];
  assert_int_equal(esmt_model_zero_grad(d1), ESMT_OK);
  assert_int_equal(esmt_model_zero_grad(d2), ESMT_OK);
  assert_int_equal(esmt_model_backward(d1), ESMT_OK);
  assert_int_equal(esmt_model_backward(d2), ESMT_OK);
  assert_int_equal(esmt_model_read_tensor(d1, g, ESMT_BUF_GRADS, ga, 4 * 32), ESMT_OK);
  assert_int_equal(esmt_model_read_tensor(d2, g, ESMT_BUF_GRADS, gb, 4 * 32), ESMT_OK);
  assert_memory_equal(ga, gb, sizeof ga);
  forward(d1, b); /* the next draw */
  assert_memory_not_equal(a, b, sizeof a);
  esmt_model_destroy(d1);
  esmt_model_destroy(d2);
  esmt_model_destroy(none);
  esmt_context_destroy(ctx);
}

/* Every adapter tensor moved by eps * v: (L(+) - L(-)) / 2 eps equals
 * grad . v within 1% (fp32), each forward with the same draw. */
static void test_gradient(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model *m = make(ctx, 0.3f);
  int count = 0;
  assert_int_equal(esmt_model_tensor_count(m, &count), ESMT_OK);
  const uint64_t draw = m->lora_draw; /* esmt_model_forward draws draw + 1 */
  forward(m, NULL);
  assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
  m->lora_draw = draw;
  forward(m, NULL);
  assert_int_equal(esmt_model_backward(m), ESMT_OK);
  const float eps = 1e-3f;
  double dot = 0.0, lp = 0.0, lm = 0.0;
  for (int pass = 0; pass < 3; pass++) { /* 0: grad . v; 1: +eps v; 2: -eps v (from +) */
    for (int i = 0; i < count; i++) {
      esmt_tensor_info t = ESMT_TENSOR_INFO_INIT;
      assert_int_equal(esmt_model_tensor_info(m, i, &t), ESMT_OK);
      if (!strstr(t.name, "lora_")) continue;
      float *w = malloc(t.numel * sizeof *w), *g = malloc(t.numel * sizeof *g);
      assert_int_equal(esmt_model_read_tensor(m, t.name, ESMT_BUF_PARAMS, w, t.numel), ESMT_OK);
      assert_int_equal(esmt_model_read_tensor(m, t.name, ESMT_BUF_GRADS, g, t.numel), ESMT_OK);
      for (uint64_t k = 0; k < t.numel; k++) {
        const float v = (float)(((k * 13 + (uint64_t)i * 5) % 7)) / 7.0f - 0.4f;
        if (pass == 0) dot += (double)g[k] * v;
        else w[k] += (pass == 1 ? 1.0f : -2.0f) * eps * v;
      }
      if (pass) assert_int_equal(esmt_model_write_tensor(m, t.name, ESMT_BUF_PARAMS, w, t.numel),
                                 ESMT_OK);
      free(w);
      free(g);
    }
    m->lora_draw = draw;
    if (pass == 1) lp = forward(m, NULL);
    if (pass == 2) lm = forward(m, NULL);
  }
  const double fd = (lp - lm) / (2.0 * eps);
  if (!(fabs(fd - dot) <= 1e-2 * fabs(dot)) || fabs(dot) < 1e-4)
    fail_msg("finite differences %.6g, gradient %.6g", fd, dot);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

/* A backend without the dropout op (an ABI 2.2 plugin) is refused for
 * training with dropout, naming it; its inference still runs. */
static void test_backend_without_op(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model *m = make(ctx, 0.5f);
  const esmtb_ops *real = m->ops;
  esmtb_ops old = *real;
  old.dropout = NULL;
  m->ops = &old;
  esmt_batch b = batch();
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  const esmt_status st = esmt_model_forward(m, &b, &r, NULL);
  const int named = strstr(esmt_last_error(), "backend cpu has no dropout op") != NULL;
  float out[B * C];
  infer(m, out);
  m->ops = real;
  assert_int_equal(st, ESMT_ERR_UNSUPPORTED);
  assert_true(named);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identity_at_inference),
      cmocka_unit_test(test_changes_training),
      cmocka_unit_test(test_gradient),
      cmocka_unit_test(test_backend_without_op),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
