/* SPDX-License-Identifier: MIT */
/* esmt_model_infer on the cpu backend: its arena does not grow with depth
 * (two residual buffers and one layer's intermediates), its logits equal
 * esmt_model_forward's bit for bit, its representations agree with the
 * training forward's, training after it is unchanged (the arena is carved
 * back), and misuse is refused with a message. The comparison with
 * transformers' hidden states is tests/interop/test_hf_roundtrip.py (e). */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

enum { B = 3, T = 20, D = 32 };

static esmt_context *g_ctx;
static int setup(void **state) {
  (void)state;
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.log_level = ESMT_LOG_ERROR;
  return esmt_context_create(&o, &g_ctx) == ESMT_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  esmt_context_destroy(g_ctx);
  return 0;
}

static esmt_model_config config(int layers) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = layers;
  c.hidden_size = D;
  c.num_heads = 4;
  c.max_positions = 64;
  c.precision = ESMT_PRECISION_FP32;
  return c;
}

static void tokens(int32_t *tok, int32_t *lab) {
  const int len[B] = {T, 13, 6};
  unsigned x = 7;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      x = x * 1103515245u + 12345u;
      int32_t id = t == 0 ? ESMT_TOKEN_CLS : t == len[b] - 1 ? ESMT_TOKEN_EOS
                 : t >= len[b] ? ESMT_TOKEN_PAD : 4 + (int32_t)((x >> 16) % 20);
      tok[b * T + t] = id;
      lab[b * T + t] = ESMT_LABEL_IGNORE;
      if (id >= 4 && (x >> 8) % 5 == 0) { lab[b * T + t] = id; tok[b * T + t] = ESMT_TOKEN_MASK; }
    }
}

static void arena_flat_in_depth(void **state) {
  (void)state;
  esmt_model_config c2 = config(2), c24 = config(24);
  const uint64_t i2 = esmt_activation_bytes(&c2, B, T, 4, 2);
  const uint64_t i24 = esmt_activation_bytes(&c24, B, T, 4, 2);
  const uint64_t r24 = esmt_activation_bytes(&c24, B, T, 4, 1);
  print_message("inference arena: %llu bytes at 2 layers, %llu at 24 (training with recompute: "
                "%llu)\n", (unsigned long long)i2, (unsigned long long)i24,
                (unsigned long long)r24);
  assert_int_equal(i2, i24);
  assert_true(i24 < r24);
}

static void logits_and_states_match_forward(void **state) {
  (void)state;
  esmt_model_config c = config(3);
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create(g_ctx, &c, 5, &m), ESMT_OK);
  int32_t tok[B * T], lab[B * T];
  tokens(tok, lab);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tok;
  b.labels = lab;
  /* a training step's loss and gradients before inference ... */
  float *f0 = malloc(B * T * 33 * sizeof *f0), *f1 = malloc(B * T * 33 * sizeof *f1);
  float *il = malloc(B * T * 33 * sizeof *il), *pt = malloc(B * T * D * sizeof *pt);
  float mean[B * D], cls[B * D];
  esmt_forward_result r0 = ESMT_FORWARD_RESULT_INIT, r1 = ESMT_FORWARD_RESULT_INIT;
  double n0 = 0, n1 = 0;
  assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
  assert_int_equal(esmt_model_forward(m, &b, &r0, f0), ESMT_OK);
  assert_int_equal(esmt_model_backward(m), ESMT_OK);
  assert_int_equal(esmt_model_grad_norm(m, &n0), ESMT_OK);
  /* ... inference of the last layer with logits ... */
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_PER_TOKEN | ESMT_INFER_MEAN | ESMT_INFER_CLS | ESMT_INFER_LOGITS;
  q.per_token = pt;
  q.mean = mean;
  q.cls = cls;
  q.logits = il;
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_OK);
  assert_memory_equal(il, f0, B * T * 33 * sizeof *il);
  /* mean = the mean of the per-token rows 1 .. len-2; pads zero */
  const int len[B] = {T, 13, 6};
  for (int i = 0; i < B; i++) {
    for (int j = 0; j < D; j++) {
      double s = 0;
      for (int t = 1; t < len[i] - 1; t++) s += pt[((size_t)i * T + t) * D + j];
      assert_float_equal(mean[i * D + j], s / (len[i] - 2), 1e-6);
      assert_true(cls[i * D + j] == pt[(size_t)i * T * D + j]);
    }
    for (int t = len[i]; t < T; t++) assert_true(pt[((size_t)i * T + t) * D] == 0.0f);
  }
  /* ... and the same training step after it: identical */
  assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
  assert_int_equal(esmt_model_forward(m, &b, &r1, f1), ESMT_OK);
  assert_int_equal(esmt_model_backward(m), ESMT_OK);
  assert_int_equal(esmt_model_grad_norm(m, &n1), ESMT_OK);
  assert_true(r0.loss == r1.loss && n0 == n1);
  assert_memory_equal(f0, f1, B * T * 33 * sizeof *f0);
  free(f0);
  free(f1);
  free(il);
  free(pt);
  esmt_model_destroy(m);
}

static void misuse_is_refused(void **state) {
  (void)state;
  esmt_model_config c = config(2);
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create(g_ctx, &c, 5, &m), ESMT_OK);
  int32_t tok[B * T], lab[B * T];
  tokens(tok, lab);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tok;
  float mean[B * D];
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.mean = mean;
  q.layer = 3; /* a 2-layer model has 0..2 */
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "0..2 or -1"));
  q.layer = -1;
  q.outputs = ESMT_INFER_CLS; /* no buffer for it */
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "no buffer"));
  q.outputs = 0;
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_ERR_INVALID_ARGUMENT);
  q.outputs = ESMT_INFER_MEAN;
  q.struct_size = 8;
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_ERR_ABI);
  q.struct_size = sizeof q;
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_OK);
  esmt_model_destroy(m);
}

/* layers {2, 0, -1} in one pass equal three single-layer passes bit for bit */
static void several_layers_in_one_pass(void **state) {
  (void)state;
  esmt_model_config c = config(3);
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create(g_ctx, &c, 5, &m), ESMT_OK);
  int32_t tok[B * T], lab[B * T];
  tokens(tok, lab);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tok;
  const int layers[3] = {2, 0, -1};
  float *pt = malloc(3 * B * T * D * sizeof *pt), *one = malloc(B * T * D * sizeof *one);
  float mean[3 * B * D], m1[B * D];
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_PER_TOKEN | ESMT_INFER_MEAN;
  q.per_token = pt;
  q.mean = mean;
  q.num_layers = 3;
  q.layers = layers;
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_OK);
  for (int k = 0; k < 3; k++) {
    esmt_infer_request s = ESMT_INFER_REQUEST_INIT;
    s.outputs = ESMT_INFER_PER_TOKEN | ESMT_INFER_MEAN;
    s.per_token = one;
    s.mean = m1;
    s.layer = layers[k];
    assert_int_equal(esmt_model_infer(m, &b, &s), ESMT_OK);
    assert_memory_equal(pt + (size_t)k * B * T * D, one, B * T * D * sizeof *one);
    assert_memory_equal(mean + (size_t)k * B * D, m1, sizeof m1);
  }
  /* the layers differ from each other (the blocks are not one copy) */
  assert_memory_not_equal(pt, pt + (size_t)B * T * D, B * T * D * sizeof *pt);
  const int twice[2] = {3, -1};
  q.num_layers = 2;
  q.layers = twice;
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "asked for twice"));
  free(pt);
  free(one);
  esmt_model_destroy(m);
}

/* The three proteins packed into one row give what they give right-padded,
 * to float rounding: mean, cls and logits per protein. */
static void packed_rows_match_padded(void **state) {
  (void)state;
  esmt_model_config c = config(2);
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create(g_ctx, &c, 9, &m), ESMT_OK);
  int32_t tok[B * T], lab[B * T];
  tokens(tok, lab);
  const int len[B] = {T, 13, 6};
  enum { PT = T + 13 + 6 + 3 }; /* one row, three proteins, three pads at the end */
  int32_t ptok[PT], start[B], plen[B];
  int at = 0;
  for (int i = 0; i < B; i++) {
    start[i] = at;
    plen[i] = len[i];
    memcpy(ptok + at, tok + i * T, (size_t)len[i] * sizeof(int32_t));
    at += len[i];
  }
  for (; at < PT; at++) ptok[at] = ESMT_TOKEN_PAD;
  esmt_batch b = ESMT_BATCH_INIT, p = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tok;
  p.batch = 1;
  p.seq_len = PT;
  p.tokens = ptok;
  p.num_segments = B;
  p.seg_start = start;
  p.seg_len = plen;
  float mean[B * D], cls[B * D], pmean[B * D], pcls[B * D];
  float *lg = malloc(B * T * 33 * sizeof *lg), *plg = malloc(PT * 33 * sizeof *plg);
  float *ptk = malloc(PT * D * sizeof *ptk);
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_MEAN | ESMT_INFER_CLS | ESMT_INFER_LOGITS;
  q.mean = mean;
  q.cls = cls;
  q.logits = lg;
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_OK);
  q.outputs |= ESMT_INFER_PER_TOKEN;
  q.mean = pmean;
  q.cls = pcls;
  q.logits = plg;
  q.per_token = ptk;
  assert_int_equal(esmt_model_infer(m, &p, &q), ESMT_OK);
  double worst = 0;
  for (int i = 0; i < B * D; i++) {
    const double e1 = fabs(mean[i] - pmean[i]), e2 = fabs(cls[i] - pcls[i]);
    worst = fmax(worst, fmax(e1, e2));
  }
  for (int i = 0; i < B; i++)
    for (int t = 0; t < len[i]; t++)
      for (int v = 0; v < 33; v++)
        worst = fmax(worst, fabs(lg[((size_t)i * T + t) * 33 + v] -
                                 plg[((size_t)start[i] + t) * 33 + v]));
  print_message("packed vs padded: largest difference %.3g\n", worst);
  assert_true(worst < 1e-5);
  for (int t = T + 13 + 6; t < PT; t++) {
    assert_true(ptk[(size_t)t * D] == 0.0f);
    assert_true(plg[(size_t)t * 33] == 0.0f);
  }
  free(lg);
  free(plg);
  free(ptk);
  esmt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(arena_flat_in_depth),
      cmocka_unit_test(logits_and_states_match_forward),
      cmocka_unit_test(misuse_is_refused),
      cmocka_unit_test(several_layers_in_one_pass),
      cmocka_unit_test(packed_rows_match_padded),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
