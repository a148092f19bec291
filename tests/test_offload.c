/* SPDX-License-Identifier: MIT */
/* Optimizer offload (offload.{h,c}) on the cpu backend, which is both the
 * "device" and the host optimizer here: training with offload must give
 * bit-identical weights and moments to training without it (same kernels,
 * same order), checkpoints cross between the two, the pinned cap falls
 * back to pageable memory (logged, same results), the planner's host-RAM
 * figure is what is allocated, and offload.optimizer=auto follows
 * backend.device_memory_limit. F16/BF16 offload runs on the cpu ops with
 * half emulated (half_emu_backend). */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "context.h"
#include "half_emu_backend.h"
#include "micro_batch_fixture.h"
#include "offload.h"
#include "trainer.h"


/* The optimizer of the models the tests make (AdamW but in the Lion test). */
static esmt_optimizer_kind g_kind = ESMT_OPTIMIZER_ADAMW;

static esmt_model_config tiny(esmt_precision p) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.optimizer = g_kind;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.num_heads = 4;
  c.max_positions = 64;
  c.precision = p;
  return c;
}

static esmt_model *create(esmt_precision p, int offload, uint64_t pinned_limit) {
  esmt_model_config c = tiny(p);
  esmt_offload_options o = {.enabled = offload, .pinned_limit = pinned_limit};
  esmt_model *m = NULL;
  if (esmt_model_create_with(g_fixture_ctx, &c, 11, &o, &m) != ESMT_OK)
    fail_msg("create: %s", esmt_last_error());
  assert_true(offload ? m->mem.offload != NULL : m->mem.offload == NULL);
  return m;
}

/* Micro-batch k of update u: right-padded rows, some masked positions. */
static void fill_batch(esmt_micro_batch *mb, int u, int k, int32_t *tok, int32_t *lab) {
  fill_micro_batch(mb, 3, 24, u, k, tok, lab);
}

/* `updates` updates of two micro-batches each, clipping engaged. */
static void train(esmt_model *m, int updates, esmt_update_result *res) {
  esmt_update_params p;
  memset(&p, 0, sizeof p);
  esmt_optimizer_config ac;
  assert_int_equal(esmt_optimizer_config_init(g_kind, &ac), ESMT_OK);
  esmt_schedule sc = ESMT_SCHEDULE_INIT;
  sc.peak_lr = 3e-3;
  sc.warmup_steps = 2;
  sc.total_steps = 100;
  p.optimizer = ac;
  p.schedule = sc;
  p.grad_clip = 0.5;
  p.loss_scale = 1.0;
  int32_t tok[2][72], lab[2][72];
  for (int u = 1; u <= updates; u++) {
    esmt_micro_batch mbs[2];
    for (int k = 0; k < 2; k++) fill_batch(&mbs[k], u, k, tok[k], lab[k]);
    if (esmt_run_update(m, mbs, 2, &p, u, u, &res[u - 1]) != ESMT_OK)
      fail_msg("update %d: %s", u, esmt_last_error());
    assert_false(res[u - 1].skipped);
  }
}

/* Master weights and moments (host pointers on the cpu backend either way). */
static void expect_same_state(esmt_model *a, esmt_model *b) {
  const size_t bytes = a->layout.total * sizeof(float);
  assert_int_equal(a->layout.total, b->layout.total);
  assert_memory_equal(a->mem.master, b->mem.master, bytes);
  assert_memory_equal(a->mem.moment1, b->mem.moment1, bytes);
  assert_true((a->mem.moment2 == NULL) == (b->mem.moment2 == NULL));
  if (a->mem.moment2) assert_memory_equal(a->mem.moment2, b->mem.moment2, bytes);
  /* and what the kernels compute on */
  if (!a->mem.compute_lowp && !b->mem.compute_lowp) assert_memory_equal(a->mem.compute32, b->mem.compute32, bytes);
}

static uint64_t host_allocated(const esmt_model *m) {
  return m->mem.offload->pinned_bytes + m->mem.offload->pageable_bytes;
}

static uint64_t planned_host(esmt_precision p) {
  esmt_model_config mc = tiny(p);
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  r.model = &mc;
  r.micro_batch = 3;
  r.seq_len = 24;
  r.precision = p;
  r.offload_optimizer = 1;
  r.recompute = 0;
  esmt_plan plan = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &plan), ESMT_OK);
  assert_true(plan.offload_optimizer);
  return plan.host_pinned;
}

static void test_fp32_bit_identical(void **state) {
  (void)state;
  g_log[0] = '\0';
  esmt_model *plain = create(ESMT_PRECISION_FP32, 0, 0);
  esmt_model *off = create(ESMT_PRECISION_FP32, 1, 0);
  assert_non_null(strstr(g_log, "offload: optimizer on the host (cpu adamw)"));
  assert_non_null(strstr(g_log, "MiB of host RAM"));
  assert_null(strstr(g_log, "pageable"));
  /* the planner's host figure is what was allocated, all of it pinned */
  assert_int_equal(host_allocated(off), planned_host(ESMT_PRECISION_FP32));
  assert_int_equal(off->mem.offload->pageable_bytes, 0);
  expect_same_state(plain, off);
  esmt_update_result ra[5], rb[5];
  train(plain, 5, ra);
  train(off, 5, rb);
  /* the trainer's update streams every update's gradients bucket by
   * bucket (head, L layers, embedding) and never pulls them whole */
  assert_int_equal(off->mem.offload->buckets_streamed, 5 * (off->L + 2));
  assert_int_equal(off->mem.offload->full_pulls, 0);
  for (int i = 0; i < 5; i++) {
    assert_true(ra[i].loss == rb[i].loss);
    assert_true(ra[i].grad_norm == rb[i].grad_norm);
  }
  assert_true(ra[4].loss < ra[0].loss);
  expect_same_state(plain, off);
  /* read_tensor sees the host master under offload */
  float a[32], b[32];
  assert_int_equal(esmt_model_read_tensor(plain, "esm.encoder.emb_layer_norm_after.weight",
                                          ESMT_BUF_ADAM_V, a, 32), ESMT_OK);
  assert_int_equal(esmt_model_read_tensor(off, "esm.encoder.emb_layer_norm_after.weight",
                                          ESMT_BUF_ADAM_V, b, 32), ESMT_OK);
  assert_memory_equal(a, b, sizeof a);
  esmt_model_destroy(plain);
  esmt_model_destroy(off);
}

/* Lion under offload: the host op (cpu.so's lion) gives the on-device
 * result bit for bit, and the host holds one moment, as planned. */
static void test_lion_bit_identical(void **state) {
  (void)state;
  g_kind = ESMT_OPTIMIZER_LION;
  g_log[0] = '\0';
  esmt_model *plain = create(ESMT_PRECISION_FP32, 0, 0);
  esmt_model *off = create(ESMT_PRECISION_FP32, 1, 0);
  assert_non_null(strstr(g_log, "offload: optimizer on the host (cpu lion)"));
  assert_non_null(strstr(g_log, "its moment,"));
  assert_null(off->mem.moment2);
  assert_null(plain->mem.moment2);
  assert_int_equal(host_allocated(off), planned_host(ESMT_PRECISION_FP32));
  assert_int_equal(host_allocated(off), off->layout.total * 12);
  esmt_update_result ra[5], rb[5];
  train(plain, 5, ra);
  train(off, 5, rb);
  for (int i = 0; i < 5; i++) assert_true(ra[i].loss == rb[i].loss);
  assert_true(ra[4].loss < ra[0].loss);
  expect_same_state(plain, off);
  esmt_model_destroy(plain);
  esmt_model_destroy(off);
  g_kind = ESMT_OPTIMIZER_ADAMW;
}

/* The public model API without the trainer: an unarmed backward, then the
 * norm and AdamW pull the gradients in one copy. write_tensor refreshes
 * the device weights. */
static void test_public_api_path(void **state) {
  (void)state;
  esmt_model *plain = create(ESMT_PRECISION_FP32, 0, 0);
  esmt_model *off = create(ESMT_PRECISION_FP32, 1, 0);
  esmt_model *ms[2] = {plain, off};
  float w[32];
  for (int i = 0; i < 32; i++) w[i] = 1.0f + 0.01f * (float)i;
  int32_t tok[72], lab[72];
  esmt_micro_batch mb;
  fill_batch(&mb, 1, 0, tok, lab);
  double norms[2];
  for (int k = 0; k < 2; k++) {
    esmt_model *m = ms[k];
    assert_int_equal(esmt_model_write_tensor(m, "esm.encoder.layer.1.LayerNorm.weight",
                                             ESMT_BUF_PARAMS, w, 32), ESMT_OK);
    fixture_api_steps(m, &mb, 3, &norms[k]);
  }
  assert_true(norms[0] == norms[1] && norms[0] > 0);
  assert_int_equal(off->mem.offload->buckets_streamed, 0); /* unarmed: one pull per step */
  assert_int_equal(off->mem.offload->full_pulls, 3);
  expect_same_state(plain, off);
  esmt_model_destroy(plain);
  esmt_model_destroy(off);
}

/* offload.pinned_memory_limit smaller than needed: the buffers past it
 * are pageable, the log says so, results are unchanged. */
static void test_pinned_cap_fallback(void **state) {
  (void)state;
  g_log[0] = '\0';
  uint64_t P = 0;
  esmt_model_config c = tiny(ESMT_PRECISION_FP32);
  esmt_model_config_param_count(&c, &P);
  const uint64_t buf = P * 4;
  esmt_model *plain = create(ESMT_PRECISION_FP32, 0, 0);
  /* the copy buffers are pinned first: gradients, master; the moments
   * (host-only) go pageable */
  esmt_model *off = create(ESMT_PRECISION_FP32, 1, 2 * buf + 100);
  assert_int_equal(off->mem.offload->pinned_bytes, 2 * buf);
  assert_int_equal(off->mem.offload->pageable_bytes, 2 * buf);
  assert_true(off->mem.offload->bufs[0].ptr == off->mem.offload->grads && off->mem.offload->bufs[0].pinned);
  assert_true(off->mem.offload->bufs[1].ptr == off->mem.master && off->mem.offload->bufs[1].pinned);
  assert_int_equal(host_allocated(off), planned_host(ESMT_PRECISION_FP32));
  assert_non_null(strstr(g_log, "optimizer first moments ("));
  assert_non_null(strstr(g_log, "AdamW second moments"));
  assert_non_null(strstr(g_log, "in pageable host memory: offload.pinned_memory_limit"));
  assert_null(strstr(g_log, "host gradients"));
  esmt_update_result ra[4], rb[4];
  train(plain, 4, ra);
  train(off, 4, rb);
  expect_same_state(plain, off);
  esmt_model_destroy(off);
  /* a cap below the first buffer: everything pageable */
  off = create(ESMT_PRECISION_FP32, 1, 16);
  assert_int_equal(off->mem.offload->pinned_bytes, 0);
  assert_int_equal(off->mem.offload->pageable_bytes, planned_host(ESMT_PRECISION_FP32));
  train(off, 4, rb);
  expect_same_state(plain, off);
  esmt_model_destroy(off);
  esmt_model_destroy(plain);
}

/* Checkpoints written with offload load without it and the reverse. */
static void test_checkpoint_cross(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  char run_a[512], run_b[512], ck[1024];
  snprintf(run_a, sizeof run_a, "%s/a", dir);
  snprintf(run_b, sizeof run_b, "%s/b", dir);
  esmt_update_result r[3];
  for (int from_offload = 0; from_offload < 2; from_offload++) {
    const char *run = from_offload ? run_a : run_b;
    esmt_model *src = create(ESMT_PRECISION_FP32, from_offload, 0);
    train(src, 3, r);
    if (esmt_checkpoint_save(src, run, 3, "{}", 0, ck, sizeof ck) != ESMT_OK)
      fail_msg("save: %s", esmt_last_error());
    esmt_model *dst = create(ESMT_PRECISION_FP32, !from_offload, 0);
    char *json = NULL;
    if (esmt_checkpoint_load(dst, ck, 1, &json) != ESMT_OK) fail_msg("load: %s", esmt_last_error());
    free(json);
    expect_same_state(src, dst);
    /* and both continue identically */
    esmt_update_result ra[2], rb[2];
    train(src, 2, ra);
    train(dst, 2, rb);
    expect_same_state(src, dst);
    esmt_model_destroy(dst);
    esmt_model_destroy(src);
  }
  test_rmtree(dir);
}

/* A NaN in the gradients (the fault-injection hook writes the device
 * copy after backward) is seen by the host norm and skips the update. */
static void test_nonfinite_seen_on_host(void **state) {
  (void)state;
  esmt_model *plain = create(ESMT_PRECISION_FP32, 0, 0);
  esmt_model *off = create(ESMT_PRECISION_FP32, 1, 0);
  esmt_test_inject_nan_step = 2;
  esmt_test_inject_nan_count = 1;
  esmt_update_result ra[3], rb[3];
  esmt_model *ms[2] = {plain, off};
  esmt_update_result *rs[2] = {ra, rb};
  for (int k = 0; k < 2; k++) {
    esmt_update_params p;
    memset(&p, 0, sizeof p);
    esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
    esmt_schedule sc = ESMT_SCHEDULE_INIT;
    sc.warmup_steps = 1;
    sc.total_steps = 500000;
    p.optimizer = ac;
    p.schedule = sc;
    p.loss_scale = 1.0;
    int32_t tok[72], lab[72];
    int64_t applied = 0;
    for (int u = 1; u <= 3; u++) {
      esmt_micro_batch mb;
      fill_batch(&mb, u, 0, tok, lab);
      if (esmt_run_update(ms[k], &mb, 1, &p, u, applied + 1, &rs[k][u - 1]) != ESMT_OK)
        fail_msg("%s", esmt_last_error());
      applied += !rs[k][u - 1].skipped;
    }
  }
  esmt_test_inject_nan_step = 0;
  esmt_test_inject_nan_count = 0;
  assert_true(ra[1].skipped && rb[1].skipped);
  assert_int_equal(off->mem.offload->full_pulls, 1); /* after the injected NaN only */
  assert_false(ra[2].skipped || rb[2].skipped);
  expect_same_state(plain, off);
  esmt_model_destroy(plain);
  esmt_model_destroy(off);
}

/* ---- F16/BF16 offload on the emulated half backend ---------------------- */

static void half_run(esmt_precision p) {
  half_emu_install(g_fixture_ctx);
  half_emu_watch(NULL);
  half_emu_reset_stats();
  g_log[0] = '\0';
  esmt_model *plain = create(p, 0, 0);
  esmt_model *off = create(p, 1, 0);
  assert_non_null(strstr(g_log, "compute-weight staging"));
  assert_int_equal(host_allocated(off), planned_host(p));
  assert_null(off->mem.compute32);
  assert_non_null(off->mem.norm_dev);
  const uint64_t P = plain->layout.total;
  assert_memory_equal(plain->mem.compute_lowp, off->mem.compute_lowp, P * plain->esize);
  esmt_update_result ra[4], rb[4];
  train(plain, 4, ra);
  train(off, 4, rb);
  for (int i = 0; i < 4; i++) assert_true(ra[i].loss == rb[i].loss);
  expect_same_state(plain, off);
  /* the device compute copy: the half weights, then the fp32 norms */
  assert_memory_equal(plain->mem.compute_lowp, off->mem.compute_lowp, P * plain->esize);
  for (int i = 0; i < off->layout.n_norm; i++)
    assert_memory_equal(off->mem.norm_dev + (uint64_t)i * off->d, off->mem.master + off->layout.norm_offs[i],
                        (size_t)off->d * sizeof(float));
  half_emu_stats *s = half_emu_get_stats();
  if (s->problems) fail_msg("%llu bad op arguments; first: %s", (unsigned long long)s->problems,
                            s->first_problem);
  esmt_model_destroy(plain);
  esmt_model_destroy(off);
  half_emu_uninstall(g_fixture_ctx);
}

static void test_bf16_bit_identical(void **state) { (void)state; half_run(ESMT_PRECISION_BF16); }
static void test_fp16_bit_identical(void **state) { (void)state; half_run(ESMT_PRECISION_FP16); }

/* ---- offload.optimizer through the config: on/off/auto --------------- */


static esmt_config *config_for_rec(const char *data, const char *run, const char *offload,
                                   uint64_t budget, const char *recompute) {
  esmt_config *cfg = NULL;
  assert_int_equal(esmt_config_create(&cfg), ESMT_OK);
  char b[32];
  snprintf(b, sizeof b, "%llu", (unsigned long long)budget);
  const char *sets[] = {"data.train_dir", data, "model.num_layers", "2", "model.hidden_size", "32",
                        "model.num_heads", "4", "model.ffn_size", "64", "model.max_positions", "64",
                        "data.max_len", "64", "data.tokens_per_batch", "256",
                        "train.max_steps", "4", "schedule.warmup_steps", "1",
                        "train.eval_every", "0", "train.out_dir", run, "train.save_every", "4",
                        "train.tokens_per_update", "512", "offload.optimizer", offload,
                        "offload.recompute", recompute, "backend.device_memory_limit", b};
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i += 2)
    if (esmt_config_set(cfg, sets[i], sets[i + 1]) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return cfg;
}

static esmt_config *config_for(const char *data, const char *run, const char *offload,
                               uint64_t budget) {
  return config_for_rec(data, run, offload, budget, "off");
}

static esmt_trainer *trainer_for(esmt_config *cfg) {
  esmt_trainer *t = NULL;
  if (esmt_trainer_create_from_config(g_fixture_ctx, cfg, NULL, &t) != ESMT_OK)
    fail_msg("%s", esmt_last_error());
  return t;
}

/* The device bytes the planner gives this config for a policy. */
static uint64_t plan_total(int offload) {
  esmt_model_config mc = tiny(ESMT_PRECISION_FP32);
  mc.ffn_size = 64;
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  r.model = &mc;
  r.seq_len = 64;
  r.micro_batch = 256 / 64;
  r.precision = ESMT_PRECISION_FP32;
  r.offload_optimizer = offload;
  r.recompute = 0;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  return p.device_total;
}

static void test_config_policy(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  const char *data = fixture_dataset(dir);
  char run_on[600], run_off[600], run_x[600], run_y[600], ck[700];
  snprintf(run_on, sizeof run_on, "%s/on", dir);
  snprintf(run_off, sizeof run_off, "%s/off", dir);
  snprintf(run_x, sizeof run_x, "%s/x", dir);
  snprintf(run_y, sizeof run_y, "%s/y", dir); /* one writer per run: each resume its own */
  const uint64_t plain = plan_total(0), offl = plan_total(1);
  assert_true(offl < plain);
  struct { const char *mode; uint64_t budget; int want; const char *rec; int want_rec; } cases[] = {
      {"auto", 0, 0, "off", 0},          /* no budget: all on the device */
      {"auto", plain, 0, "off", 0},      /* the plain plan fits */
      {"auto", plain - 1, 1, "off", 0},  /* it does not: the planner offloads */
      {"auto", offl, 1, "off", 0},
      {"on", 0, 1, "off", 0},
      {"off", offl, 0, "off", 0},        /* forced off whatever the budget */
      /* recompute auto: recompute is cheaper than offload and fits */
      {"auto", plain - 1, 0, "auto", 1},
      {"auto", plain, 0, "auto", 0},
      {"off", plain - 1, 0, "auto", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    g_log[0] = '\0';
    esmt_config *cfg = config_for_rec(data, run_x, cases[i].mode, cases[i].budget, cases[i].rec);
    esmt_trainer *t = trainer_for(cfg);
    if ((t->m->mem.offload != NULL) != cases[i].want)
      fail_msg("case %zu (%s, budget %llu): offload %d, want %d; log:\n%s", i, cases[i].mode,
               (unsigned long long)cases[i].budget, t->m->mem.offload != NULL, cases[i].want, g_log);
    if (t->m->recompute != cases[i].want_rec)
      fail_msg("case %zu: recompute %d, want %d; log:\n%s", i, t->m->recompute, cases[i].want_rec,
               g_log);
    if (!strcmp(cases[i].mode, "auto") && cases[i].budget)
      assert_non_null(strstr(g_log, "memory policy auto: "));
    esmt_trainer_destroy(t);
    esmt_config_destroy(cfg);
  }
  /* Whole runs (accumulation over micro-batches, the armed streaming path,
   * checkpoints): on and off end bit-identical, and each resumes the other. */
  esmt_config *con = config_for(data, run_on, "on", 0), *coff = config_for(data, run_off, "off", 0);
  esmt_trainer *ton = trainer_for(con), *toff = trainer_for(coff);
  if (esmt_trainer_run(ton) != ESMT_OK || esmt_trainer_run(toff) != ESMT_OK)
    fail_msg("run: %s", esmt_last_error());
  expect_same_state(ton->m, toff->m);
  esmt_config *ca = config_for(data, run_x, "off", 0), *cb = config_for(data, run_y, "on", 0);
  esmt_trainer *ta = trainer_for(ca), *tb = trainer_for(cb);
  snprintf(ck, sizeof ck, "%s/checkpoints/step-00000004", run_on);
  if (esmt_trainer_resume(ta, ck) != ESMT_OK) fail_msg("resume: %s", esmt_last_error());
  snprintf(ck, sizeof ck, "%s/checkpoints/step-00000004", run_off);
  if (esmt_trainer_resume(tb, ck) != ESMT_OK) fail_msg("resume: %s", esmt_last_error());
  expect_same_state(ta->m, ton->m);
  expect_same_state(tb->m, toff->m);
  esmt_trainer_destroy(ta);
  esmt_trainer_destroy(tb);
  esmt_trainer_destroy(ton);
  esmt_trainer_destroy(toff);
  esmt_config_destroy(ca);
  esmt_config_destroy(cb);
  esmt_config_destroy(con);
  esmt_config_destroy(coff);
  test_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp32_bit_identical),
      cmocka_unit_test(test_lion_bit_identical),
      cmocka_unit_test(test_public_api_path),
      cmocka_unit_test(test_pinned_cap_fallback),
      cmocka_unit_test(test_checkpoint_cross),
      cmocka_unit_test(test_nonfinite_seen_on_host),
      cmocka_unit_test(test_bf16_bit_identical),
      cmocka_unit_test(test_fp16_bit_identical),
      cmocka_unit_test(test_config_policy),
  };
  return cmocka_run_group_tests(tests, fixture_group_setup, fixture_group_teardown);
}
