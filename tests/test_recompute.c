/* SPDX-License-Identifier: MIT */
/* Activation recompute on the cpu backend: training with it gives
 * bit-identical losses, gradients, weights and moments to training without
 * it (fp32, bf16, fp16), the arena shrinks by exactly L-1 layers' sets of
 * intermediates and equals the planner's figure; offload.recompute=auto
 * follows backend.device_memory_limit; and a device memory limit that is
 * too small is a planned ESMT_ERR_OUT_OF_MEMORY with advice, never a crash. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "offload.h"
#include "trainer.h"
#include "micro_batch_fixture.h"
#include "trainer_update.h"

enum { B = 4, T = 16, LAYERS = 3, D = 32, HEADS = 4 };

static esmt_context *g_ctx;
static int setup(void **state) {
  (void)state;
  return (g_ctx = fixture_logging_context()) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  esmt_context_destroy(g_ctx);
  return 0;
}

static esmt_model_config tiny(esmt_precision p) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = LAYERS;
  c.hidden_size = D;
  c.num_heads = HEADS;
  c.max_positions = 64;
  c.precision = p;
  return c;
}

static esmt_model *create(esmt_precision p, int recompute) {
  esmt_model_config c = tiny(p);
  esmt_model *m = NULL;
  if (esmt_model_create(g_ctx, &c, 21, &m) != ESMT_OK) fail_msg("create: %s", esmt_last_error());
  assert_int_equal(esmt_model_set_recompute(m, recompute), ESMT_OK);
  int got = -1;
  assert_int_equal(esmt_model_get_recompute(m, &got), ESMT_OK);
  assert_int_equal(got, recompute);
  return m;
}

/* Micro-batch k of update u: right-padded rows, some masked positions. */
static void fill_batch(esmt_micro_batch *mb, int u, int k, int32_t *tok, int32_t *lab) {
  fill_micro_batch(mb, B, T, u, k, tok, lab);
}

/* `updates` AdamW updates of two micro-batches each, clipping engaged. */
static void train(esmt_model *m, int updates, esmt_update_result *res) {
  esmt_update_params p;
  memset(&p, 0, sizeof p);
  esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
  esmt_schedule sc = ESMT_SCHEDULE_INIT;
  sc.peak_lr = 3e-3;
  sc.warmup_steps = 2;
  sc.total_steps = 100;
  p.optimizer = ac;
  p.schedule = sc;
  p.grad_clip = 0.5;
  p.loss_scale = 1.0;
  int32_t tok[2][B * T], lab[2][B * T];
  for (int u = 1; u <= updates; u++) {
    esmt_micro_batch mbs[2];
    for (int k = 0; k < 2; k++) fill_batch(&mbs[k], u, k, tok[k], lab[k]);
    if (esmt_run_update(m, mbs, 2, &p, u, u, &res[u - 1]) != ESMT_OK)
      fail_msg("update %d: %s", u, esmt_last_error());
    assert_false(res[u - 1].skipped);
  }
}

/* The planner's activation figure for B x T in precision p. */
static uint64_t planned_activations(esmt_precision p, int recompute) {
  esmt_model_config mc = tiny(p);
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  r.model = &mc;
  r.micro_batch = B;
  r.seq_len = T;
  r.precision = p;
  r.offload_optimizer = 0;
  r.recompute = recompute;
  esmt_plan plan = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &plan), ESMT_OK);
  assert_int_equal(plan.recompute, recompute);
  return plan.device[ESMT_MEM_ACTIVATIONS];
}

/* Bytes of one layer's intermediates besides res[l], counted by hand (at
 * this shape every tensor is a multiple of the 256-byte alignment). */
static uint64_t layer_set_bytes(uint64_t es) {
  const uint64_t N = B * T, d = D, F = 4 * D;
  return es * (N * d * 7 + N * F * 2) /* ln1 qkv(3) attn ln2 res_mid; fc1_pre fc1_out */
         + 4 * (N * 4 + HEADS * N);   /* LayerNorm means/rstds; attention lse */
}

/* One forward + backward on a fresh gradient buffer: loss and gradients. */
static double grads_of(esmt_model *m, float *g) {
  int32_t tok[B * T], lab[B * T];
  esmt_micro_batch mb;
  fill_batch(&mb, 9, 1, tok, lab);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tok;
  b.labels = lab;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
  if (esmt_model_forward(m, &b, &r, NULL) != ESMT_OK || esmt_model_backward(m) != ESMT_OK)
    fail_msg("%s", esmt_last_error());
  memcpy(g, m->mem.grads, m->layout.total * sizeof(float)); /* host memory on the cpu backend */
  return r.loss;
}

static void compare(esmt_precision p) {
  esmt_model *plain = create(p, 0), *rec = create(p, 1);
  const uint64_t P = plain->layout.total;
  /* gradients of one step */
  float *ga = malloc(P * sizeof(float)), *gb = malloc(P * sizeof(float));
  assert_non_null(ga);
  assert_non_null(gb);
  double la = grads_of(plain, ga), lb = grads_of(rec, gb);
  assert_true(la == lb);
  assert_memory_equal(ga, gb, P * sizeof(float));
  free(ga);
  free(gb);
  /* several updates: losses, weights, moments, the compute copy */
  enum { U = 4 };
  esmt_update_result ra[U], rb[U];
  train(plain, U, ra);
  train(rec, U, rb);
  for (int i = 0; i < U; i++) {
    if (ra[i].loss != rb[i].loss || ra[i].grad_norm != rb[i].grad_norm)
      fail_msg("update %d: loss %.9g vs %.9g, norm %.9g vs %.9g", i + 1, ra[i].loss, rb[i].loss,
               ra[i].grad_norm, rb[i].grad_norm);
  }
  assert_true(ra[U - 1].loss < ra[0].loss);
  assert_memory_equal(plain->mem.master, rec->mem.master, P * sizeof(float));
  assert_memory_equal(plain->mem.moment1, rec->mem.moment1, P * sizeof(float));
  assert_memory_equal(plain->mem.moment2, rec->mem.moment2, P * sizeof(float));
  if (plain->mem.compute_lowp) assert_memory_equal(plain->mem.compute_lowp, rec->mem.compute_lowp, P * plain->esize);
  /* the arena: smaller by L-1 sets, each what the planner says */
  assert_int_equal(rec->act_recompute, 1);
  assert_int_equal(plain->act_recompute, 0);
  assert_int_equal(plain->arena_bytes - rec->arena_bytes, (LAYERS - 1) * layer_set_bytes(plain->esize));
  assert_int_equal(plain->arena_bytes, planned_activations(p, 0));
  assert_int_equal(rec->arena_bytes, planned_activations(p, 1));
  printf("  %s: arena %llu bytes, %llu with recompute\n", p == ESMT_PRECISION_FP32 ? "fp32"
         : p == ESMT_PRECISION_BF16 ? "bf16" : "fp16", (unsigned long long)plain->arena_bytes,
         (unsigned long long)rec->arena_bytes);
  esmt_model_destroy(plain);
  esmt_model_destroy(rec);
}

static void test_fp32(void **state) { (void)state; compare(ESMT_PRECISION_FP32); }
static void test_bf16(void **state) { (void)state; compare(ESMT_PRECISION_BF16); }
static void test_fp16(void **state) { (void)state; compare(ESMT_PRECISION_FP16); }

/* Switching between steps re-carves the arena and changes no result. */
static void test_toggle(void **state) {
  (void)state;
  esmt_model *a = create(ESMT_PRECISION_FP32, 0), *b = create(ESMT_PRECISION_FP32, 0);
  esmt_update_result ra[1], rb[1];
  for (int i = 0; i < 4; i++) {
    assert_int_equal(esmt_model_set_recompute(b, i % 2), ESMT_OK);
    train(a, 1, ra);
    train(b, 1, rb);
    assert_true(ra[0].loss == rb[0].loss);
    assert_int_equal(b->act_recompute, i % 2);
  }
  assert_memory_equal(a->mem.master, b->mem.master, a->layout.total * sizeof(float));
  assert_int_equal(esmt_model_set_recompute(b, 2), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_model_set_recompute(NULL, 1), ESMT_ERR_INVALID_ARGUMENT);
  esmt_model_destroy(a);
  esmt_model_destroy(b);
}

/* ---- backend.device_memory_limit reaches the backend ------------------ */

static void expect_oom_advice(esmt_status st, const char *advice) {
  assert_int_equal(st, ESMT_ERR_OUT_OF_MEMORY);
  const char *msg = esmt_last_error();
  if (!strstr(msg, "memory limit") || !strstr(msg, advice) || !strstr(msg, "device_memory_limit"))
    fail_msg("no advice '%s' in: %s", advice, msg);
  printf("  %s\n", msg);
}

/* Through the public API: the context's limit is the backend's. */
static void test_context_limit(void **state) {
  (void)state;
  esmt_model_config c = tiny(ESMT_PRECISION_FP32);
  uint64_t P = 0;
  esmt_model_config_param_count(&c, &P);
  /* what the model allocates besides the arena: params, grads, m, v, the
   * reduction scratch and the rotary tables (64 positions x hd/2, cos+sin) */
  const uint64_t weights = P * 4 * 4 + 256 + 2 * 64 * (D / HEADS / 2) * 4;
  char v[32];
  assert_int_equal(esmt_context_set_option(g_ctx, "device_memory_limit", "12x"),
                   ESMT_ERR_INVALID_ARGUMENT);
  /* too small for the weights: creation fails */
  snprintf(v, sizeof v, "%llu", (unsigned long long)(P * 4 * 2));
  assert_int_equal(esmt_context_set_option(g_ctx, "device_memory_limit", v), ESMT_OK);
  esmt_model *m = NULL;
  expect_oom_advice(esmt_model_create(g_ctx, &c, 1, &m), "offload.optimizer");
  assert_null(m);
  /* room for the weights and the recompute arena only */
  const uint64_t full = esmt_activation_bytes(&c, B, T, 4, 0);
  const uint64_t lean = esmt_activation_bytes(&c, B, T, 4, 1);
  snprintf(v, sizeof v, "%llu", (unsigned long long)(weights + (full + lean) / 2));
  assert_int_equal(esmt_context_set_option(g_ctx, "device_memory_limit", v), ESMT_OK);
  if (esmt_model_create(g_ctx, &c, 1, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  esmt_update_result r[2];
  int32_t tok[B * T], lab[B * T];
  esmt_micro_batch mb;
  fill_batch(&mb, 1, 0, tok, lab);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tok;
  b.labels = lab;
  expect_oom_advice(esmt_model_forward(m, &b, NULL, NULL), "offload.recompute");
  assert_int_equal(esmt_model_backward(m), ESMT_ERR_STATE); /* nothing half-done to run */
  assert_int_equal(esmt_model_set_recompute(m, 1), ESMT_OK);
  train(m, 2, r);
  assert_int_equal(m->arena_bytes, lean);
  esmt_model_destroy(m);
  assert_int_equal(esmt_context_set_option(g_ctx, "device_memory_limit", "0"), ESMT_OK);
  int64_t lo = 1, hi = 0;
  assert_int_equal(esmt_context_option_bounds(g_ctx, "device_memory_limit", &lo, &hi), ESMT_OK);
  assert_true(lo == 0 && hi > 0);
}


static esmt_config *config_for(const char *data, const char *offload, const char *recompute,
                               uint64_t budget, const char *rows) {
  esmt_config *cfg = NULL;
  assert_int_equal(esmt_config_create(&cfg), ESMT_OK);
  char b[32], run[700];
  snprintf(b, sizeof b, "%llu", (unsigned long long)budget);
  snprintf(run, sizeof run, "%s-run", data); /* beside the data, not in the working directory */
  const char *sets[] = {"data.train_dir", data, "train.out_dir", run, "model.num_layers", "3", "model.hidden_size", "32",
                        "model.num_heads", "4", "model.ffn_size", "128", "model.max_positions", "64",
                        "data.max_len", "64", "data.micro_batch", rows,
                        "data.tokens_per_batch", "200",
                        "train.max_steps", "3", "schedule.warmup_steps", "1",
                        "train.eval_every", "0", "train.tokens_per_update", "512",
                        "offload.optimizer", offload, "offload.recompute", recompute,
                        "backend.device_memory_limit", b};
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i += 2)
    if (esmt_config_set(cfg, sets[i], sets[i + 1]) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return cfg;
}

static uint64_t plan_total(int recompute) {
  esmt_model_config mc = tiny(ESMT_PRECISION_FP32);
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  r.model = &mc;
  r.seq_len = 64;
  r.micro_batch = 4;
  r.precision = ESMT_PRECISION_FP32;
  r.offload_optimizer = 0;
  r.recompute = recompute;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  return p.device_total;
}

/* The trainer: auto picks recompute when only it fits, the arena is the
 * planner's, training runs; a budget too small fails at creation with
 * advice; a limit the plan ignores (forced off) fails with advice too. */
static void test_trainer_budget(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  const char *data = fixture_dataset(dir);
  const uint64_t plain = plan_total(0), lean = plan_total(1);
  assert_true(lean < plain);
  esmt_model_config c = tiny(ESMT_PRECISION_FP32);
  struct { const char *off, *rec; uint64_t budget; int ok, want_rec; const char *rows; } cases[] = {
      {"auto", "auto", plain, 1, 0, "4"},
      {"auto", "auto", plain - 1, 1, 1, "4"},   /* only recompute fits: chosen */
      {"off", "auto", lean, 1, 1, "4"},
      /* greedy batches of up to 200 tokens in any shape (9 x 22 ... 3 x 61):
       * planned as ceil(200 / 64) = 4 rows of 64, the arena never grows */
      {"off", "auto", lean, 1, 1, "0"},
      {"auto", "auto", 1 << 20, 0, 1, "4"},     /* nothing fits: the smallest plan fails with advice */
      {"off", "off", 1 << 20, 0, 0, "4"},       /* forced: the arena does not fit */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    g_log[0] = '\0';
    esmt_config *cfg = config_for(data, cases[i].off, cases[i].rec, cases[i].budget, cases[i].rows);
    char run[600]; /* a new run each: a run directory is never trained over */
    snprintf(run, sizeof run, "%s-run-%zu", data, i);
    assert_int_equal(esmt_config_set(cfg, "train.out_dir", run), ESMT_OK);
    esmt_trainer *t = NULL;
    esmt_status st = esmt_trainer_create_from_config(g_ctx, cfg, NULL, &t);
    if (!cases[i].ok) {
      expect_oom_advice(st, "micro-batch");
      /* recompute is advised only when it is off */
      assert_int_equal(strstr(esmt_last_error(), "offload.recompute: on") == NULL, cases[i].want_rec);
      assert_null(t);
    } else {
      if (st != ESMT_OK) fail_msg("case %zu: %s", i, esmt_last_error());
      if (t->m->recompute != cases[i].want_rec)
        fail_msg("case %zu: recompute %d; log:\n%s", i, t->m->recompute, g_log);
      assert_int_equal(t->m->arena_bytes, esmt_activation_bytes(&c, 4, 64, 4, cases[i].want_rec));
      if (esmt_trainer_run(t) != ESMT_OK) fail_msg("case %zu: run: %s", i, esmt_last_error());
      assert_int_equal(esmt_trainer_step_count(t), 3);
      assert_int_equal(t->m->arena_bytes, esmt_activation_bytes(&c, 4, 64, 4, cases[i].want_rec));
    }
    esmt_trainer_destroy(t);
    esmt_config_destroy(cfg);
  }
  test_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp32),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_fp16),
      cmocka_unit_test(test_toggle),
      cmocka_unit_test(test_context_limit),
      cmocka_unit_test(test_trainer_budget),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
