/* SPDX-License-Identifier: MIT */
/* LR schedules against their closed forms. */
#define _DEFAULT_SOURCE
#include "test_util.h"

#include <math.h>

#include "esmtrain/esmtrain.h"

static double lr_at(const esmt_schedule *s, int64_t step) {
  double lr = -1;
  assert_int_equal(esmt_schedule_lr(s, step, &lr), ESMT_OK);
  return lr;
}

static void test_esm2(void **state) {
  (void)state;
  esmt_schedule s = ESMT_SCHEDULE_INIT;
  s.peak_lr = 4e-4; s.warmup_steps = 2000; s.total_steps = 500000;
  assert_float_equal(lr_at(&s, 1), 4e-4 / 2000, 1e-15);
  assert_float_equal(lr_at(&s, 1000), 2e-4, 1e-15);
  assert_float_equal(lr_at(&s, 2000), 4e-4, 1e-15);  /* the peak */
  /* Linear from (2000, 4e-4) to (450000, 4e-5). */
  double mid = 2000 + (450000 - 2000) / 2.0;
  assert_float_equal(lr_at(&s, (int64_t)mid), (4e-4 + 4e-5) / 2, 1e-12);
  assert_float_equal(lr_at(&s, 450000), 4e-5, 1e-15);
  assert_float_equal(lr_at(&s, 499999), 4e-5, 1e-15); /* held */
  assert_float_equal(lr_at(&s, 600000), 4e-5, 1e-15);
  for (int64_t t = 2000; t < 450000; t += 997) /* monotone decay */
    assert_true(lr_at(&s, t + 1) <= lr_at(&s, t));
}

static void test_cosine_and_constant(void **state) {
  (void)state;
  esmt_schedule s = ESMT_SCHEDULE_INIT;
  s.kind = ESMT_SCHEDULE_COSINE;
  s.peak_lr = 1.0; s.warmup_steps = 10; s.total_steps = 110; s.final_lr_fraction = 0.0;
  assert_float_equal(lr_at(&s, 5), 0.5, 1e-15);
  assert_float_equal(lr_at(&s, 10), 1.0, 1e-15);
  assert_float_equal(lr_at(&s, 60), 0.5, 1e-12);
  assert_float_equal(lr_at(&s, 35), 0.5 * (1 + cos(M_PI * 0.25)), 1e-12);
  assert_float_equal(lr_at(&s, 110), 0.0, 1e-12);
  assert_float_equal(lr_at(&s, 500), 0.0, 1e-12);
  s.kind = ESMT_SCHEDULE_CONSTANT;
  assert_float_equal(lr_at(&s, 3), 0.3, 1e-15);
  assert_float_equal(lr_at(&s, 1000), 1.0, 1e-15);
  s.warmup_steps = 0;
  assert_float_equal(lr_at(&s, 1), 1.0, 1e-15);
}

static void test_misuse(void **state) {
  (void)state;
  esmt_schedule s = ESMT_SCHEDULE_INIT;
  double lr;
  assert_int_equal(esmt_schedule_lr(&s, 0, &lr), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_schedule_lr(NULL, 1, &lr), ESMT_ERR_INVALID_ARGUMENT);
  s.struct_size = 4;
  assert_int_equal(esmt_schedule_lr(&s, 1, &lr), ESMT_ERR_ABI);
  s.struct_size = sizeof s;
  s.kind = (esmt_schedule_kind)77;
  assert_int_equal(esmt_schedule_lr(&s, 5000, &lr), ESMT_ERR_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_esm2),
      cmocka_unit_test(test_cosine_and_constant),
      cmocka_unit_test(test_misuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
