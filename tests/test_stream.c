/* SPDX-License-Identifier: MIT */
/* The stream layer (memory/stream.{h,c}) on the cpu backend, which is the
 * "device", the host and the host optimizer here: with each layer's
 * gradients sent down to the host as backward produces them, and with each
 * layer's compute weights brought up as it runs, training must end with
 * the weights and moments of the resident run: bit for bit with one
 * micro-batch per update (the same kernels in the same order; the host's
 * first contribution copies), and, with several micro-batches, within the
 * rounding of the host's sums (the resident run adds each micro-batch's
 * products into the running sum inside the GEMM, the host adds the
 * micro-batch's finished sum: one rounding apart per micro-batch). Also:
 * recompute, Lion, half precision (emulated), an injected NaN, the public
 * API without the trainer, and checkpoints crossing levels. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "context.h"
#include "half_emu_backend.h"
#include "micro_batch_fixture.h"
#include "stream.h"
#include "trainer.h"

enum { B = 3, T = 24, LAYERS = 3 };

static esmt_optimizer_kind g_kind = ESMT_OPTIMIZER_ADAMW;


/* The levels compared: resident on the device, optimizer offload,
 * gradients streamed, weights and gradients streamed. */
enum { RESIDENT = -1, OFFLOAD = 0, GRADS = ESMT_STREAM_GRADIENTS, WEIGHTS = ESMT_STREAM_WEIGHTS };

/* The tiny model every case trains. */
static esmt_model_config tiny_config(esmt_precision p) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.optimizer = g_kind;
  c.num_layers = LAYERS;
  c.hidden_size = 32;
  c.num_heads = 4;
  c.max_positions = 64;
  c.precision = p;
  return c;
}

static esmt_model *create(esmt_precision p, int level, int recompute) {
  const esmt_model_config c = tiny_config(p);
  esmt_offload_options o = {.enabled = level >= 0, .recompute = recompute,
                            .streamed = level > 0 ? level : ESMT_STREAM_NONE};
  esmt_model *m = NULL;
  if (esmt_model_create_with(g_fixture_ctx, &c, 11, &o, &m) != ESMT_OK)
    fail_msg("create: %s", esmt_last_error());
  assert_true(level > 0 ? m->mem.stream != NULL : m->mem.stream == NULL);
  return m;
}

/* `updates` updates of `k` micro-batches each, clipping engaged. */
static void train(esmt_model *m, int updates, int k, esmt_update_result *res) {
  esmt_update_params p;
  memset(&p, 0, sizeof p);
  assert_int_equal(esmt_optimizer_config_init(g_kind, &p.optimizer), ESMT_OK);
  esmt_schedule sc = ESMT_SCHEDULE_INIT;
  sc.peak_lr = 3e-3;
  sc.warmup_steps = 2;
  sc.total_steps = 100;
  p.schedule = sc;
  p.grad_clip = 0.5;
  p.loss_scale = 1.0;
  int32_t tok[3][B * T], lab[3][B * T];
  for (int u = 1; u <= updates; u++) {
    esmt_micro_batch mbs[3];
    for (int i = 0; i < k; i++) fill_micro_batch(&mbs[i], B, T, u, i, tok[i], lab[i]);
    if (esmt_run_update(m, mbs, k, &p, u, u, &res[u - 1]) != ESMT_OK)
      fail_msg("update %d: %s", u, esmt_last_error());
    assert_false(res[u - 1].skipped);
  }
}

/* Largest |a - b| over the master weights and moments, relative to the
 * largest |a| of the same buffer (0 when bit-identical). */
static double state_gap(const esmt_model *a, const esmt_model *b) {
  const float *bufs[3][2] = {{a->mem.master, b->mem.master}, {a->mem.moment1, b->mem.moment1},
                             {a->mem.moment2, b->mem.moment2}};
  double worst = 0;
  for (int i = 0; i < 3; i++) {
    if (!bufs[i][0]) continue;
    double gap = 0, scale = 0;
    for (uint64_t j = 0; j < a->layout.total; j++) {
      gap = fmax(gap, fabs((double)bufs[i][0][j] - (double)bufs[i][1][j]));
      scale = fmax(scale, fabs((double)bufs[i][0][j]));
    }
    worst = fmax(worst, scale > 0 ? gap / scale : gap);
  }
  return worst;
}

static void expect_same_state(const esmt_model *a, const esmt_model *b) {
  const size_t bytes = a->layout.total * sizeof(float);
  assert_memory_equal(a->mem.master, b->mem.master, bytes);
  assert_memory_equal(a->mem.moment1, b->mem.moment1, bytes);
  if (a->mem.moment2) assert_memory_equal(a->mem.moment2, b->mem.moment2, bytes);
}

/* One micro-batch per update: every level ends bit-identical. */
static void one_micro_batch(int recompute) {
  esmt_model *ref = create(ESMT_PRECISION_FP32, RESIDENT, recompute);
  esmt_update_result r0[6], r1[6];
  train(ref, 6, 1, r0);
  for (int level = GRADS; level <= WEIGHTS; level++) {
    esmt_model *m = create(ESMT_PRECISION_FP32, level, recompute);
    train(m, 6, 1, r1);
    for (int i = 0; i < 6; i++) {
      assert_true(r0[i].loss == r1[i].loss);
      assert_true(r0[i].grad_norm == r1[i].grad_norm);
    }
    expect_same_state(ref, m);
    /* each update sent every layer's gradients down once */
    assert_int_equal(m->mem.stream->parts_streamed_down, 6 * LAYERS);
    if (level == WEIGHTS) /* forward and backward prefetched every layer after the first */
      assert_true(m->mem.stream->prefetch_hits >= (uint64_t)6 * (2 * LAYERS - 1));
    esmt_model_destroy(m);
  }
  assert_true(r0[5].loss < r0[0].loss);
  esmt_model_destroy(ref);
}

static void test_one_micro_batch_bit_identical(void **state) {
  (void)state;
  one_micro_batch(0);
}

static void test_recompute_bit_identical(void **state) {
  (void)state;
  one_micro_batch(1);
}

/* Several micro-batches per update: the host adds each micro-batch's
 * finished gradients; the resident run adds inside the GEMM. */
static void test_micro_batches_within_rounding(void **state) {
  (void)state;
  esmt_model *ref = create(ESMT_PRECISION_FP32, RESIDENT, 0);
  esmt_update_result r0[6], r1[6];
  train(ref, 6, 3, r0);
  for (int level = GRADS; level <= WEIGHTS; level++) {
    esmt_model *m = create(ESMT_PRECISION_FP32, level, 0);
    train(m, 6, 3, r1);
    const double gap = state_gap(ref, m);
    print_message("level %d, 3 micro-batches, 6 updates: relative gap %.3g\n", level, gap);
    /* a few fp32 roundings of the gradients per update, carried through
     * AdamW's normalised step (lr 3e-3): far below one step's size */
    assert_true(gap <= 1e-5);
    for (int i = 0; i < 6; i++) assert_true(fabs(r0[i].loss - r1[i].loss) <= 1e-5 * fabs(r0[i].loss));
    esmt_model_destroy(m);
  }
  esmt_model_destroy(ref);
}

static void test_lion_bit_identical(void **state) {
  (void)state;
  g_kind = ESMT_OPTIMIZER_LION;
  esmt_model *ref = create(ESMT_PRECISION_FP32, RESIDENT, 0);
  esmt_model *m = create(ESMT_PRECISION_FP32, WEIGHTS, 0);
  esmt_update_result r0[5], r1[5];
  train(ref, 5, 1, r0);
  train(m, 5, 1, r1);
  assert_null(m->mem.moment2);
  expect_same_state(ref, m);
  esmt_model_destroy(ref);
  esmt_model_destroy(m);
  g_kind = ESMT_OPTIMIZER_ADAMW;
}

/* F16/BF16 on the emulated half backend: the streamed slots hold the
 * staging image's half weights; the LayerNorm w/b stay on the device. */
static void half_run(esmt_precision p) {
  half_emu_install(g_fixture_ctx);
  half_emu_watch(NULL);
  esmt_model *ref = create(p, RESIDENT, 0);
  esmt_model *m = create(p, WEIGHTS, 0);
  assert_null(m->mem.compute_lowp);
  assert_non_null(m->mem.norm_dev);
  esmt_update_result r0[4], r1[4];
  train(ref, 4, 1, r0);
  train(m, 4, 1, r1);
  for (int i = 0; i < 4; i++) assert_true(r0[i].loss == r1[i].loss);
  expect_same_state(ref, m);
  esmt_model_destroy(ref);
  esmt_model_destroy(m);
  half_emu_uninstall(g_fixture_ctx);
}

static void test_bf16_bit_identical(void **state) { (void)state; half_run(ESMT_PRECISION_BF16); }
static void test_fp16_bit_identical(void **state) { (void)state; half_run(ESMT_PRECISION_FP16); }

/* A NaN written into the gradients after backward (the fault-injection
 * hook, through the memory's copy) is seen by the host norm: the update is
 * skipped, and the next ones go on as in the resident run. */
static void test_nonfinite_skipped(void **state) {
  (void)state;
  esmt_model *ms[2] = {create(ESMT_PRECISION_FP32, RESIDENT, 0),
                       create(ESMT_PRECISION_FP32, WEIGHTS, 0)};
  esmt_update_result rs[2][3];
  esmt_test_inject_nan_step = 2;
  esmt_test_inject_nan_count = 1;
  for (int k = 0; k < 2; k++) {
    esmt_update_params p;
    memset(&p, 0, sizeof p);
    p.optimizer = (esmt_optimizer_config)ESMT_OPTIMIZER_CONFIG_INIT;
    p.schedule = (esmt_schedule)ESMT_SCHEDULE_INIT;
    p.schedule.warmup_steps = 1;
    p.schedule.total_steps = 500000;
    p.loss_scale = 1.0;
    int32_t tok[B * T], lab[B * T];
    int64_t applied = 0;
    for (int u = 1; u <= 3; u++) {
      esmt_micro_batch mb;
      fill_micro_batch(&mb, B, T, u, 0, tok, lab);
      if (esmt_run_update(ms[k], &mb, 1, &p, u, applied + 1, &rs[k][u - 1]) != ESMT_OK)
        fail_msg("%s", esmt_last_error());
      applied += !rs[k][u - 1].skipped;
    }
  }
  esmt_test_inject_nan_step = 0;
  esmt_test_inject_nan_count = 0;
  assert_true(rs[0][1].skipped && rs[1][1].skipped);
  assert_false(rs[0][2].skipped || rs[1][2].skipped);
  expect_same_state(ms[0], ms[1]);
  esmt_model_destroy(ms[0]);
  esmt_model_destroy(ms[1]);
}

/* The public model API without the trainer: zero_grad, forward, backward,
 * the norm, the step; gradients read and written by name. */
/* The streamed model through the public API alone: esmt_memory_policy. */
static esmt_model *create_public(int stream) {
  const esmt_model_config c = tiny_config(ESMT_PRECISION_FP32);
  esmt_memory_policy mp = ESMT_MEMORY_POLICY_INIT;
  mp.stream = stream;
  esmt_model *m = NULL;
  /* streaming needs the optimizer's host side */
  assert_int_equal(esmt_model_create_with_memory(g_fixture_ctx, &c, 11, &mp, &m),
                   ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "needs offload_optimizer"));
  assert_null(m);
  esmt_memory_policy old = mp;
  old.struct_size = 8; /* older than any layout of it */
  assert_int_equal(esmt_model_create_with_memory(g_fixture_ctx, &c, 11, &old, &m), ESMT_ERR_ABI);
  mp.offload_optimizer = 1;
  if (esmt_model_create_with_memory(g_fixture_ctx, &c, 11, &mp, &m) != ESMT_OK)
    fail_msg("create: %s", esmt_last_error());
  assert_true(m->mem.stream && m->mem.stream->level == stream);
  return m;
}

static void test_public_api_path(void **state) {
  (void)state;
  esmt_model *ms[2] = {create(ESMT_PRECISION_FP32, RESIDENT, 0), create_public(WEIGHTS)};
  /* the host link's speed, as bench and plan --link read it */
  double up = 0, down = 0;
  assert_int_equal(esmt_context_copy_bandwidth(g_fixture_ctx, 1 << 20, 2, &up, &down), ESMT_OK);
  assert_true(up > 0 && down > 0);
  assert_int_equal(esmt_context_copy_bandwidth(g_fixture_ctx, 100, 2, &up, &down),
                   ESMT_ERR_INVALID_ARGUMENT);
  int32_t tok[B * T], lab[B * T];
  esmt_micro_batch mb;
  fill_micro_batch(&mb, B, T, 1, 0, tok, lab);
  double norms[2];
  float g[2][32 * 32 * 3];
  const char *qkv = "esm.encoder.layer.1.attention.self.query.weight";
  for (int k = 0; k < 2; k++) {
    esmt_model *m = ms[k];
    fixture_api_steps(m, &mb, 3, &norms[k]);
    /* a layer's gradients and the embedding's (resident) by name */
    assert_int_equal(esmt_model_read_tensor(m, qkv, ESMT_BUF_GRADS, g[k], 32 * 32), ESMT_OK);
  }
  assert_true(norms[0] == norms[1] && norms[0] > 0);
  assert_memory_equal(g[0], g[1], 32 * 32 * sizeof(float));
  expect_same_state(ms[0], ms[1]);
  /* a written gradient is what the norm then sees, on both */
  for (int i = 0; i < 32; i++) g[0][i] = 0.25f;
  for (int k = 0; k < 2; k++) {
    assert_int_equal(esmt_model_zero_grad(ms[k]), ESMT_OK);
    assert_int_equal(esmt_model_write_tensor(ms[k], "esm.embeddings.word_embeddings.weight",
                                             ESMT_BUF_GRADS, g[0], 32), ESMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(esmt_model_write_tensor(ms[k], "esm.encoder.layer.2.LayerNorm.bias",
                                             ESMT_BUF_GRADS, g[0], 32), ESMT_OK);
    assert_int_equal(esmt_model_write_tensor(ms[k], "lm_head.layer_norm.bias", ESMT_BUF_GRADS,
                                             g[0], 32), ESMT_OK);
    assert_int_equal(esmt_model_grad_norm(ms[k], &norms[k]), ESMT_OK);
  }
  assert_true(fabs(norms[0] - sqrt(64 * 0.0625)) < 1e-6);
  assert_true(norms[0] == norms[1]);
  esmt_model_destroy(ms[0]);
  esmt_model_destroy(ms[1]);
}

/* A checkpoint is the same files whatever the level: saved streamed it
 * loads resident and the reverse, and both go on identically. */
static void test_checkpoint_cross(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  char run[512], ck[1024];
  esmt_update_result r[3];
  for (int from_stream = 0; from_stream < 2; from_stream++) {
    snprintf(run, sizeof run, "%s/run%d", dir, from_stream);
    esmt_model *src = create(ESMT_PRECISION_FP32, from_stream ? WEIGHTS : RESIDENT, 0);
    train(src, 3, 1, r);
    if (esmt_checkpoint_save(src, run, 3, "{}", 0, ck, sizeof ck) != ESMT_OK)
      fail_msg("save: %s", esmt_last_error());
    esmt_model *dst = create(ESMT_PRECISION_FP32, from_stream ? RESIDENT : WEIGHTS, 0);
    char *json = NULL;
    if (esmt_checkpoint_load(dst, ck, 1, &json) != ESMT_OK) fail_msg("load: %s", esmt_last_error());
    free(json);
    expect_same_state(src, dst);
    esmt_update_result ra[2], rb[2];
    train(src, 2, 1, ra);
    train(dst, 2, 1, rb);
    expect_same_state(src, dst);
    esmt_model_destroy(dst);
    esmt_model_destroy(src);
  }
  test_rmtree(dir);
}

/* The device holds the end parts and two slots: what esmt_stream_sizes
 * says, far below the resident buffers for a model of many layers. */
static void test_device_bytes(void **state) {
  (void)state;
  esmt_model *m = create(ESMT_PRECISION_FP32, WEIGHTS, 0);
  const esmt_stream *s = m->mem.stream;
  const esmt_stream_bytes b = esmt_stream_sizes(WEIGHTS, m->layout.part_bounds, m->layout.n_parts, 4,
                                                m->layout.n_norm, m->d);
  const uint64_t layer = m->layout.part_bounds[2] - m->layout.part_bounds[1];
  assert_int_equal(s->slot_n, layer);
  assert_int_equal(b.device_grads, (s->first_n + s->last_n + 2 * layer) * 4);
  assert_int_equal(b.device_weights, (s->first_n + s->last_n + 2 * layer) * 4);
  assert_int_equal(b.host_extra, 2 * layer * 4);
  esmt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_micro_batch_bit_identical),
      cmocka_unit_test(test_recompute_bit_identical),
      cmocka_unit_test(test_micro_batches_within_rounding),
      cmocka_unit_test(test_lion_bit_identical),
      cmocka_unit_test(test_bf16_bit_identical),
      cmocka_unit_test(test_fp16_bit_identical),
      cmocka_unit_test(test_nonfinite_skipped),
      cmocka_unit_test(test_public_api_path),
      cmocka_unit_test(test_checkpoint_cross),
      cmocka_unit_test(test_device_bytes),
  };
  return cmocka_run_group_tests(tests, fixture_group_setup, fixture_group_teardown);
}
