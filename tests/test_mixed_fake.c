/* SPDX-License-Identifier: MIT */
/* The core's half-precision paths without a half-capable backend: host
 * fp16/bf16 conversions, precision choice and refusal by caps, the
 * older esmt_model_config size, and - through half_emu_backend (the cpu ops
 * with F16/BF16 emulated) - every op's pointers, sizes and dtypes, the
 * params_lowp refreshes, the planner's half numbers against the real
 * arena, and bf16/fp16 training against fp32. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "half_emu_backend.h"
#include "mixed_compare.h"
#include "model.h"
#include "trainer.h"

static esmt_context *g_ctx;
static const esmt_backend_entry *g_real;
static esmt_backend_entry g_fake;

static int setup(void **state) {
  (void)state;
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 2;
  if (esmt_context_create(&o, &g_ctx) != ESMT_OK) return -1;
  g_real = g_ctx->backend;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  g_ctx->backend = g_real;
  esmt_context_destroy(g_ctx);
  return 0;
}

static void use_fake(uint32_t caps) {
  g_fake = *g_real;
  g_fake.ops = half_emu_ops(g_real->ops, caps);
  g_ctx->backend = &g_fake;
}
static void use_real(void) { g_ctx->backend = g_real; }

static esmt_model *create(esmt_precision p) {
  esmt_model_config c = mixed_tiny_config(p);
  esmt_model *m = NULL;
  if (esmt_model_create(g_ctx, &c, 7, &m) != ESMT_OK) fail_msg("create: %s", esmt_last_error());
  return m;
}

/* ---- host conversions ---------------------------------------------------- */

static float bits_f(uint32_t x) { float f; memcpy(&f, &x, sizeof f); return f; }

static void test_host_conversions(void **state) {
  (void)state;
  assert_int_equal(esmt_f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(esmt_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie: to even */
  assert_int_equal(esmt_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie: to even */
  assert_int_equal(esmt_f32_to_bf16(-2.0f), 0xc000);
  assert_true(isnan(esmt_bf16_to_f32(esmt_f32_to_bf16(NAN))));
  assert_int_equal(esmt_f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(esmt_f32_to_f16(65519.0f), 0x7bff);
  assert_int_equal(esmt_f32_to_f16(65520.0f), 0x7c00);  /* rounds to inf */
  assert_int_equal(esmt_f32_to_f16(0x1p-24f), 0x0001);  /* smallest subnormal */
  assert_int_equal(esmt_f32_to_f16(0x1p-25f), 0x0000);  /* tie: to even (0) */
  assert_int_equal(esmt_f32_to_f16(3 * 0x1p-25f), 0x0002);
  assert_int_equal(esmt_f32_to_f16(0x1p-14f), 0x0400);  /* smallest normal */
  assert_int_equal(esmt_f32_to_f16(-0.0f), 0x8000);
  assert_int_equal(esmt_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  assert_int_equal(esmt_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  assert_true(isnan(esmt_f16_to_f32(esmt_f32_to_f16(NAN))));
  /* every finite half value survives the round trip */
  for (uint32_t h = 0; h < 65536; h++) {
    float b = esmt_bf16_to_f32((uint16_t)h), f = esmt_f16_to_f32((uint16_t)h);
    if (!isnan(b)) assert_int_equal(esmt_f32_to_bf16(b), h);
    if (!isnan(f)) assert_int_equal(esmt_f32_to_f16(f), h);
  }
  /* and the core rounds as the cpu backend's convert op does */
  const esmtb_ops *ops = g_real->ops;
  esmtb_open_options oo = {sizeof oo, 0, 1, 0};
  esmtb_device *dev = NULL;
  assert_int_equal(ops->open(&oo, &dev), 0);
  enum { n = 1 << 18 };
  uint32_t *x = malloc(n * sizeof *x);
  uint16_t *h = malloc(n * sizeof *h);
  uint32_t s = 99;
  for (int i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (i & 1) ? s : (s & 0x8fffffffu) | 0x30000000u; /* half: near the f16 range */
  }
  for (int t = 0; t < 2; t++) {
    esmtb_dtype dt = t ? ESMTB_BF16 : ESMTB_F16;
    esmtb_convert_args c = {sizeof c, n, x, ESMTB_F32, h, dt};
    assert_int_equal(ops->convert(dev, &c, NULL), 0);
    for (int i = 0; i < n; i++) {
      float f = bits_f(x[i]);
      if (isnan(f)) continue;
      uint16_t mine = t ? esmt_f32_to_bf16(f) : esmt_f32_to_f16(f);
      if (mine != h[i]) fail_msg("%s(%a): core 0x%04x, cpu 0x%04x", t ? "bf16" : "f16",
                                 (double)f, mine, h[i]);
    }
  }
  free(x);
  free(h);
  ops->close(dev);
}

/* ---- choosing and refusing a precision ---------------------------------- */

static esmtb_status stub_convert(esmtb_device *d, const esmtb_convert_args *a, esmtb_stream *s) {
  (void)d; (void)a; (void)s;
  return 0;
}

static void expect_refusal(const esmtb_ops *o, int p, const char *fragment) {
  esmtb_dtype t;
  assert_int_equal(esmt_resolve_precision(o, p, &t), ESMT_ERR_UNSUPPORTED);
  if (!strstr(esmt_last_error(), fragment))
    fail_msg("message '%s' lacks '%s'", esmt_last_error(), fragment);
}

static void test_resolve_precision(void **state) {
  (void)state;
  esmtb_ops o = {0};
  o.abi_major = ESMTB_ABI_MAJOR;
  o.name = "stub";
  o.convert = stub_convert;
  esmtb_dtype t;
  o.caps = ESMTB_CAP_HOST_ADDRESSABLE | ESMTB_CAP_F32;
  assert_int_equal(esmt_resolve_precision(&o, ESMT_PRECISION_AUTO, &t), ESMT_OK);
  assert_int_equal(t, ESMTB_F32);
  expect_refusal(&o, ESMT_PRECISION_BF16, "backend stub cannot compute in bf16 (caps: fp32)");
  expect_refusal(&o, ESMT_PRECISION_FP16, "backend stub cannot compute in fp16 (caps: fp32)");
  o.caps = ESMTB_CAP_F32 | ESMTB_CAP_F16;
  assert_int_equal(esmt_resolve_precision(&o, ESMT_PRECISION_AUTO, &t), ESMT_OK);
  assert_int_equal(t, ESMTB_F16);
  expect_refusal(&o, ESMT_PRECISION_BF16, "(caps: fp32, fp16)");
  o.caps = ESMTB_CAP_F32 | ESMTB_CAP_F16 | ESMTB_CAP_BF16;
  assert_int_equal(esmt_resolve_precision(&o, ESMT_PRECISION_AUTO, &t), ESMT_OK);
  assert_int_equal(t, ESMTB_BF16);
  assert_int_equal(esmt_resolve_precision(&o, ESMT_PRECISION_FP32, &t), ESMT_OK);
  assert_int_equal(t, ESMTB_F32);
  /* a host-memory (CPU) backend's best stays fp32 even with half caps */
  o.caps |= ESMTB_CAP_HOST_ADDRESSABLE;
  assert_int_equal(esmt_resolve_precision(&o, ESMT_PRECISION_AUTO, &t), ESMT_OK);
  assert_int_equal(t, ESMTB_F32);
  assert_int_equal(esmt_resolve_precision(&o, ESMT_PRECISION_BF16, &t), ESMT_OK);
  assert_int_equal(t, ESMTB_BF16);
  o.convert = NULL;
  expect_refusal(&o, ESMT_PRECISION_BF16, "no convert op");
  assert_int_equal(esmt_resolve_precision(&o, 7, &t), ESMT_ERR_CONFIG);
}

static void test_cpu_model_precision(void **state) {
  (void)state;
  use_real();
  esmt_model_config c = mixed_tiny_config(ESMT_PRECISION_BF16), got = ESMT_MODEL_CONFIG_INIT;
  esmt_model *m = NULL;
  if (!(g_real->ops->caps & ESMTB_CAP_BF16)) { /* until the cpu backend computes in bf16 */
    assert_int_equal(esmt_model_create(g_ctx, &c, 1, &m), ESMT_ERR_UNSUPPORTED);
    assert_non_null(strstr(esmt_last_error(), "backend cpu cannot compute in bf16 (caps: fp32)"));
    assert_null(m);
  }
  /* AUTO on the cpu is fp32, reported resolved; so is an older struct */
  c.precision = ESMT_PRECISION_AUTO;
  for (int old = 0; old < 2; old++) {
    if (old) c.struct_size = (uint32_t)offsetof(esmt_model_config, precision);
    assert_int_equal(esmt_model_create(g_ctx, &c, 1, &m), ESMT_OK);
    assert_int_equal(m->dtype, ESMTB_F32);
    assert_null(m->mem.compute_lowp);
    assert_int_equal(esmt_model_get_config(m, &got), ESMT_OK);
    assert_int_equal(got.precision, ESMT_PRECISION_FP32);
    esmt_model_destroy(m);
  }
  c.struct_size = (uint32_t)offsetof(esmt_model_config, precision) - 4;
  assert_int_equal(esmt_model_create(g_ctx, &c, 1, &m), ESMT_ERR_ABI);
  esmt_model_config old = ESMT_MODEL_CONFIG_INIT;
  old.struct_size = (uint32_t)offsetof(esmt_model_config, precision);
  old.precision = ESMT_PRECISION_BF16; /* past its size: untouched */
  assert_int_equal(esmt_model_config_preset("esm2_t12_35M", &old), ESMT_OK);
  assert_int_equal(old.num_layers, 12);
  assert_int_equal(old.precision, ESMT_PRECISION_BF16);
  assert_int_equal(old.struct_size, offsetof(esmt_model_config, precision));
}

/* ---- pointers, sizes, dtypes and the weight copy -------------------------- */

static void expect_clean(const char *what) {
  half_emu_stats *s = half_emu_get_stats();
  if (s->problems) fail_msg("%s: %llu bad op arguments; first: %s", what,
                            (unsigned long long)s->problems, s->first_problem);
}

/* params_lowp holds exactly dtype(params). */
static void expect_lowp_synced(esmt_model *m) {
  const uint64_t n = m->layout.total;
  float *p = malloc(n * sizeof *p);
  assert_int_equal(m->ops->copy_async(m->dev, p, m->mem.master, n * 4, ESMTB_COPY_D2H, NULL), 0);
  assert_int_equal(m->ops->stream_sync(m->dev, NULL), 0);
  const uint16_t *h = m->mem.compute_lowp; /* host-addressable (the cpu underneath) */
  for (uint64_t i = 0; i < n; i++) {
    uint16_t want = m->dtype == ESMTB_BF16 ? esmt_f32_to_bf16(p[i]) : esmt_f32_to_f16(p[i]);
    if (h[i] != want) fail_msg("params_lowp[%llu] = 0x%04x, want 0x%04x (%g)",
                               (unsigned long long)i, h[i], want, (double)p[i]);
  }
  free(p);
}

static void run_step(esmt_model *m, int Bn, int Tn) {
  int32_t *tok = malloc((size_t)Bn * Tn * sizeof *tok), *lab = malloc((size_t)Bn * Tn * sizeof *lab);
  for (int i = 0; i < Bn * Tn; i++) {
    int t = i % Tn, len = Tn - (i / Tn) % 3;
    tok[i] = t >= len ? ESMT_TOKEN_PAD : t % 5 == 2 ? ESMT_TOKEN_MASK : 4 + (i * 7) % 20;
    lab[i] = t < len && t % 5 == 2 ? 4 + i % 20 : ESMT_LABEL_IGNORE;
  }
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = Bn;
  b.seq_len = Tn;
  b.tokens = tok;
  b.labels = lab;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  float *logits = malloc((size_t)Bn * Tn * ESMT_VOCAB_SIZE * sizeof *logits);
  if (esmt_model_forward(m, &b, &r, logits) != ESMT_OK) fail_msg("%s", esmt_last_error());
  assert_true(isfinite(r.loss) && r.loss > 0);
  for (int i = 0; i < Bn * Tn * ESMT_VOCAB_SIZE; i++) assert_true(isfinite(logits[i]));
  if (esmt_model_backward(m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
  double ac_lr = 4e-4; /* the learning rate is the step's argument */
  if (esmt_model_optimizer_step(m, &ac, ac_lr, 1.0, 1) != ESMT_OK) fail_msg("%s", esmt_last_error());
  free(tok);
  free(lab);
  free(logits);
}

static void pointer_checks(esmt_precision p, esmtb_dtype want) {
  use_fake(ESMTB_CAP_F16 | ESMTB_CAP_BF16);
  half_emu_watch(NULL);
  half_emu_reset_stats();
  esmt_model *m = create(p);
  expect_clean("create");
  assert_int_equal(m->dtype, want);
  const int half = want != ESMTB_F32;
  if (half) {
    assert_non_null(m->mem.compute_lowp);
    assert_int_equal(half_emu_get_stats()->converts, 1); /* the initial weight copy */
    expect_lowp_synced(m);
  }
  half_emu_watch(m);
  half_emu_reset_stats();
  run_step(m, 3, 16);
  expect_clean("train step");
  half_emu_stats *s = half_emu_get_stats();
  assert_true(s->ops > 20);
  assert_int_equal(s->half_ops, half ? s->ops - 1 : 0); /* all but adamw */
  assert_int_equal(s->gemm_c_f32, half ? 4 * m->L + 2 : 0); /* every weight gradient */
  assert_int_equal(s->adamw_lowp, half);
  if (half) expect_lowp_synced(m);

  /* the planner's half numbers are the real ones */
  esmt_model_config mc = mixed_tiny_config(ESMT_PRECISION_AUTO);
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  r.model = &mc;
  r.micro_batch = 3;
  r.seq_len = 16;
  r.precision = p;
  r.offload_optimizer = 0;
  r.recompute = 0;
  esmt_plan plan = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &plan), ESMT_OK);
  assert_int_equal(plan.device[ESMT_MEM_ACTIVATIONS], m->arena_bytes);
  assert_int_equal(plan.device[ESMT_MEM_COMPUTE_WEIGHTS], half ? m->layout.total * m->esize : 0);
  assert_int_equal(plan.device[ESMT_MEM_MASTER_WEIGHTS], m->layout.total * 4);

  /* a bigger shape re-carves the arena; still clean */
  half_emu_reset_stats();
  run_step(m, 5, 24);
  expect_clean("train step after growing the arena");
  assert_int_equal(m->arena_bytes, esmt_activation_bytes(&m->cfg, 5, 24, (int)m->esize, 0));

  /* write_tensor refreshes just that tensor's half copy */
  if (half) {
    int idx;
    esmt_tensor_info t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    assert_int_equal(esmt_model_find_tensor(m, "esm.encoder.layer.1.intermediate.dense.weight",
                                            &idx), ESMT_OK);
    assert_int_equal(esmt_model_tensor_info(m, idx, &t), ESMT_OK);
    float *v = malloc(t.numel * sizeof *v);
    for (uint64_t i = 0; i < t.numel; i++) v[i] = (float)i * 1e-3f - 1.0f;
    half_emu_reset_stats();
    assert_int_equal(esmt_model_write_tensor(m, t.name, ESMT_BUF_PARAMS, v, t.numel), ESMT_OK);
    expect_clean("write_tensor");
    assert_int_equal(half_emu_get_stats()->converts, 1);
    expect_lowp_synced(m);
    /* fp32 semantics on read */
    float *back = malloc(t.numel * sizeof *back);
    assert_int_equal(esmt_model_read_tensor(m, t.name, ESMT_BUF_PARAMS, back, t.numel), ESMT_OK);
    assert_memory_equal(back, v, t.numel * sizeof *v);
    free(back);
    free(v);
  }
  half_emu_watch(NULL);
  esmt_model_destroy(m);
  use_real();
}

static void test_pointers_bf16(void **state) { (void)state; pointer_checks(ESMT_PRECISION_BF16, ESMTB_BF16); }
static void test_pointers_fp16(void **state) { (void)state; pointer_checks(ESMT_PRECISION_FP16, ESMTB_F16); }
static void test_pointers_fp32(void **state) { (void)state; pointer_checks(ESMT_PRECISION_FP32, ESMTB_F32); }

/* ---- numerics: emulated half training against fp32 ------------------------ */

static void training_matches(esmt_precision p) {
  use_real();
  esmt_model *m32 = create(ESMT_PRECISION_FP32);
  use_fake(ESMTB_CAP_F16 | ESMTB_CAP_BF16);
  esmt_model *mh = create(p);
  half_emu_watch(mh);
  half_emu_reset_stats();
  mixed_compare(m32, mh, 5, 2e-2, 5e-2);
  expect_clean("training");
  half_emu_watch(NULL);
  esmt_model_destroy(mh);
  esmt_model_destroy(m32);
  use_real();
}

static void test_bf16_training_matches_fp32(void **state) { (void)state; training_matches(ESMT_PRECISION_BF16); }
static void test_fp16_training_matches_fp32(void **state) { (void)state; training_matches(ESMT_PRECISION_FP16); }

/* ---- the config path: backend.precision through the trainer ------------- */

/* Train 3 steps from a config in `prec` on the emulated backend (eval
 * included: half logits come down), then resume from the last checkpoint:
 * the fp32 masters load and the half copy follows them. */
/* deterministic: backend.deterministic, which must reach every attention
 * backward as esmtb_attention_args.nondeterministic (ABI 1.6). */
static void config_run(const char *prec, esmtb_dtype want, int loss_scaling, int deterministic) {
  const char *dir = test_mkdtemp();
  char fa[512], data[512], run[512], ck[600];
  snprintf(fa, sizeof fa, "%s/p.fa", dir);
  snprintf(data, sizeof data, "%s/data", dir);
  snprintf(run, sizeof run, "%s/run", dir);
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
  esmt_config *cfg = NULL;
  assert_int_equal(esmt_config_create(&cfg), ESMT_OK);
  const char *sets[] = {"data.train_dir", data, "model.num_layers", "1", "model.hidden_size", "16",
                        "model.num_heads", "2", "model.ffn_size", "32", "data.max_len", "64",
                        "data.tokens_per_batch", "256", "train.max_steps", "3",
                        "schedule.warmup_steps", "1", "train.eval_every", "1",
                        "train.out_dir", run, "train.save_every", "3", "backend.precision", prec,
                        "backend.deterministic", deterministic ? "true" : "false"};
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i += 2)
    if (esmt_config_set(cfg, sets[i], sets[i + 1]) != ESMT_OK) fail_msg("%s", esmt_last_error());
  use_fake(ESMTB_CAP_F16 | ESMTB_CAP_BF16);
  half_emu_watch(NULL);
  half_emu_reset_stats();
  esmt_trainer *t = NULL, *t2 = NULL;
  if (esmt_trainer_create_from_config(g_ctx, cfg, NULL, &t) != ESMT_OK)
    fail_msg("%s", esmt_last_error());
  assert_int_equal(t->m->dtype, want);
  assert_int_equal(t->scaler.enabled, loss_scaling); /* auto: on for fp16 only */
  int det = -1;
  assert_int_equal(esmt_model_get_deterministic(t->m, &det), ESMT_OK);
  assert_int_equal(det, deterministic);
  half_emu_watch(t->m);
  if (esmt_trainer_run(t) != ESMT_OK) fail_msg("run: %s", esmt_last_error());
  expect_clean("trainer run");
  if (deterministic) assert_int_equal(half_emu_get_stats()->attn_bwd_nondet, 0);
  else assert_true(half_emu_get_stats()->attn_bwd_nondet >= 3); /* 3 steps, 1 layer */
  assert_true(want == ESMTB_F32 ? half_emu_get_stats()->half_ops == 0
                                : half_emu_get_stats()->half_ops > 100);
  half_emu_watch(NULL);
  /* t holds its run (one writer per run): the resumed copy writes its own */
  char run2[600];
  snprintf(run2, sizeof run2, "%s2", run);
  assert_int_equal(esmt_config_set(cfg, "train.out_dir", run2), ESMT_OK);
  if (esmt_trainer_create_from_config(g_ctx, cfg, NULL, &t2) != ESMT_OK)
    fail_msg("%s", esmt_last_error());
  snprintf(ck, sizeof ck, "%s/checkpoints/step-00000003", run);
  if (esmt_trainer_resume(t2, ck) != ESMT_OK) fail_msg("resume: %s", esmt_last_error());
  const uint64_t n = t->m->layout.total;
  if (want != ESMTB_F32) {
    expect_lowp_synced(t2->m);
    assert_memory_equal(t2->m->mem.compute_lowp, t->m->mem.compute_lowp, n * t->m->esize);
  } else {
    assert_null(t2->m->mem.compute_lowp);
  }
  esmt_trainer_destroy(t2);
  esmt_trainer_destroy(t);
  esmt_config_destroy(cfg);
  use_real();
  test_rmtree(dir);
}

static void test_config_bf16(void **state) { (void)state; config_run("bf16", ESMTB_BF16, 0, 0); }
static void test_config_fp16(void **state) { (void)state; config_run("fp16", ESMTB_F16, 1, 1); }
static void test_config_auto(void **state) { (void)state; config_run("auto", ESMTB_F32, 0, 1); }

static void test_set_deterministic_misuse(void **state) {
  (void)state;
  esmt_model *m = create(ESMT_PRECISION_FP32);
  int det = -1;
  assert_int_equal(esmt_model_get_deterministic(m, &det), ESMT_OK);
  assert_int_equal(det, 1); /* the default */
  assert_int_equal(esmt_model_set_deterministic(m, 2), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "use 0 or 1"));
  assert_int_equal(esmt_model_set_deterministic(NULL, 0), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_model_get_deterministic(m, NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_model_set_deterministic(m, 0), ESMT_OK);
  assert_int_equal(esmt_model_get_deterministic(m, &det), ESMT_OK);
  assert_int_equal(det, 0);
  esmt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_conversions),
      cmocka_unit_test(test_resolve_precision),
      cmocka_unit_test(test_cpu_model_precision),
      cmocka_unit_test(test_pointers_bf16),
      cmocka_unit_test(test_pointers_fp16),
      cmocka_unit_test(test_pointers_fp32),
      cmocka_unit_test(test_bf16_training_matches_fp32),
      cmocka_unit_test(test_fp16_training_matches_fp32),
      cmocka_unit_test(test_config_bf16),
      cmocka_unit_test(test_config_fp16),
      cmocka_unit_test(test_config_auto),
      cmocka_unit_test(test_set_deterministic_misuse),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
