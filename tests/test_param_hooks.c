/* SPDX-License-Identifier: MIT */
/* The parameter memory's per-part hooks (memory/param_layer.h), which a
 * memory level that keeps weights or gradients off the device relies on:
 * weights_needed names each part's flat range before the ops that read it
 * (forward, recompute, backward, inference), in the order the graph runs,
 * and grads_ready is called with a smaller `from` only after that part's
 * weights were asked for. Checked on the cpu backend with a recording layer
 * over the device one. */
#include "test_util.h"

#include <string.h>

#include "micro_batch_fixture.h"
#include "model.h"
#include "param_layer.h"

enum { B = 2, T = 12, LAYERS = 3, D = 16, HEADS = 2, MAX_CALLS = 256 };

/* One call of the recording layer: 'W' weights_needed [lo, hi), 'G'
 * grads_ready from lo. */
typedef struct call {
  char kind;
  uint64_t lo, hi;
} call;
static call g_calls[MAX_CALLS];
static int g_n;

static esmt_status rec_weights(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  assert_true(g_n < MAX_CALLS);
  g_calls[g_n++] = (call){'W', lo, hi};
  return esmt_device_layer.weights_needed(p, lo, hi);
}

static esmt_status rec_grads(esmt_param_memory *p, uint64_t from) {
  assert_true(g_n < MAX_CALLS);
  g_calls[g_n++] = (call){'G', from, 0};
  return esmt_device_layer.grads_ready(p, from);
}

static esmt_param_layer g_recording;

static esmt_context *g_ctx;
static int setup(void **state) {
  (void)state;
  g_recording = esmt_device_layer;
  g_recording.weights_needed = rec_weights;
  g_recording.grads_ready = rec_grads;
  return (g_ctx = fixture_logging_context()) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  esmt_context_destroy(g_ctx);
  return 0;
}

static esmt_model *create(int recompute) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = LAYERS;
  c.hidden_size = D;
  c.num_heads = HEADS;
  c.max_positions = 64;
  esmt_model *m = NULL;
  if (esmt_model_create(g_ctx, &c, 5, &m) != ESMT_OK) fail_msg("create: %s", esmt_last_error());
  assert_int_equal(esmt_model_set_recompute(m, recompute), ESMT_OK);
  m->mem.layer = &g_recording; /* same buffers: the device layer releases them */
  return m;
}

/* The flat ranges the graph's parts read. */
static uint64_t layer_lo(const esmt_model *m, int l) { return m->layout.layers[l].ln1_w; }
static uint64_t layer_hi(const esmt_model *m, int l) {
  return l + 1 < m->L ? m->layout.layers[l + 1].ln1_w : m->layout.lnf_w;
}
static uint64_t embed_hi(const esmt_model *m) { return m->layout.embed + (uint64_t)m->V * m->d; }

static void expect(const esmt_model *m, int *i, char kind, uint64_t lo, uint64_t hi) {
  (void)m;
  if (*i >= g_n) fail_msg("call %d: expected %c [%llu, %llu), the graph made no more calls", *i,
                          kind, (unsigned long long)lo, (unsigned long long)hi);
  const call *c = &g_calls[*i];
  if (c->kind != kind || c->lo != lo || (kind == 'W' && c->hi != hi))
    fail_msg("call %d: expected %c [%llu, %llu), got %c [%llu, %llu)", *i, kind,
             (unsigned long long)lo, (unsigned long long)hi, c->kind, (unsigned long long)c->lo,
             (unsigned long long)c->hi);
  (*i)++;
}

static void expect_head(const esmt_model *m, int *i) {
  expect(m, i, 'W', m->layout.lnf_w, m->layout.total); /* final LN, LM head, its bias last */
  expect(m, i, 'W', m->layout.embed, embed_hi(m));     /* the tied decoder */
}

static void batch(esmt_batch *b, int32_t *tok, int32_t *lab) {
  esmt_micro_batch mb;
  fill_micro_batch(&mb, B, T, 3, 0, tok, lab);
  *b = (esmt_batch)ESMT_BATCH_INIT;
  b->batch = B;
  b->seq_len = T;
  b->tokens = tok;
  b->labels = lab;
}

static void training_order(int recompute) {
  esmt_model *m = create(recompute);
  int32_t tok[B * T], lab[B * T];
  esmt_batch b;
  batch(&b, tok, lab);
  g_n = 0;
  if (esmt_model_forward(m, &b, NULL, NULL) != ESMT_OK || esmt_model_backward(m) != ESMT_OK)
    fail_msg("%s", esmt_last_error());
  int i = 0;
  /* forward: the embedding, each layer, the head */
  expect(m, &i, 'W', m->layout.embed, embed_hi(m));
  for (int l = 0; l < m->L; l++) expect(m, &i, 'W', layer_lo(m, l), layer_hi(m, l));
  expect_head(m, &i);
  /* backward: the head, then each layer top-down (recompute asks before
   * re-running a layer's forward, and again before its backward), its
   * gradients final after it; the embedding last */
  expect_head(m, &i);
  expect(m, &i, 'G', m->layout.lnf_w, 0);
  for (int l = m->L - 1; l >= 0; l--) {
    if (recompute && l < m->L - 1) expect(m, &i, 'W', layer_lo(m, l), layer_hi(m, l));
    expect(m, &i, 'W', layer_lo(m, l), layer_hi(m, l));
    expect(m, &i, 'G', layer_lo(m, l), 0);
  }
  expect(m, &i, 'W', m->layout.embed, embed_hi(m));
  expect(m, &i, 'G', 0, 0);
  assert_int_equal(i, g_n);
  esmt_model_destroy(m);
}

static void test_training_order(void **state) {
  (void)state;
  training_order(0);
}

static void test_training_order_recompute(void **state) {
  (void)state;
  training_order(1);
}

/* Inference asks for the parts it runs, up to the deepest layer asked. */
static void test_inference_order(void **state) {
  (void)state;
  esmt_model *m = create(0);
  int32_t tok[B * T], lab[B * T];
  esmt_batch b;
  batch(&b, tok, lab);
  float mean[B * D];
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.layer = 2; /* the output of block 2: layers 0 and 1 run */
  q.mean = mean;
  g_n = 0;
  if (esmt_model_infer(m, &b, &q) != ESMT_OK) fail_msg("%s", esmt_last_error());
  int i = 0;
  expect(m, &i, 'W', m->layout.embed, embed_hi(m));
  expect(m, &i, 'W', layer_lo(m, 0), layer_hi(m, 0));
  expect(m, &i, 'W', layer_lo(m, 1), layer_hi(m, 1));
  assert_int_equal(i, g_n);
  esmt_model_destroy(m);
}

/* The parts cover the flat buffer: every element is in some part's range. */
static void test_parts_cover_the_buffer(void **state) {
  (void)state;
  esmt_model *m = create(0);
  assert_int_equal(m->layout.embed, 0);
  assert_int_equal(embed_hi(m), layer_lo(m, 0));
  for (int l = 0; l + 1 < m->L; l++) assert_int_equal(layer_hi(m, l), layer_lo(m, l + 1));
  /* the layer's last tensor ends where the next part begins */
  assert_int_equal(m->layout.layers[m->L - 1].fc2_b + (uint64_t)m->d, m->layout.lnf_w);
  esmt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_training_order),
      cmocka_unit_test(test_training_order_recompute),
      cmocka_unit_test(test_inference_order),
      cmocka_unit_test(test_parts_cover_the_buffer),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
