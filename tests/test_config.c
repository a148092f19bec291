/* Configuration: defaults, YAML (nesting, include, errors with file:line),
 * overrides, closest-key suggestions, enum and bounds errors, byte sizes,
 * presets, print -> load round trip, cross-field validation. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"

static char g_dir[256];
static int setup(void **s) { (void)s; snprintf(g_dir, sizeof g_dir, "%s", test_mkdtemp()); return 0; }
static int teardown(void **s) { (void)s; test_rmtree(g_dir); return 0; }

static const char *write_yaml(const char *name, const char *text) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

static esmt_config *fresh(void) {
  esmt_config *c = NULL;
  assert_int_equal(esmt_config_create(&c), ESMT_OK);
  return c;
}

static void test_defaults_for_every_key(void **state) {
  (void)state;
  esmt_config *c = fresh();
  int n = esmt_config_key_count();
  assert_true(n >= 40);
  for (int i = 0; i < n; i++) {
    esmt_config_key k = {.struct_size = sizeof k};
    assert_int_equal(esmt_config_key_info(i, &k), ESMT_OK);
    assert_non_null(k.doc);
    assert_true(strlen(k.doc) > 5);
    assert_non_null(k.default_value);
  }
  int64_t v;
  double d;
  assert_int_equal(esmt_config_get_int(c, "model.num_layers", &v), ESMT_OK);
  assert_int_equal(v, 6);
  assert_int_equal(esmt_config_get_double(c, "optimizer.beta2", &d), ESMT_OK);
  assert_true(d == 0.98);
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  esmt_config_destroy(c);
}

static void test_yaml_and_overrides(void **state) {
  (void)state;
  esmt_config *c = fresh();
  const char *p = write_yaml("a.yaml",
                             "# comment\ninclude: esm2_t12_35M\noptimizer:\n  lr: 1e-3\n"
                             "backend:\n  device_memory_limit: 8GiB\ntrain:\n  nonfinite: abort\n");
  assert_int_equal(esmt_config_load_yaml(c, p), ESMT_OK);
  int64_t v;
  double d;
  const char *s;
  esmt_config_get_int(c, "model.num_layers", &v);
  assert_int_equal(v, 12); /* from the included preset */
  esmt_config_get_double(c, "optimizer.lr", &d);
  assert_true(d == 1e-3);
  esmt_config_get_int(c, "backend.device_memory_limit", &v);
  assert_int_equal(v, 8589934592LL);
  esmt_config_get_string(c, "train.nonfinite", &s);
  assert_string_equal(s, "abort");
  assert_int_equal(esmt_config_set_assignment(c, "optimizer.lr=2e-4"), ESMT_OK); /* --set wins */
  esmt_config_get_double(c, "optimizer.lr", &d);
  assert_true(d == 2e-4);
  assert_int_equal(esmt_config_set(c, "backend.device_memory_limit", "1.5G"), ESMT_OK);
  esmt_config_get_int(c, "backend.device_memory_limit", &v);
  assert_int_equal(v, 1610612736LL);
  esmt_config_destroy(c);
}

static void test_errors(void **state) {
  (void)state;
  esmt_config *c = fresh();
  const char *p = write_yaml("typo.yaml", "optimizer:\n  lr: 1e-3\n  lrr: 2e-3\n");
  assert_int_equal(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "typo.yaml:3"));
  assert_non_null(strstr(esmt_last_error(), "'optimizer.lrr'"));
  assert_non_null(strstr(esmt_last_error(), "did you mean 'optimizer.lr'"));
  assert_int_equal(esmt_config_set(c, "optimiser.lr", "1"), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "optimizer.lr"));
  assert_int_equal(esmt_config_set(c, "schedule.kind", "linear"), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "esm2|cosine|constant"));
  assert_int_equal(esmt_config_set(c, "optimizer.beta2", "1.5"), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "[0, 0.999999]"));
  assert_int_equal(esmt_config_set(c, "model.num_layers", "six"), ESMT_ERR_CONFIG);
  assert_int_equal(esmt_config_set(c, "backend.device_memory_limit", "8 parsecs"), ESMT_ERR_CONFIG);
  /* found by fuzz_config_yaml: a size beyond uint64 was cast (undefined) */
  assert_int_equal(esmt_config_set(c, "backend.device_memory_limit", "3.1e124GiB"), ESMT_ERR_CONFIG);
  assert_int_equal(esmt_config_set(c, "offload.pinned_memory_limit", "1e30"), ESMT_ERR_CONFIG);
  assert_int_equal(esmt_config_set(c, "train.fast_dev_run", "-1"), ESMT_ERR_CONFIG);
  assert_int_equal(esmt_config_set_assignment(c, "no-equals"), ESMT_ERR_CONFIG);
  p = write_yaml("syntax.yaml", "model:\n  num_layers: [1, 2\n");
  assert_int_equal(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "syntax.yaml:"));
  p = write_yaml("syntax2.yaml", "model:\n  num_layers: 4\n   bad: indent\n");
  assert_int_equal(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "syntax2.yaml:2"));
  p = write_yaml("syntax3.yaml", "model:\n\tnum_layers: 4\n"); /* a tab indent */
  assert_int_equal(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "YAML syntax error"));
  assert_non_null(strstr(esmt_last_error(), "syntax3.yaml:"));
  assert_int_equal(esmt_config_load_yaml(c, "/nonexistent/x.yaml"), ESMT_ERR_IO);
  assert_int_equal(esmt_config_apply_preset(c, "rtx9090"), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "rtx3080"));
  esmt_config_destroy(c);
}

static void test_validation(void **state) {
  (void)state;
  esmt_config *c = fresh();
  assert_int_equal(esmt_config_set(c, "model.num_heads", "7"), ESMT_OK);
  assert_int_equal(esmt_config_validate(c), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "model.num_heads"));
  esmt_config_set(c, "model.num_heads", "20");
  esmt_config_set(c, "data.max_len", "2048");
  assert_int_equal(esmt_config_validate(c), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "model.max_positions"));
  esmt_config_set(c, "data.max_len", "512");
  esmt_config_set(c, "train.max_steps", "100");
  assert_int_equal(esmt_config_validate(c), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "schedule.warmup_steps"));
  esmt_config_set(c, "schedule.warmup_steps", "10");
  esmt_config_set(c, "backend.name", "cpu");
  esmt_config_set(c, "backend.precision", "bf16");
  assert_int_equal(esmt_config_validate(c), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "GPU backend"));
  esmt_config_set(c, "backend.precision", "fp32");
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  esmt_config_destroy(c);
}

static void test_presets_and_round_trip(void **state) {
  (void)state;
  char list[4096];
  assert_int_equal(esmt_config_list_presets(list, sizeof list), ESMT_OK);
  const char *need[] = {"esm2_t6_8M", "esm2_t36_3B", "rtx2080super", "rtx3080", "a6000", "a800",
                        "dual-gpu", "triple-3080-lowmem", "cpu"};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
    char line[64];
    snprintf(line, sizeof line, "%s\n", need[i]);
    if (!strstr(list, line)) fail_msg("preset %s missing from:\n%s", need[i], list);
  }
  /* every preset loads and validates, and prints/loads back identically */
  for (char *name = strtok(list, "\n"); name; name = strtok(NULL, "\n")) {
    esmt_config *a = fresh(), *b = fresh();
    if (esmt_config_apply_preset(a, name) != ESMT_OK) fail_msg("%s: %s", name, esmt_last_error());
    if (esmt_config_validate(a) != ESMT_OK) fail_msg("%s: %s", name, esmt_last_error());
    char *y1 = NULL, *y2 = NULL;
    assert_int_equal(esmt_config_to_yaml(a, &y1), ESMT_OK);
    const char *p = write_yaml("round.yaml", y1);
    if (esmt_config_load_yaml(b, p) != ESMT_OK) fail_msg("%s round trip: %s", name, esmt_last_error());
    assert_int_equal(esmt_config_to_yaml(b, &y2), ESMT_OK);
    assert_string_equal(y1, y2);
    free(y1);
    free(y2);
    esmt_config_destroy(a);
    esmt_config_destroy(b);
  }
  esmt_config *c = fresh();
  assert_int_equal(esmt_config_apply_preset(c, "rtx2080super"), ESMT_OK);
  const char *s;
  int64_t v;
  esmt_config_get_string(c, "backend.name", &s);
  assert_string_equal(s, "turing_fp16");
  esmt_config_get_int(c, "data.micro_batch", &v);
  assert_int_equal(v, 6);
  esmt_config_get_int(c, "model.hidden_size", &v);
  assert_int_equal(v, 1280);
  esmt_config_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_for_every_key), cmocka_unit_test(test_yaml_and_overrides),
      cmocka_unit_test(test_errors),                 cmocka_unit_test(test_validation),
      cmocka_unit_test(test_presets_and_round_trip),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
