/* SPDX-License-Identifier: MIT */
/* The CPU backend's ESM-2 against the float64 PyTorch reference fixtures
 * (tests/reference/make_fixtures.py): logits and loss, every parameter
 * gradient, and the weights after one AdamW step. Plus the no-selection
 * batch, determinism and API misuse. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "reference_fixture.h"

static esmt_context *make_ctx(int threads) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = threads;
  o.log_level = ESMT_LOG_WARN;
  esmt_context *ctx = NULL;
  if (esmt_context_create(&o, &ctx) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return ctx;
}

static void run_fixture(const char *name) {
  fixture fx;
  load_fixture(name, &fx);
  esmt_context *ctx = make_ctx(2);
  esmt_model *m = NULL;
  if (esmt_model_create(ctx, &fx.cfg, 1, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  load_weights(m, &fx);
  int32_t *tokens = load_i32(&fx, "tokens"), *labels = load_i32(&fx, "labels");
  const uint64_t N = (uint64_t)fx.B * fx.T, V = ESMT_VOCAB_SIZE;

  /* Forward: loss and logits at real (non-pad) positions. */
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = fx.B;
  b.seq_len = fx.T;
  b.tokens = tokens;
  b.labels = labels;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  float *logits = malloc(N * V * sizeof *logits);
  assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
  if (esmt_model_forward(m, &b, &r, logits) != ESMT_OK) fail_msg("%s", esmt_last_error());
  double ref_loss;
  esmt_st_to_f64(need(&fx, "loss"), &ref_loss);
  double loss_err = fabs(r.loss - ref_loss) / fabs(ref_loss);
  double *ref_logits = malloc(N * V * sizeof *ref_logits);
  esmt_st_to_f64(need(&fx, "logits"), ref_logits);
  double num = 0, den = 0;
  for (uint64_t i = 0; i < N; i++) {
    if (tokens[i] == ESMT_TOKEN_PAD) continue;
    for (uint64_t v = 0; v < V; v++) {
      double d = logits[i * V + v] - ref_logits[i * V + v];
      num += d * d;
      den += ref_logits[i * V + v] * ref_logits[i * V + v];
    }
  }
  double logit_err = sqrt(num / den);
  print_message("%s: loss %.8f (ref %.8f, rel err %.2e), logits rel err %.2e, %llu selected\n",
                name, r.loss, ref_loss, loss_err, logit_err, (unsigned long long)r.selected);
  assert_true(loss_err <= 1e-4);
  assert_true(logit_err <= 1e-4);

  /* Backward: every parameter gradient. */
  if (esmt_model_backward(m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  double gworst = compare_all(m, &fx, ESMT_BUF_GRADS, "grad.", 1e-3, "gradient");

  /* One AdamW step on every parameter. */
  esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
  double ac_lr = fx.lr; /* the learning rate is the step's argument */
  ac.beta1 = fx.beta1;
  ac.beta2 = fx.beta2;
  ac.eps = fx.eps;
  ac.weight_decay = fx.wd;
  if (esmt_model_optimizer_step(m, &ac, ac_lr, 1.0, 1) != ESMT_OK) fail_msg("%s", esmt_last_error());
  double sworst = compare_all(m, &fx, ESMT_BUF_PARAMS, "step1.", 1e-3, "post-step weight");
  print_message("%s: worst gradient rel err %.2e, worst post-step weight rel err %.2e\n", name,
                gworst, sworst);

  free(logits);
  free(ref_logits);
  free(tokens);
  free(labels);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  esmt_st_close(&fx.file);
}

static void test_fixture_tiny_hd16(void **state) { (void)state; run_fixture(k_fixtures[0]); }
static void test_fixture_small_hd64(void **state) { (void)state; run_fixture(k_fixtures[1]); }

/* Lion's weights after step k against the float64 reference, element by
 * element. Where the reference's interpolation c is within 1e-5 of its
 * tensor's RMS from zero, fp32 gradients may honestly take the other sign
 * (a 2*lr difference): such elements are set aside in `skip` (kept across
 * steps, their weights differ from then on) and counted; all the others
 * must agree to fp32 rounding. Returns the worst relative difference. */
static double lion_compare(esmt_model *m, const fixture *fx, int k, unsigned char **skip,
                           uint64_t *n_skipped, uint64_t *n_total) {
  int n = 0;
  double worst = 0;
  esmt_model_tensor_count(m, &n);
  for (int i = 0; i < n; i++) {
    esmt_tensor_info ti = {.struct_size = sizeof ti};
    esmt_model_tensor_info(m, i, &ti);
    char key[160];
    float *ours = malloc(ti.numel * sizeof *ours);
    double *ref = malloc(ti.numel * sizeof *ref), *c = malloc(ti.numel * sizeof *c);
    assert_int_equal(esmt_model_read_tensor(m, ti.name, ESMT_BUF_PARAMS, ours, ti.numel), ESMT_OK);
    snprintf(key, sizeof key, "step%d.%s", k, ti.name);
    esmt_st_to_f64(need(fx, key), ref);
    snprintf(key, sizeof key, "c%d.%s", k, ti.name);
    esmt_st_to_f64(need(fx, key), c);
    if (!skip[i]) skip[i] = calloc(ti.numel, 1);
    double rms = 0;
    for (uint64_t j = 0; j < ti.numel; j++) rms += c[j] * c[j];
    rms = sqrt(rms / (double)ti.numel);
    for (uint64_t j = 0; j < ti.numel; j++) {
      if (fabs(c[j]) <= 1e-5 * rms && c[j] != 0) skip[i][j] = 1; /* c == 0: sign 0 both sides */
      if (skip[i][j]) continue;
      double d = fabs(ours[j] - ref[j]) / (fabs(ref[j]) + 1e-2);
      if (d > worst) worst = d;
      if (!(d <= 1e-5))
        fail_msg("Lion step %d %s[%llu]: %.9g, reference %.9g (c %.3g)", k, ti.name,
                 (unsigned long long)j, (double)ours[j], ref[j], c[j]);
    }
    if (k == 2)
      for (uint64_t j = 0; j < ti.numel; j++) *n_skipped += skip[i][j];
    if (k == 2) *n_total += ti.numel;
    free(ours);
    free(ref);
    free(c);
  }
  return worst;
}

/* Two Lion steps of tiny_hd16 against lion_pytorch in float64
 * (tests/reference/make_lion_fixture.py): loss and gradients at each step,
 * the weights after each, the moment after the second. */
static void test_lion_fixture(void **state) {
  (void)state;
  fixture fx;
  load_fixture("tiny_hd16_lion", &fx);
  assert_true(fx.lion);
  esmt_context *ctx = make_ctx(2);
  esmt_model_config cfg = fx.cfg;
  cfg.optimizer = ESMT_OPTIMIZER_LION;
  esmt_model *m = NULL;
  if (esmt_model_create(ctx, &cfg, 1, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  load_weights(m, &fx);
  int32_t *tokens = load_i32(&fx, "tokens"), *labels = load_i32(&fx, "labels");
  esmt_optimizer_config oc = ESMT_OPTIMIZER_CONFIG_INIT;
  assert_int_equal(esmt_optimizer_config_init(ESMT_OPTIMIZER_LION, &oc), ESMT_OK);
  assert_true(oc.beta2 == 0.99 && oc.weight_decay == 0.1); /* the paper's defaults */
  oc.beta1 = fx.beta1;
  oc.beta2 = fx.beta2;
  oc.weight_decay = fx.wd;
  int nt = 0;
  esmt_model_tensor_count(m, &nt);
  unsigned char **skip = calloc((size_t)nt, sizeof *skip);
  uint64_t skipped = 0, total = 0;
  for (int k = 1; k <= 2; k++) {
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = fx.B;
    b.seq_len = fx.T;
    b.tokens = tokens;
    b.labels = labels;
    esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
    assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
    if (esmt_model_forward(m, &b, &r, NULL) != ESMT_OK) fail_msg("%s", esmt_last_error());
    char key[32];
    double ref_loss;
    snprintf(key, sizeof key, "loss%d", k);
    esmt_st_to_f64(need(&fx, key), &ref_loss);
    if (esmt_model_backward(m) != ESMT_OK) fail_msg("%s", esmt_last_error());
    snprintf(key, sizeof key, "grad%d.", k);
    double gworst = compare_all(m, &fx, ESMT_BUF_GRADS, key, 1e-3, "Lion-run gradient");
    if (esmt_model_optimizer_step(m, &oc, fx.lr, 1.0, k) != ESMT_OK)
      fail_msg("%s", esmt_last_error());
    double wworst = lion_compare(m, &fx, k, skip, &skipped, &total);
    print_message("lion step %d: loss %.8f (ref %.8f), worst gradient rel err %.2e, worst "
                  "weight rel diff %.2e\n", k, r.loss, ref_loss, gworst, wworst);
    assert_true(fabs(r.loss - ref_loss) <= 1e-4 * fabs(ref_loss));
  }
  double mworst = compare_all(m, &fx, ESMT_BUF_ADAM_M, "m2.", 1e-3, "Lion moment");
  print_message("lion: moment rel err %.2e; %llu of %llu weights set aside (reference |c| "
                "within 1e-5 RMS of 0)\n", mworst, (unsigned long long)skipped,
                (unsigned long long)total);
  assert_true(skipped * 1000 <= total); /* at most 0.1% */
  /* Lion keeps no second moment: asking for AdamW's is an error, not garbage */
  float one;
  assert_int_equal(esmt_model_read_tensor(m, "lm_head.bias", ESMT_BUF_ADAM_V, &one, 1),
                   ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "no second moment"));
  /* and an AdamW step on a Lion model is refused */
  esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
  assert_int_equal(esmt_model_optimizer_step(m, &ac, 1e-3, 1.0, 3), ESMT_ERR_STATE);
  for (int i = 0; i < nt; i++) free(skip[i]);
  free(skip);
  free(tokens);
  free(labels);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  esmt_st_close(&fx.file);
}

/* A small random model and batch for the tests below. */
static esmt_model *small_model(esmt_context *ctx) {
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  cfg.num_layers = 2;
  cfg.hidden_size = 32;
  cfg.num_heads = 2;
  cfg.max_positions = 64;
  esmt_model *m = NULL;
  if (esmt_model_create(ctx, &cfg, 42, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return m;
}

static void fill_batch(int32_t *tok, int32_t *lab, int B, int T, int with_labels) {
  uint64_t s = 12345;
  for (int b = 0; b < B; b++) {
    int len = T - 3 * b;
    for (int t = 0; t < T; t++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      int32_t id = t == 0 ? ESMT_TOKEN_CLS : t == len - 1 ? ESMT_TOKEN_EOS
                 : t >= len ? ESMT_TOKEN_PAD : (int32_t)(4 + (s >> 33) % 20);
      tok[b * T + t] = id;
      lab[b * T + t] = ESMT_LABEL_IGNORE;
      if (with_labels && t > 0 && t < len - 1 && (s >> 40) % 5 == 0) {
        lab[b * T + t] = id;
        tok[b * T + t] = ESMT_TOKEN_MASK;
      }
    }
  }
}

static void test_no_selected_positions(void **state) {
  (void)state;
  esmt_context *ctx = make_ctx(2);
  esmt_model *m = small_model(ctx);
  enum { B = 3, T = 16 };
  int32_t tok[B * T], lab[B * T];
  fill_batch(tok, lab, B, T, 0);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B; b.seq_len = T; b.tokens = tok; b.labels = lab;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
  assert_int_equal(esmt_model_forward(m, &b, &r, NULL), ESMT_OK);
  assert_int_equal(r.selected, 0);
  assert_true(r.loss == 0.0);
  assert_int_equal(esmt_model_backward(m), ESMT_OK);
  double norm = -1;
  assert_int_equal(esmt_model_grad_norm(m, &norm), ESMT_OK);
  assert_true(norm == 0.0); /* exactly zero, and not NaN */
  /* labels == NULL behaves the same */
  b.labels = NULL;
  assert_int_equal(esmt_model_forward(m, &b, &r, NULL), ESMT_OK);
  assert_true(r.loss == 0.0);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

static void grads_after_step(int threads, float *out, uint64_t n) {
  esmt_context *ctx = make_ctx(threads);
  esmt_model *m = small_model(ctx);
  enum { B = 3, T = 16 };
  int32_t tok[B * T], lab[B * T];
  fill_batch(tok, lab, B, T, 1);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B; b.seq_len = T; b.tokens = tok; b.labels = lab;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  assert_int_equal(esmt_model_forward(m, &b, &r, NULL), ESMT_OK);
  assert_true(r.selected > 0);
  assert_true(isfinite(r.loss) && r.loss > 0);
  assert_int_equal(esmt_model_backward(m), ESMT_OK);
  uint64_t total = 0;
  esmt_model_param_count(m, &total);
  assert_int_equal(total, n);
  int count = 0;
  esmt_model_tensor_count(m, &count);
  for (int i = 0; i < count; i++) {
    esmt_tensor_info ti = {.struct_size = sizeof ti};
    esmt_model_tensor_info(m, i, &ti);
    assert_int_equal(esmt_model_read_tensor(m, ti.name, ESMT_BUF_GRADS, out + ti.offset, ti.numel),
                     ESMT_OK);
  }
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

static void test_determinism(void **state) {
  (void)state;
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  cfg.num_layers = 2; cfg.hidden_size = 32; cfg.num_heads = 2; cfg.max_positions = 64;
  uint64_t n = 0;
  assert_int_equal(esmt_model_config_param_count(&cfg, &n), ESMT_OK);
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  grads_after_step(2, a, n);
  grads_after_step(2, b, n);
  assert_memory_equal(a, b, n * sizeof *a); /* same seed, same threads: same bits */
  free(a);
  free(b);
}

static void test_misuse(void **state) {
  (void)state;
  esmt_context *ctx = make_ctx(1);
  esmt_model *m = small_model(ctx);
  assert_int_equal(esmt_model_backward(m), ESMT_ERR_STATE);
  int32_t tok[8] = {0, 5, 6, ESMT_TOKEN_PAD, 7, 2, 1, 1}; /* token after padding */
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = 1; b.seq_len = 8; b.tokens = tok;
  assert_int_equal(esmt_model_forward(m, &b, NULL, NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "right-padded"));
  tok[3] = 99;
  assert_int_equal(esmt_model_forward(m, &b, NULL, NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "token id 99"));
  b.seq_len = 65;
  assert_int_equal(esmt_model_forward(m, &b, NULL, NULL), ESMT_ERR_INVALID_ARGUMENT);
  b.struct_size = 4;
  assert_int_equal(esmt_model_forward(m, &b, NULL, NULL), ESMT_ERR_ABI);
  float x[4];
  assert_int_equal(esmt_model_read_tensor(m, "no.such.tensor", ESMT_BUF_PARAMS, x, 4),
                   ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "no.such.tensor"));
  assert_int_equal(esmt_model_read_tensor(m, "lm_head.bias", ESMT_BUF_PARAMS, x, 4),
                   ESMT_ERR_INVALID_ARGUMENT);
  int idx = -1;
  assert_int_equal(esmt_model_find_tensor(m, "lm_head.decoder.weight", &idx), ESMT_OK);
  assert_int_equal(idx, 0);
  esmt_model_config bad = ESMT_MODEL_CONFIG_INIT;
  bad.hidden_size = 30; bad.num_heads = 4;
  esmt_model *m2 = (esmt_model *)0x1;
  assert_int_equal(esmt_model_create(ctx, &bad, 0, &m2), ESMT_ERR_CONFIG);
  assert_null(m2);
  assert_non_null(strstr(esmt_last_error(), "divisible"));
  assert_int_equal(esmt_model_config_preset("esm2_t6_8m", &bad), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "esm2_t6_8M"));
  esmt_model_destroy(NULL);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

static void test_presets_param_counts(void **state) {
  (void)state;
  /* Parameter counts of the published models (tied decoder counted once,
   * contact head and unused position embeddings excluded). */
  struct { const char *name; double millions; } p[] = {
      {"esm2_t6_8M", 7.5}, {"esm2_t12_35M", 33.5}, {"esm2_t30_150M", 148},
      {"esm2_t33_650M", 651}, {"esm2_t36_3B", 2838}, {"esm2_t48_15B", 15000}};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
    esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
    assert_int_equal(esmt_model_config_preset(p[i].name, &c), ESMT_OK);
    uint64_t n = 0;
    assert_int_equal(esmt_model_config_param_count(&c, &n), ESMT_OK);
    double rel = fabs((double)n / 1e6 - p[i].millions) / p[i].millions;
    print_message("%s: %.2fM parameters\n", p[i].name, (double)n / 1e6);
    assert_true(rel < 0.02);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_presets_param_counts),
      cmocka_unit_test(test_fixture_tiny_hd16),
      cmocka_unit_test(test_fixture_small_hd64),
      cmocka_unit_test(test_lion_fixture),
      cmocka_unit_test(test_no_selected_positions),
      cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_misuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
