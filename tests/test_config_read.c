/* SPDX-License-Identifier: MIT */
/* The library's configuration reader (config_read.h): a mistyped key or a
 * key read as the wrong type fails loudly, naming it and the closest real
 * key, instead of reading as 0; the first failure is the one reported. */
#include "test_util.h"

#include <string.h>

#include "config_read.h"

static void reads_known_keys(void **state) {
  (void)state;
  esmt_config *c = NULL;
  assert_int_equal(esmt_config_create(&c), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "optimizer.lr", "2e-4"), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "backend.device_memory_limit", "8GiB"), ESMT_OK);
  esmt_config_reader r;
  esmt_cfg_reader_init(&r, c);
  assert_true(esmt_cfg_double(&r, "optimizer.lr") == 2e-4);
  assert_int_equal(esmt_cfg_int(&r, "data.max_len"), 1024); /* the default */
  assert_string_equal(esmt_cfg_string(&r, "optimizer.kind"), "adamw");
  assert_int_equal(esmt_cfg_bool(&r, "optimizer.decay_biases_and_norms"), 1);
  assert_true(esmt_cfg_bytes(&r, "backend.device_memory_limit") == 8ull << 30);
  assert_int_equal(esmt_cfg_status(&r, "test"), ESMT_OK);
  esmt_config_destroy(c);
}

static void a_typo_fails_loudly(void **state) {
  (void)state;
  esmt_config *c = NULL;
  assert_int_equal(esmt_config_create(&c), ESMT_OK);
  esmt_config_reader r;
  esmt_cfg_reader_init(&r, c);
  assert_int_equal(esmt_cfg_int(&r, "data.max_lenght"), 0);
  assert_int_equal(r.status, ESMT_ERR_INTERNAL);
  /* later reads, good or bad, keep the first failure */
  assert_int_equal(esmt_cfg_int(&r, "data.max_len"), 0);
  assert_string_equal(esmt_cfg_string(&r, "optimizer.knd"), "");
  esmt_clear_error();
  assert_int_equal(esmt_cfg_status(&r, "esmt_trainer_create_from_config"), ESMT_ERR_INTERNAL);
  const char *e = esmt_last_error();
  assert_non_null(strstr(e, "esmt_trainer_create_from_config: internal error"));
  assert_non_null(strstr(e, "'data.max_lenght'"));
  assert_non_null(strstr(e, "data.max_len")); /* the closest real key */
  assert_null(strstr(e, "optimizer.knd"));
  esmt_config_destroy(c);
}

static void a_wrong_type_fails_loudly(void **state) {
  (void)state;
  esmt_config *c = NULL;
  assert_int_equal(esmt_config_create(&c), ESMT_OK);
  esmt_config_reader r;
  esmt_cfg_reader_init(&r, c);
  assert_int_equal(esmt_cfg_int(&r, "optimizer.kind"), 0); /* an enum, not an int */
  assert_int_equal(esmt_cfg_status(&r, "x"), ESMT_ERR_INTERNAL);
  assert_non_null(strstr(esmt_last_error(), "'optimizer.kind'"));
  esmt_cfg_reader_init(&r, c);
  assert_int_equal(esmt_cfg_bytes(&r, "data.max_len"), 0); /* an int, not a byte size */
  assert_int_equal(esmt_cfg_status(&r, "x"), ESMT_ERR_INTERNAL);
  esmt_config_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reads_known_keys),
      cmocka_unit_test(a_typo_fails_loudly),
      cmocka_unit_test(a_wrong_type_fails_loudly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
