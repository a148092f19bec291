/* SPDX-License-Identifier: MIT */
/* Dynamic loss scaling (issue #7 item 2, #10 item 7), on the CPU backend:
 * the policy itself (hysteresis, backoff, growth, floor), a scaled run
 * matching an unscaled one, Inf/NaN gradients injected through the test
 * hook being skipped and recovered from, and the floor saving a resumable
 * checkpoint while the previous ones stay intact. */
#define _GNU_SOURCE
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "loss_scaler.h"
#include "mem_source.h"
#include "trainer_fixture.h"
#include "trainer.h"

/* What scaled_opts' options point to (one set of options at a time). */
static esmt_schedule o_sched;
static esmt_loss_scale_config o_ls;

static esmt_trainer_options scaled_opts(double initial, int hysteresis) {
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  o_sched = (esmt_schedule)ESMT_SCHEDULE_INIT;
  o.schedule = &o_sched;
  o_ls = (esmt_loss_scale_config)ESMT_LOSS_SCALE_CONFIG_INIT;
  o.loss_scale = &o_ls;
  o_sched.peak_lr = 1e-3;
  o_sched.warmup_steps = 2;
  o_sched.total_steps = 20;
  o.log_every = 0;
  o_ls.enabled = 1;
  o_ls.initial = initial;
  o_ls.hysteresis = hysteresis;
  return o;
}

static double rel_diff(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)b[i] * b[i];
  }
  return sqrt(num / den);
}

static void no_injection(void) {
  esmt_test_inject_nan_step = 0;
  esmt_test_inject_nan_count = 0;
  esmt_test_inject_inf = 0;
}

static void test_policy(void **state) {
  (void)state;
  esmt_loss_scale_config c = ESMT_LOSS_SCALE_CONFIG_INIT;
  esmt_loss_scaler s;
  assert_int_equal(esmt_loss_scaler_init(&s, &c), ESMT_OK); /* disabled */
  assert_true(s.scale == 1.0);
  assert_int_equal(esmt_loss_scaler_update(&s, 1), ESMT_SCALER_CLEAN);
  c.enabled = 1;
  c.initial = 64;
  c.growth_interval = 3;
  c.hysteresis = 2;
  c.min = 16;
  assert_int_equal(esmt_loss_scaler_init(&s, &c), ESMT_OK);
  assert_int_equal(esmt_loss_scaler_update(&s, 1), ESMT_SCALER_SKIPPED); /* hysteresis */
  assert_true(s.scale == 64);
  assert_int_equal(esmt_loss_scaler_update(&s, 1), ESMT_SCALER_BACKED_OFF);
  assert_true(s.scale == 32);
  assert_int_equal(esmt_loss_scaler_update(&s, 0), ESMT_SCALER_CLEAN);
  assert_int_equal(esmt_loss_scaler_update(&s, 0), ESMT_SCALER_CLEAN);
  assert_int_equal(esmt_loss_scaler_update(&s, 0), ESMT_SCALER_GREW);
  assert_true(s.scale == 64);
  /* an overflow resets the clean run */
  assert_int_equal(esmt_loss_scaler_update(&s, 0), ESMT_SCALER_CLEAN);
  assert_int_equal(esmt_loss_scaler_update(&s, 1), ESMT_SCALER_SKIPPED);
  assert_int_equal(esmt_loss_scaler_update(&s, 0), ESMT_SCALER_CLEAN);
  assert_int_equal(esmt_loss_scaler_update(&s, 0), ESMT_SCALER_CLEAN);
  assert_true(s.scale == 64);
  /* down to the floor: 64 -> 32 -> 16, then nowhere to go */
  for (int i = 0; i < 3; i++) esmt_loss_scaler_update(&s, 1);
  assert_true(s.scale == 32);
  assert_int_equal(esmt_loss_scaler_update(&s, 1), ESMT_SCALER_BACKED_OFF);
  assert_true(s.scale == 16);
  assert_int_equal(esmt_loss_scaler_update(&s, 1), ESMT_SCALER_SKIPPED);
  assert_int_equal(esmt_loss_scaler_update(&s, 1), ESMT_SCALER_AT_FLOOR);
  assert_true(s.scale == 16);
  assert_int_equal(s.overflows, 9);
  assert_int_equal(s.consecutive, 6);
  /* bad settings are refused with the values named */
  c.backoff = 1.5;
  assert_int_equal(esmt_loss_scaler_init(&s, &c), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "backoff 1.5"));
  c.backoff = 0.5;
  c.min = 128;
  assert_int_equal(esmt_loss_scaler_init(&s, &c), ESMT_ERR_INVALID_ARGUMENT);
  esmt_trainer_options o = scaled_opts(65536, 2);
  o_ls.hysteresis = 0;
  mem_source ms = {.rows = 2};
  esmt_batch_source src = mem_source_as_source(&ms);
  esmt_model *m = fixture_model();
  esmt_trainer *t = NULL;
  assert_int_equal(esmt_trainer_create(m, &o, &src, &t), ESMT_ERR_INVALID_ARGUMENT);
  assert_null(t);
  esmt_model_destroy(m);
}

/* With power-of-two scales the scaled fp32 run is the unscaled one. */
static void test_scaled_matches_unscaled(void **state) {
  (void)state;
  float *w[2];
  for (int run = 0; run < 2; run++) {
    esmt_model *m = fixture_model();
    mem_source ms = {.rows = 2};
    esmt_batch_source src = mem_source_as_source(&ms);
    esmt_trainer_options o = scaled_opts(1024, 2);
    o_ls.enabled = run;
    o_ls.growth_interval = 2; /* grows twice within the run */
    esmt_trainer *t = NULL;
    assert_int_equal(esmt_trainer_create(m, &o, &src, &t), ESMT_OK);
    esmt_train_metrics mt = {.struct_size = sizeof mt};
    for (int i = 0; i < 5; i++) assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK);
    assert_true(mt.loss_scale == (run ? 4096.0 : 1.0));
    assert_int_equal(mt.skipped, 0);
    w[run] = fixture_weights(m);
    if (run) {
      double d = rel_diff(w[1], w[0], m->layout.total);
      printf("scaled vs unscaled weights after 5 updates: rel diff %.3g\n", d);
      assert_true(d < 1e-6);
    }
    esmt_trainer_destroy(t);
    esmt_model_destroy(m);
  }
  free(w[0]);
  free(w[1]);
}

/* Inf (then NaN) in the gradients: the update is skipped, the weights are
 * untouched, the overflow is counted, the scale backs off after the
 * hysteresis, and the next clean update trains. */
static void test_overflow_skip_and_recover(void **state) {
  (void)state;
  for (int inf = 0; inf < 2; inf++) {
    esmt_model *m = fixture_model();
    mem_source ms = {.rows = 2};
    esmt_batch_source src = mem_source_as_source(&ms);
    esmt_trainer_options o = scaled_opts(65536, 2);
    o.nonfinite_abort = 1; /* overflows are the scaler's, not the policy's */
    esmt_trainer *t = NULL;
    assert_int_equal(esmt_trainer_create(m, &o, &src, &t), ESMT_OK);
    esmt_test_inject_nan_step = 2;
    esmt_test_inject_nan_count = 2;
    esmt_test_inject_inf = inf;
    esmt_train_metrics mt = {.struct_size = sizeof mt};
    assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK);
    float *before = fixture_weights(m);
    assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK); /* overflow 1: tolerated */
    assert_int_equal(mt.skipped, 1);
    assert_int_equal(mt.overflows, 1);
    assert_true(mt.loss_scale == 65536);
    assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK); /* overflow 2: backs off */
    assert_int_equal(mt.overflows, 2);
    float *after = fixture_weights(m);
    assert_memory_equal(before, after, m->layout.total * sizeof *before);
    assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK); /* recovers */
    assert_true(mt.loss_scale == 32768);
    assert_int_equal(mt.skipped, 2);
    assert_true(isfinite(mt.loss) && isfinite(mt.grad_norm) && mt.grad_norm > 0);
    float *later = fixture_weights(m);
    assert_true(rel_diff(later, after, m->layout.total) > 0); /* it trained */
    no_injection();
    free(before);
    free(after);
    free(later);
    esmt_trainer_destroy(t);
    esmt_model_destroy(m);
  }
}

/* Overflows all the way down: the run saves a resumable checkpoint whose
 * weights are those of the last clean update, stops with diagnostics, and
 * the earlier checkpoints stay intact. */
static void test_floor_saves_and_stops(void **state) {
  (void)state;
  const char *d = test_mkdtemp();
  char run[256];
  snprintf(run, sizeof run, "%s", d);
  esmt_model *m = fixture_model();
  mem_source ms = {.rows = 2};
  esmt_batch_source src = mem_source_as_source(&ms);
  esmt_trainer_options o = scaled_opts(8, 1);
  o_ls.min = 2;
  o.run_dir = run;
  o.save_every = 1;
  o.keep_last = 0;
  o.max_steps = 20;
  esmt_trainer *t = NULL;
  assert_int_equal(esmt_trainer_create(m, &o, &src, &t), ESMT_OK);
  esmt_test_inject_nan_step = 3;
  esmt_test_inject_nan_count = 1000;
  /* 3: 8 -> 4, 4: 4 -> 2, 5: below the floor 2 */
  assert_int_equal(esmt_trainer_run(t), ESMT_ERR_NUMERIC);
  const char *msg = esmt_last_error();
  printf("floor message: %s\n", msg);
  assert_non_null(strstr(msg, "loss-scale floor 2"));
  assert_non_null(strstr(msg, "checkpoint saved"));
  assert_non_null(strstr(msg, "step-00000005"));
  assert_int_equal(esmt_trainer_step_count(t), 5);
  float *w = fixture_weights(m);
  no_injection();
  esmt_trainer_destroy(t);
  /* step 2's checkpoint is intact and holds the same weights (3-5 skipped) */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/checkpoints/step-00000002", run);
  esmt_model *m2 = fixture_model();
  assert_int_equal(esmt_checkpoint_load(m2, dir, 1, NULL), ESMT_OK);
  float *w2 = fixture_weights(m2);
  assert_memory_equal(w, w2, m->layout.total * sizeof *w);
  /* resume from the floor checkpoint: step 5, the scale where it stopped */
  mem_source ms2 = {.rows = 2};
  esmt_batch_source src2 = mem_source_as_source(&ms2);
  assert_int_equal(esmt_trainer_create(m2, &o, &src2, &t), ESMT_OK);
  assert_int_equal(esmt_trainer_resume(t, run), ESMT_OK);
  assert_int_equal(esmt_trainer_step_count(t), 5);
  assert_true(t->scaler.scale == 2);
  assert_int_equal(t->scaler.overflows, 3);
  esmt_train_metrics mt = {.struct_size = sizeof mt};
  assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK);
  assert_int_equal(mt.skipped, 3);
  assert_true(isfinite(mt.loss) && mt.loss_scale == 2);
  free(w);
  free(w2);
  esmt_trainer_destroy(t);
  esmt_model_destroy(m);
  esmt_model_destroy(m2);
  test_rmtree(run);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_policy),
      cmocka_unit_test(test_scaled_matches_unscaled),
      cmocka_unit_test(test_overflow_skip_and_recover),
      cmocka_unit_test(test_floor_saves_and_stops),
  };
  return cmocka_run_group_tests(tests, fixture_setup, fixture_teardown);
}
