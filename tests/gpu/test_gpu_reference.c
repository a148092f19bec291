/* SPDX-License-Identifier: MIT */
/* A full training step on a GPU backend against the float64 PyTorch
 * reference fixtures (issues #7 and #8, item 5), in every precision the
 * backend offers, and Inf/NaN injected into the gradients under dynamic
 * loss scaling: the update is skipped, the scale backs off, training
 * recovers.
 *
 * For each fixture (tests/reference/fixtures: a 2-layer hd 16 and a hd 64
 * model with real-protein-like batches) and precision: the fixture's
 * weights go into the model, one forward (loss, logits at real positions),
 * backward (every parameter gradient) and one AdamW step (every weight),
 * each compared with the float64 reference by relative L2 error. The
 * tolerances (below) are those of the dtype: fp32 runs TF32 GEMMs on the
 * GPU; bf16 keeps 8 mantissa bits, fp16 11. The post-step weights are
 * compared over all parameters at once: AdamW's first step is about
 * lr * sign(g), so a tensor whose true gradient is 0 (the attention key
 * bias: softmax ignores a shift of every score) moves by rounding noise
 * times lr, a large error relative to that tensor alone.
 *
 * $ESMT_REF_BACKEND names the backend (default: ampere_bf16, else
 * turing_fp16; exit 77 "SKIP" when neither can run here). `cpu` runs the
 * same checks on the CPU backend in CI (it computes fp16/bf16 activations
 * too), which keeps this harness honest without a GPU. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "mem_source.h"
#include "reference_fixture.h"
#include "trainer_update.h" /* the Inf/NaN injection hook */

static esmt_context *g_ctx;
static const char *g_backend;

typedef struct precision_case {
  esmt_precision precision;
  const char *name;
  double loss, logits, grads, step; /* relative-error bounds */
} precision_case;

static const precision_case k_cases[] = {
    {ESMT_PRECISION_FP32, "fp32", 2e-3, 5e-3, 2e-2, 1e-3},
    {ESMT_PRECISION_BF16, "bf16", 2e-2, 3e-2, 8e-2, 5e-3},
    {ESMT_PRECISION_FP16, "fp16", 5e-3, 1e-2, 3e-2, 2e-3},
};

static esmt_context *open_backend(const char *name) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = name;
  o.num_threads = 2;
  o.log_level = ESMT_LOG_WARN;
  esmt_context *ctx = NULL;
  return esmt_context_create(&o, &ctx) == ESMT_OK ? ctx : NULL;
}

static int setup(void **state) {
  (void)state;
  const char *want = getenv("ESMT_REF_BACKEND");
  const char *tries[] = {want && *want ? want : "ampere_bf16", want && *want ? NULL : "turing_fp16"};
  for (int i = 0; i < 2 && tries[i] && !g_ctx; i++) {
    g_ctx = open_backend(tries[i]);
    if (g_ctx) g_backend = tries[i];
    else print_message("backend %s: %s\n", tries[i], esmt_last_error());
  }
  return g_ctx ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  esmt_context_destroy(g_ctx);
  return 0;
}

/* Relative L2 error of every parameter at once against "<prefix><name>". */
static double global_rel(esmt_model *m, const fixture *fx, const char *prefix) {
  int n = 0;
  double num = 0, den = 0;
  assert_int_equal(esmt_model_tensor_count(m, &n), ESMT_OK);
  for (int i = 0; i < n; i++) {
    esmt_tensor_info ti = {.struct_size = sizeof ti};
    assert_int_equal(esmt_model_tensor_info(m, i, &ti), ESMT_OK);
    char key[160];
    snprintf(key, sizeof key, "%s%s", prefix, ti.name);
    float *ours = malloc(ti.numel * sizeof *ours);
    double *ref = malloc(ti.numel * sizeof *ref);
    assert_non_null(ours);
    assert_non_null(ref);
    assert_int_equal(esmt_model_read_tensor(m, ti.name, ESMT_BUF_PARAMS, ours, ti.numel), ESMT_OK);
    esmt_st_to_f64(need(fx, key), ref);
    for (uint64_t k = 0; k < ti.numel; k++) {
      num += ((double)ours[k] - ref[k]) * ((double)ours[k] - ref[k]);
      den += ref[k] * ref[k];
    }
    free(ours);
    free(ref);
  }
  return sqrt(num / den);
}

/* The model in this precision, or NULL when the backend does not offer it. */
static esmt_model *model_in(esmt_model_config cfg, const precision_case *pc, uint64_t seed) {
  cfg.precision = pc->precision;
  esmt_model *m = NULL;
  esmt_status st = esmt_model_create(g_ctx, &cfg, seed, &m);
  if (st == ESMT_ERR_UNSUPPORTED) {
    print_message("%s %s: not offered (%s)\n", g_backend, pc->name, esmt_last_error());
    return NULL;
  }
  if (st != ESMT_OK) fail_msg("%s", esmt_last_error());
  return m;
}

/* Relative L2 error of logits at the real positions of a right-padded
 * batch against a reference [B*T*V] (float or double through `ref_d`). */
static double logits_rel(const int32_t *tok, uint64_t N, const float *a, const float *ref_f,
                         const double *ref_d) {
  double num = 0, den = 0;
  for (uint64_t i = 0; i < N; i++) {
    if (tok[i] == ESMT_TOKEN_PAD) continue;
    for (uint64_t v = 0; v < ESMT_VOCAB_SIZE; v++) {
      const double r = ref_d ? ref_d[i * ESMT_VOCAB_SIZE + v] : ref_f[i * ESMT_VOCAB_SIZE + v];
      num += (a[i * ESMT_VOCAB_SIZE + v] - r) * (a[i * ESMT_VOCAB_SIZE + v] - r);
      den += r * r;
    }
  }
  return sqrt(num / den);
}

static void run_fixture(const char *name, const precision_case *pc) {
  fixture fx;
  load_fixture(name, &fx);
  esmt_model *m = model_in(fx.cfg, pc, 1);
  if (!m) {
    esmt_st_close(&fx.file);
    return;
  }
  load_weights(m, &fx);
  int32_t *tokens = load_i32(&fx, "tokens"), *labels = load_i32(&fx, "labels");
  const uint64_t N = (uint64_t)fx.B * fx.T, V = ESMT_VOCAB_SIZE;
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = fx.B;
  b.seq_len = fx.T;
  b.tokens = tokens;
  b.labels = labels;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  float *logits = malloc(N * V * sizeof *logits);
  double *ref_logits = malloc(N * V * sizeof *ref_logits);
  assert_non_null(logits);
  assert_non_null(ref_logits);
  assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
  if (esmt_model_forward(m, &b, &r, logits) != ESMT_OK) fail_msg("%s", esmt_last_error());
  double ref_loss;
  esmt_st_to_f64(need(&fx, "loss"), &ref_loss);
  esmt_st_to_f64(need(&fx, "logits"), ref_logits);
  const double loss_err = fabs(r.loss - ref_loss) / fabs(ref_loss);
  const double logit_err = logits_rel(tokens, N, logits, NULL, ref_logits);
  if (esmt_model_backward(m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  const double g = compare_all(m, &fx, ESMT_BUF_GRADS, "grad.", pc->grads, "gradient");
  esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
  double ac_lr = fx.lr; /* the learning rate is the step's argument */
  ac.beta1 = fx.beta1;
  ac.beta2 = fx.beta2;
  ac.eps = fx.eps;
  ac.weight_decay = fx.wd;
  if (esmt_model_optimizer_step(m, &ac, ac_lr, 1.0, 1) != ESMT_OK) fail_msg("%s", esmt_last_error());
  const double s = global_rel(m, &fx, "step1.");
  printf("RESULT reference %s %s %s: loss %.6f (ref %.6f) rel %.2e, logits %.2e, worst gradient "
         "%.2e, post-step weights %.2e (bounds %.0e %.0e %.0e %.0e)\n",
         g_backend, pc->name, name, r.loss, ref_loss, loss_err, logit_err, g, s, pc->loss,
         pc->logits, pc->grads, pc->step);
  fflush(stdout);
  assert_true(loss_err <= pc->loss);
  assert_true(logit_err <= pc->logits);
  assert_true(s <= pc->step);
  free(logits);
  free(ref_logits);
  free(tokens);
  free(labels);
  esmt_model_destroy(m);
  esmt_st_close(&fx.file);
}

static void test_fixtures(void **state) {
  (void)state;
  for (size_t p = 0; p < sizeof k_cases / sizeof k_cases[0]; p++)
    for (size_t f = 0; f < 2; f++) run_fixture(k_fixtures[f], &k_cases[p]);
}

/* esmt_model_infer on this backend (issue #19): its logits against the
 * float64 reference, equal to the training forward's on the same kernels,
 * and the same proteins packed several to a row giving the same logits. */
static void run_infer_fixture(const char *name, const precision_case *pc) {
  fixture fx;
  load_fixture(name, &fx);
  esmt_model *m = model_in(fx.cfg, pc, 1);
  if (!m) {
    esmt_st_close(&fx.file);
    return;
  }
  load_weights(m, &fx);
  int32_t *tokens = load_i32(&fx, "tokens");
  const uint64_t N = (uint64_t)fx.B * fx.T, V = ESMT_VOCAB_SIZE;
  float *fwd = malloc(N * V * sizeof *fwd), *inf = malloc(N * V * sizeof *inf);
  float *rep = malloc(2 * N * (uint64_t)fx.cfg.hidden_size * sizeof *rep);
  double *ref = malloc(N * V * sizeof *ref);
  assert_true(fwd && inf && rep && ref);
  esmt_st_to_f64(need(&fx, "logits"), ref);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = fx.B;
  b.seq_len = fx.T;
  b.tokens = tokens;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  if (esmt_model_forward(m, &b, &r, fwd) != ESMT_OK) fail_msg("%s", esmt_last_error());
  const int layers[2] = {0, -1};
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_LOGITS | ESMT_INFER_PER_TOKEN;
  q.logits = inf;
  q.per_token = rep;
  q.num_layers = 2;
  q.layers = layers;
  if (esmt_model_infer(m, &b, &q) != ESMT_OK) fail_msg("%s", esmt_last_error());
  const double vs_ref = logits_rel(tokens, N, inf, NULL, ref);
  const double vs_fwd = logits_rel(tokens, N, inf, fwd, NULL);
  /* the proteins packed into rows of max_positions, first fit in order */
  const int W = fx.cfg.max_positions;
  int32_t *ptok = malloc((size_t)fx.B * W * sizeof *ptok), start[64], len[64], rows = 0;
  assert_non_null(ptok);
  assert_true(fx.B <= 64);
  int used = W;
  for (int i = 0; i < fx.B; i++) {
    int n = 0;
    while (n < fx.T && tokens[(size_t)i * fx.T + n] != ESMT_TOKEN_PAD) n++;
    if (used + n > W) {
      for (int t = 0; t < W; t++) ptok[(size_t)rows * W + t] = ESMT_TOKEN_PAD;
      rows++;
      used = 0;
    }
    start[i] = (rows - 1) * W + used;
    len[i] = n;
    memcpy(ptok + start[i], tokens + (size_t)i * fx.T, (size_t)n * sizeof *ptok);
    used += n;
  }
  float *plog = malloc((size_t)rows * W * V * sizeof *plog), *back = malloc(N * V * sizeof *back);
  assert_true(plog && back);
  esmt_batch p = ESMT_BATCH_INIT;
  p.batch = rows;
  p.seq_len = W;
  p.tokens = ptok;
  p.num_segments = fx.B;
  p.seg_start = start;
  p.seg_len = len;
  esmt_infer_request pq = ESMT_INFER_REQUEST_INIT;
  pq.outputs = ESMT_INFER_LOGITS;
  pq.logits = plog;
  if (esmt_model_infer(m, &p, &pq) != ESMT_OK) fail_msg("%s", esmt_last_error());
  memset(back, 0, N * V * sizeof *back); /* packed logits back into the padded layout */
  for (int i = 0; i < fx.B; i++)
    memcpy(back + (size_t)i * fx.T * V, plog + (size_t)start[i] * V, (size_t)len[i] * V * sizeof *back);
  const double packed = logits_rel(tokens, N, back, inf, NULL);
  printf("RESULT infer %s %s %s: logits vs float64 %.2e, vs training forward %.2e, packed (%d "
         "proteins in %d rows) vs padded %.2e (bound %.0e)\n", g_backend, pc->name, name, vs_ref,
         vs_fwd, fx.B, rows, packed, pc->logits);
  fflush(stdout);
  assert_true(vs_ref <= pc->logits);
  assert_true(vs_fwd <= pc->logits * 0.1);
  assert_true(packed <= pc->logits);
  free(plog);
  free(back);
  free(ptok);
  free(fwd);
  free(inf);
  free(rep);
  free(ref);
  free(tokens);
  esmt_model_destroy(m);
  esmt_st_close(&fx.file);
}

static void test_infer_fixtures(void **state) {
  (void)state;
  for (size_t pi = 0; pi < sizeof k_cases / sizeof k_cases[0]; pi++)
    for (size_t f = 0; f < 2; f++) run_infer_fixture(k_fixtures[f], &k_cases[pi]);
}

/* Every weight, through the public API, into one host buffer. */
static float *weights(esmt_model *m, uint64_t *n) {
  assert_int_equal(esmt_model_param_count(m, n), ESMT_OK);
  float *w = malloc(*n * sizeof *w);
  assert_non_null(w);
  int count = 0;
  assert_int_equal(esmt_model_tensor_count(m, &count), ESMT_OK);
  for (int i = 0; i < count; i++) {
    esmt_tensor_info ti = {.struct_size = sizeof ti};
    assert_int_equal(esmt_model_tensor_info(m, i, &ti), ESMT_OK);
    assert_int_equal(esmt_model_read_tensor(m, ti.name, ESMT_BUF_PARAMS, w + ti.offset,
                                            ti.numel), ESMT_OK);
  }
  return w;
}

/* Loss scaling in each half precision: Inf (then NaN) gradients for two
 * updates with hysteresis 2 are skipped without touching the weights, the
 * scale halves once, and the next update trains with finite numbers. The
 * scale starts at 256, where this model's fp16 gradients do not overflow by
 * themselves (at 2^16 they do, which the scaler handles but would blur the
 * counts here). */
static void test_overflow_injection(void **state) {
  (void)state;
  for (size_t p = 1; p < sizeof k_cases / sizeof k_cases[0]; p++)
    for (int inf = 1; inf >= 0; inf--) {
      esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
      c.num_layers = 2; c.hidden_size = 64; c.num_heads = 4; c.max_positions = 64;
      esmt_model *m = model_in(c, &k_cases[p], 7);
      if (!m) continue;
      mem_source ms = {.rows = 2};
      esmt_batch_source src = mem_source_as_source(&ms);
      esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
      esmt_schedule o_sched = ESMT_SCHEDULE_INIT;
      o.schedule = &o_sched;
      esmt_loss_scale_config o_ls = ESMT_LOSS_SCALE_CONFIG_INIT;
      o.loss_scale = &o_ls;
      o_sched.peak_lr = 1e-3;
      o_sched.warmup_steps = 2;
      o_sched.total_steps = 20;
      o.log_every = 0;
      o_ls.enabled = 1;
      o_ls.initial = 256;
      o_ls.hysteresis = 2;
      o.nonfinite_abort = 1; /* overflows are the scaler's business, not the abort policy's */
      esmt_trainer *t = NULL;
      if (esmt_trainer_create(m, &o, &src, &t) != ESMT_OK) fail_msg("%s", esmt_last_error());
      esmt_train_metrics mt = {.struct_size = sizeof mt};
      assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK);
      assert_int_equal(mt.overflows, 0);
      uint64_t n = 0;
      float *before = weights(m, &n);
      esmt_test_inject_nan_step = 2;
      esmt_test_inject_nan_count = 2;
      esmt_test_inject_inf = inf;
      assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK); /* overflow 1: tolerated */
      assert_int_equal(mt.overflows, 1);
      assert_true(mt.loss_scale == 256);
      assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK); /* overflow 2: backs off */
      assert_int_equal(mt.overflows, 2);
      assert_int_equal(mt.skipped, 2);
      float *after = weights(m, &n);
      assert_memory_equal(before, after, n * sizeof *before);
      assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK); /* recovers */
      esmt_test_inject_nan_step = 0;
      esmt_test_inject_nan_count = 0;
      esmt_test_inject_inf = 0;
      assert_true(mt.loss_scale == 128);
      assert_int_equal(mt.skipped, 2);
      assert_true(isfinite(mt.loss) && isfinite(mt.grad_norm) && mt.grad_norm > 0);
      float *later = weights(m, &n);
      double moved = 0;
      for (uint64_t i = 0; i < n; i++) {
        assert_true(isfinite(later[i]));
        moved += fabs((double)later[i] - after[i]);
      }
      assert_true(moved > 0);
      printf("RESULT overflow %s %s %s: 2 updates skipped, scale 256 -> %.0f, then loss %.4f "
             "grad norm %.3g\n", g_backend, k_cases[p].name, inf ? "Inf" : "NaN", mt.loss_scale,
             mt.loss, mt.grad_norm);
      fflush(stdout);
      free(before);
      free(after);
      free(later);
      esmt_trainer_destroy(t);
      esmt_model_destroy(m);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixtures),
      cmocka_unit_test(test_infer_fixtures),
      cmocka_unit_test(test_overflow_injection),
  };
  if (setup(NULL) != 0) {
    printf("SKIP: no GPU backend can run here (%s)\n", esmt_last_error());
    return 77;
  }
  printf("backend %s\n", g_backend);
  return cmocka_run_group_tests(tests, NULL, teardown);
}
