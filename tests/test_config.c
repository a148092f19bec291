/* SPDX-License-Identifier: MIT */
/* Configuration: defaults of every key, YAML (nesting, include/base,
 * errors with file:line[:column]), --set overrides, closest-key
 * suggestions, enum and bounds errors, byte sizes, presets (every file in
 * configs loads and validates), print -> load round trips, and
 * cross-field validation. */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "esmtrain/esmtrain.h"

static char g_dir[256];
static int setup(void **s) {
  (void)s;
  snprintf(g_dir, sizeof g_dir, "%s", test_mkdtemp());
  unsetenv("ESMTRAIN_CONFIG_PATH");
  return 0;
}
static int teardown(void **s) { (void)s; test_rmtree(g_dir); return 0; }

/* Write text to g_dir/name; returns the path (static, one at a time). */
static const char *write_yaml(const char *name, const char *text) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static const char *configs_dir(void) {
  static char dir[1024];
  snprintf(dir, sizeof dir, "%s/configs", test_src_dir());
  return dir;
}

static esmt_config *fresh(void) {
  esmt_config *c = NULL;
  assert_int_equal(esmt_config_create(&c), ESMT_OK);
  assert_non_null(c);
  return c;
}

static int64_t geti(const esmt_config *c, const char *k) {
  int64_t v = -12345;
  if (esmt_config_get_int(c, k, &v) != ESMT_OK) fail_msg("%s: %s", k, esmt_last_error());
  return v;
}
static double getd(const esmt_config *c, const char *k) {
  double v = -12345;
  if (esmt_config_get_double(c, k, &v) != ESMT_OK) fail_msg("%s: %s", k, esmt_last_error());
  return v;
}
static const char *gets(const esmt_config *c, const char *k) {
  const char *v = NULL;
  if (esmt_config_get_string(c, k, &v) != ESMT_OK) fail_msg("%s: %s", k, esmt_last_error());
  return v;
}

/* The last error contains every fragment. */
static void error_has(const char *a, const char *b) {
  const char *e = esmt_last_error();
  if (a && !strstr(e, a)) fail_msg("error lacks '%s': %s", a, e);
  if (b && !strstr(e, b)) fail_msg("error lacks '%s': %s", b, e);
}

static void expect_error(esmt_status got, esmt_status want, const char *a, const char *b) {
  if (got != want) fail_msg("status %d, expected %d (%s)", got, want, esmt_last_error());
  error_has(a, b);
}

/* ---------------------------------------------------------------- defaults */

static void test_defaults_for_every_key(void **state) {
  (void)state;
  esmt_config *c = fresh();
  int n = esmt_config_key_count();
  assert_true(n >= 49);
  char *yaml = NULL;
  assert_int_equal(esmt_config_to_yaml(c, &yaml), ESMT_OK);
  for (int i = 0; i < n; i++) {
    esmt_config_key k = ESMT_CONFIG_KEY_INIT;
    assert_int_equal(esmt_config_key_info(i, &k), ESMT_OK);
    assert_non_null(k.name);
    assert_non_null(strchr(k.name, '.'));
    assert_non_null(k.default_value);
    if (!k.doc || strlen(k.doc) < 8) fail_msg("%s: no doc", k.name);
    if ((k.type == ESMT_CONFIG_ENUM) != (k.choices != NULL)) fail_msg("%s: choices", k.name);
    /* the handle starts at the documented default */
    switch (k.type) {
      case ESMT_CONFIG_INT:
      case ESMT_CONFIG_BYTES:
        assert_int_equal(geti(c, k.name), strtoll(k.default_value, NULL, 10));
        assert_true((double)geti(c, k.name) >= k.min && (double)geti(c, k.name) <= k.max);
        break;
      case ESMT_CONFIG_DOUBLE:
        assert_true(getd(c, k.name) == strtod(k.default_value, NULL));
        break;
      case ESMT_CONFIG_BOOL: {
        int b = -1;
        assert_int_equal(esmt_config_get_bool(c, k.name, &b), ESMT_OK);
        assert_int_equal(b, strcmp(k.default_value, "true") == 0);
        break;
      }
      case ESMT_CONFIG_STRING:
      case ESMT_CONFIG_ENUM:
        assert_string_equal(gets(c, k.name), k.default_value);
        break;
    }
    /* and the printed YAML names it with its doc */
    const char *dot = strchr(k.name, '.');
    char line[128];
    snprintf(line, sizeof line, "\n  %s: ", dot + 1);
    if (!strstr(yaml, line) || !strstr(yaml, k.doc)) fail_msg("%s missing from the YAML", k.name);
  }
  free(yaml);
  /* the values the issue names */
  assert_string_equal(gets(c, "model.preset"), "esm2_t6_8M");
  assert_int_equal(geti(c, "model.num_layers"), 6);
  assert_int_equal(geti(c, "model.hidden_size"), 320);
  assert_int_equal(geti(c, "model.max_positions"), 1024);
  assert_int_equal(geti(c, "data.max_len"), 1024);
  assert_int_equal(geti(c, "data.tokens_per_batch"), 4096);
  assert_int_equal(geti(c, "data.prefetch"), 2);
  assert_int_equal(geti(c, "train.keep_last"), 3);
  assert_int_equal(geti(c, "train.tokens_per_update"), 0);
  assert_string_equal(gets(c, "train.out_dir"), "runs/esmtrain");
  assert_string_equal(gets(c, "train.nonfinite"), "skip");
  assert_true(getd(c, "train.grad_clip") == 1.0);
  assert_true(getd(c, "optimizer.lr") == 4e-4);
  assert_true(getd(c, "optimizer.beta1") == 0.9);
  assert_true(getd(c, "optimizer.beta2") == 0.98);
  assert_true(getd(c, "optimizer.eps") == 1e-8);
  assert_true(getd(c, "optimizer.weight_decay") == 0.01);
  assert_string_equal(gets(c, "schedule.kind"), "esm2");
  assert_int_equal(geti(c, "schedule.warmup_steps"), 2000);
  assert_true(getd(c, "schedule.final_lr_fraction") == 0.1);
  assert_true(getd(c, "schedule.decay_end_fraction") == 0.9);
  assert_string_equal(gets(c, "backend.name"), "");
  assert_string_equal(gets(c, "backend.precision"), "auto");
  assert_string_equal(gets(c, "offload.optimizer"), "auto");
  assert_true(getd(c, "loss_scale.initial") == 65536);
  assert_int_equal(geti(c, "loss_scale.hysteresis"), 2);
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  /* introspection errors */
  esmt_config_key k = ESMT_CONFIG_KEY_INIT;
  assert_int_equal(esmt_config_key_info(n, &k), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_config_key_info(-1, &k), ESMT_ERR_INVALID_ARGUMENT);
  k.struct_size = 4;
  assert_int_equal(esmt_config_key_info(0, &k), ESMT_ERR_ABI);
  esmt_config_destroy(c);
  esmt_config_destroy(NULL);
}

/* ----------------------------------------------------------------- YAML in */

static void test_yaml_nested_keys(void **state) {
  (void)state;
  esmt_config *c = fresh();
  const char *p = write_yaml("nested.yaml",
                             "# a comment\n"
                             "optimizer:\n  lr: 1e-3   # peak\n  beta2: 0.99\n"
                             "schedule: {kind: cosine, warmup_steps: 50}\n"
                             "train.max_steps: 5000\n"          /* a dotted key works too */
                             "backend:\n  device_memory_limit: 8GiB\n  name: ~\n"
                             "loss_scale:\n"                    /* an empty section */
                             "data:\n  train_dir: 'runs/data # not a comment'\n"
                             "  micro_batch: 2e1\n");
  assert_int_equal(esmt_config_load_yaml(c, p), ESMT_OK);
  assert_true(getd(c, "optimizer.lr") == 1e-3);
  assert_true(getd(c, "optimizer.beta2") == 0.99);
  assert_string_equal(gets(c, "schedule.kind"), "cosine");
  assert_int_equal(geti(c, "schedule.warmup_steps"), 50);
  assert_int_equal(geti(c, "train.max_steps"), 5000);
  assert_int_equal(geti(c, "backend.device_memory_limit"), 8589934592LL);
  assert_string_equal(gets(c, "backend.name"), "");
  assert_string_equal(gets(c, "data.train_dir"), "runs/data # not a comment");
  assert_int_equal(geti(c, "data.micro_batch"), 20);
  assert_true(getd(c, "optimizer.eps") == 1e-8); /* untouched keys keep their defaults */
  esmt_config_destroy(c);
}

static void test_yaml_include_and_base(void **state) {
  (void)state;
  assert_int_equal(setenv("ESMTRAIN_CONFIG_PATH", configs_dir(), 1), 0);
  esmt_config *c = fresh();
  /* include: at the bottom is still applied first: the file's own value wins */
  const char *p = write_yaml("inc.yaml", "model:\n  num_layers: 4\ntrain:\n  nonfinite: abort\n"
                                         "include: esm2_t12_35M\n");
  assert_int_equal(esmt_config_load_yaml(c, p), ESMT_OK);
  assert_int_equal(geti(c, "model.num_layers"), 4);
  assert_int_equal(geti(c, "model.hidden_size"), 480); /* from the preset */
  assert_string_equal(gets(c, "model.preset"), "esm2_t12_35M");
  assert_string_equal(gets(c, "train.nonfinite"), "abort");

  /* base: a list, in order (later wins), then a relative path */
  write_yaml("common.yaml", "optimizer:\n  lr: 3e-4\n  weight_decay: 0.05\n");
  p = write_yaml("base.yaml", "base: [rtx2080super, cpu, common.yaml]\noptimizer:\n  lr: 5e-4\n");
  esmt_config *d = fresh();
  assert_int_equal(esmt_config_load_yaml(d, p), ESMT_OK);
  assert_string_equal(gets(d, "backend.name"), "cpu");         /* cpu after rtx2080super */
  assert_int_equal(geti(d, "data.micro_batch"), 6);           /* rtx2080super, cpu leaves it */
  assert_true(getd(d, "optimizer.weight_decay") == 0.05);      /* common.yaml */
  assert_true(getd(d, "optimizer.lr") == 5e-4);                /* the file itself */

  /* within a file model.preset comes before the sizes, whatever the order */
  p = write_yaml("order.yaml", "model:\n  num_heads: 16\n  preset: esm2_t33_650M\n");
  assert_int_equal(esmt_config_load_yaml(d, p), ESMT_OK);
  assert_int_equal(geti(d, "model.hidden_size"), 1280);
  assert_int_equal(geti(d, "model.num_heads"), 16);

  /* include errors name the including file and line */
  p = write_yaml("noinc.yaml", "optimizer:\n  lr: 1e-3\ninclude: rtx9090\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "noinc.yaml:3", "rtx3080");
  write_yaml("loop_a.yaml", "include: loop_b.yaml\n");
  p = write_yaml("loop_b.yaml", "include: loop_a.yaml\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "cycle", NULL);
  p = write_yaml("incmap.yaml", "include:\n  name: cpu\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "incmap.yaml:2", "include");
  p = write_yaml("incmissing.yaml", "include: nothere.yaml\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_IO, "nothere.yaml", NULL);
  esmt_config_destroy(c);
  esmt_config_destroy(d);
  unsetenv("ESMTRAIN_CONFIG_PATH");
}

/* ------------------------------------------------------------ --set values */

static void test_set_overrides(void **state) {
  (void)state;
  esmt_config *c = fresh();
  const char *p = write_yaml("a.yaml", "optimizer:\n  lr: 1e-3\n");
  assert_int_equal(esmt_config_load_yaml(c, p), ESMT_OK);
  assert_int_equal(esmt_config_set_assignment(c, "optimizer.lr=2e-4"), ESMT_OK); /* --set wins */
  assert_true(getd(c, "optimizer.lr") == 2e-4);
  assert_int_equal(esmt_config_set_assignment(c, " train.max_steps = 2e6 "), ESMT_OK);
  assert_int_equal(geti(c, "train.max_steps"), 2000000);
  assert_int_equal(esmt_config_set_assignment(c, "data.train_dir=a=b"), ESMT_OK);
  assert_string_equal(gets(c, "data.train_dir"), "a=b");
  assert_int_equal(esmt_config_set(c, "optimizer.decay_biases_and_norms", "no"), ESMT_OK);
  int b = 1;
  assert_int_equal(esmt_config_get_bool(c, "optimizer.decay_biases_and_norms", &b), ESMT_OK);
  assert_int_equal(b, 0);
  /* model.preset fills the sizes; explicit sizes after it win */
  assert_int_equal(esmt_config_set(c, "model.preset", "esm2_t36_3B"), ESMT_OK);
  assert_int_equal(geti(c, "model.num_layers"), 36);
  assert_int_equal(geti(c, "model.hidden_size"), 2560);
  assert_int_equal(geti(c, "model.num_heads"), 40);
  assert_int_equal(geti(c, "model.ffn_size"), 10240);
  assert_int_equal(esmt_config_set(c, "model.num_layers", "2"), ESMT_OK);
  assert_int_equal(geti(c, "model.num_layers"), 2);
  /* a bad preset name changes nothing */
  expect_error(esmt_config_set(c, "model.preset", "esm2_t6_8m"), ESMT_ERR_CONFIG, "esm2_t6_8M",
               NULL);
  assert_string_equal(gets(c, "model.preset"), "esm2_t36_3B");
  assert_int_equal(geti(c, "model.num_layers"), 2);
  expect_error(esmt_config_set_assignment(c, "no-equals"), ESMT_ERR_CONFIG, "key=value", NULL);
  expect_error(esmt_config_set_assignment(c, "=5"), ESMT_ERR_CONFIG, "key=value", NULL);
  assert_int_equal(esmt_config_set(NULL, "a", "b"), ESMT_ERR_INVALID_ARGUMENT);
  esmt_config_destroy(c);
}

/* --------------------------------------------------------------- bad input */

static void test_unknown_keys(void **state) {
  (void)state;
  esmt_config *c = fresh();
  const char *p = write_yaml("typo.yaml", "optimizer:\n  lr: 1e-3\n  lrr: 2e-3\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "typo.yaml:3", "'optimizer.lrr'");
  error_has("did you mean 'optimizer.lr'", NULL);
  assert_true(getd(c, "optimizer.lr") == 4e-4); /* a failed load changes nothing */
  p = write_yaml("deep.yaml", "train:\n  max_steps: 10\n\noptimiser:\n  lr: 1\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "deep.yaml:5", "'optimizer.lr'");
  assert_int_equal(geti(c, "train.max_steps"), 100000);
  p = write_yaml("section.yaml", "optimizer: 5\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "section.yaml:1", "is a section");
  expect_error(esmt_config_set(c, "optimiser.lr", "1"), ESMT_ERR_CONFIG, "'optimiser.lr'",
               "did you mean 'optimizer.lr'");
  expect_error(esmt_config_set(c, "lrr", "1"), ESMT_ERR_CONFIG, "did you mean 'optimizer.lr'", NULL);
  expect_error(esmt_config_set(c, "schedule.warmup", "1"), ESMT_ERR_CONFIG,
               "did you mean 'schedule.warmup_steps'", NULL);
  expect_error(esmt_config_set_assignment(c, "train.max_step=3"), ESMT_ERR_CONFIG,
               "did you mean 'train.max_steps'", NULL);
  int64_t v;
  expect_error(esmt_config_get_int(c, "train.maxsteps", &v), ESMT_ERR_CONFIG, "train.max_steps", NULL);
  /* typed getters refuse another type */
  expect_error(esmt_config_get_int(c, "optimizer.lr", &v), ESMT_ERR_INVALID_ARGUMENT,
               "optimizer.lr", "a number");
  const char *s;
  expect_error(esmt_config_get_string(c, "train.max_steps", &s), ESMT_ERR_INVALID_ARGUMENT,
               "an integer", NULL);
  assert_int_equal(esmt_config_get_int(c, "train.max_steps", NULL), ESMT_ERR_INVALID_ARGUMENT);
  esmt_config_destroy(c);
}

static void test_bad_values(void **state) {
  (void)state;
  esmt_config *c = fresh();
  expect_error(esmt_config_set(c, "schedule.kind", "linear"), ESMT_ERR_CONFIG, "schedule.kind",
               "esm2|cosine|constant");
  error_has("'linear'", NULL);
  expect_error(esmt_config_set(c, "backend.precision", "fp8"), ESMT_ERR_CONFIG,
               "auto|fp32|fp16|bf16", NULL);
  expect_error(esmt_config_set(c, "optimizer.beta2", "1.5"), ESMT_ERR_CONFIG, "optimizer.beta2",
               "[0, 0.999999]");
  expect_error(esmt_config_set(c, "model.num_layers", "2000"), ESMT_ERR_CONFIG,
               "expected an integer in [1, 1024]", NULL);
  expect_error(esmt_config_set(c, "train.fast_dev_run", "-1"), ESMT_ERR_CONFIG,
               "expected an integer >= 0", NULL);
  expect_error(esmt_config_set(c, "model.num_layers", "six"), ESMT_ERR_CONFIG, "'six'", NULL);
  expect_error(esmt_config_set(c, "model.num_layers", "2.5"), ESMT_ERR_CONFIG, "integer", NULL);
  expect_error(esmt_config_set(c, "model.num_layers", "0x10"), ESMT_ERR_CONFIG, "integer", NULL);
  expect_error(esmt_config_set(c, "optimizer.lr", "nan"), ESMT_ERR_CONFIG, "optimizer.lr", NULL);
  expect_error(esmt_config_set(c, "optimizer.lr", ""), ESMT_ERR_CONFIG, "optimizer.lr", NULL);
  expect_error(esmt_config_set(c, "optimizer.decay_biases_and_norms", "maybe"), ESMT_ERR_CONFIG,
               "true or false", NULL);
  expect_error(esmt_config_set(c, "data.train_dir", "a\nb"), ESMT_ERR_CONFIG, "control", NULL);
  /* YAML values are checked with the file and line */
  const char *p = write_yaml("val.yaml", "train:\n  log_every: 5\n  nonfinite: ignore\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "val.yaml:3", "skip|abort");
  assert_int_equal(geti(c, "train.log_every"), 10); /* rolled back */
  /* nothing above changed a value */
  assert_string_equal(gets(c, "schedule.kind"), "esm2");
  assert_int_equal(geti(c, "model.num_layers"), 6);
  esmt_config_destroy(c);
}

static void test_byte_sizes(void **state) {
  (void)state;
  esmt_config *c = fresh();
  static const struct { const char *text; uint64_t bytes; } ok[] = {
      {"8GiB", 8589934592ULL}, {"512MiB", 536870912ULL}, {"1.5G", 1610612736ULL},
      {"1GB", 1000000000ULL},  {"4096", 4096ULL},        {"2 TiB", 2199023255552ULL},
      {"64k", 65536ULL},       {"0", 0}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    if (esmt_config_set(c, "backend.device_memory_limit", ok[i].text) != ESMT_OK)
      fail_msg("%s: %s", ok[i].text, esmt_last_error());
    uint64_t b = 1;
    assert_int_equal(esmt_config_get_bytes(c, "backend.device_memory_limit", &b), ESMT_OK);
    assert_int_equal(b, ok[i].bytes);
    assert_int_equal(geti(c, "backend.device_memory_limit"), (int64_t)ok[i].bytes);
    uint64_t p = 1;
    assert_int_equal(esmt_parse_size(ok[i].text, &p), ESMT_OK);
    assert_int_equal(p, ok[i].bytes);
  }
  static const char *const bad[] = {"8 parsecs", "-1", "GiB", "3.1e124GiB", "1e30", "nan", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    expect_error(esmt_config_set(c, "offload.pinned_memory_limit", bad[i]), ESMT_ERR_CONFIG,
                 "offload.pinned_memory_limit", "8GiB");
  uint64_t b;
  expect_error(esmt_config_get_bytes(c, "train.max_steps", &b), ESMT_ERR_INVALID_ARGUMENT,
               "byte size", NULL);
  esmt_config_destroy(c);
}

static void test_yaml_syntax_and_file_errors(void **state) {
  (void)state;
  esmt_config *c = fresh();
  const char *p = write_yaml("syntax2.yaml", "model:\n  num_layers: 4\n   bad: indent\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "syntax2.yaml:3:7: YAML syntax error",
               NULL);
  p = write_yaml("syntax3.yaml", "model:\n\tnum_layers: 4\n"); /* a tab indent */
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "syntax3.yaml:2:1: YAML syntax error",
               NULL);
  p = write_yaml("quote.yaml", "data:\n  train_dir: \"unterminated\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "quote.yaml:3:1", "YAML syntax error");
  p = write_yaml("list.yaml", "model:\n  num_layers: [1, 2]\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "list.yaml:2", "model.num_layers");
  p = write_yaml("top.yaml", "- a\n- b\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "top.yaml:1", "mapping");
  p = write_yaml("alias.yaml", "optimizer:\n  lr: &x 1e-3\n  eps: *x\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "alias.yaml:3", "aliases");
  p = write_yaml("twice.yaml", "optimizer:\n  lr: 1e-3\ntrain: {seed: 3}\noptimizer:\n  lr: 2e-3\n");
  expect_error(esmt_config_load_yaml(c, p), ESMT_ERR_CONFIG, "twice.yaml:5", "set twice");
  p = write_yaml("empty.yaml", "# nothing but a comment\n");
  assert_int_equal(esmt_config_load_yaml(c, p), ESMT_OK);
  char missing[600];
  snprintf(missing, sizeof missing, "%s/none.yaml", g_dir);
  expect_error(esmt_config_load_yaml(c, missing), ESMT_ERR_IO, "none.yaml",
               "cannot open configuration file");
  expect_error(esmt_config_load_yaml(c, g_dir), ESMT_ERR_FORMAT, "directory", NULL);
  assert_int_equal(esmt_config_load_yaml(c, NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(geti(c, "model.num_layers"), 6);
  esmt_config_destroy(c);
}

/* ----------------------------------------------------------------- presets */

static int has_line(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; (p = strstr(p, name)); p++)
    if ((p == list || p[-1] == '\n') && p[n] == '\n') return 1;
  return 0;
}

/* Print, load the print into a fresh handle, print again: identical. */
static void assert_round_trip(const esmt_config *a, const char *what) {
  char *y1 = NULL, *y2 = NULL;
  assert_int_equal(esmt_config_to_yaml(a, &y1), ESMT_OK);
  const char *p = write_yaml("round.yaml", y1);
  esmt_config *b = fresh();
  if (esmt_config_load_yaml(b, p) != ESMT_OK) fail_msg("%s round trip: %s", what, esmt_last_error());
  assert_int_equal(esmt_config_to_yaml(b, &y2), ESMT_OK);
  if (strcmp(y1, y2) != 0) fail_msg("%s: the round trip differs:\n%s\n---\n%s", what, y1, y2);
  for (int i = 0; i < esmt_config_key_count(); i++) { /* and the typed values agree */
    esmt_config_key k = ESMT_CONFIG_KEY_INIT;
    esmt_config_key_info(i, &k);
    if (k.type == ESMT_CONFIG_DOUBLE) assert_true(getd(a, k.name) == getd(b, k.name));
    else if (k.type == ESMT_CONFIG_STRING || k.type == ESMT_CONFIG_ENUM)
      assert_string_equal(gets(a, k.name), gets(b, k.name));
    else if (k.type != ESMT_CONFIG_BOOL) assert_int_equal(geti(a, k.name), geti(b, k.name));
  }
  free(y1);
  free(y2);
  esmt_config_destroy(b);
}

static void test_every_preset_loads_and_validates(void **state) {
  (void)state;
  const char *need[] = {"esm2_t6_8M", "esm2_t12_35M", "esm2_t30_150M", "esm2_t33_650M",
                        "esm2_t36_3B", "rtx2080super", "rtx3080", "a6000", "a800", "dual-gpu",
                        "triple-3080-lowmem", "cpu"};
  esmt_config *c = fresh();
  assert_int_equal(esmt_config_set_preset_path(c, configs_dir()), ESMT_OK);
  int n = 0;
  assert_int_equal(esmt_config_preset_count(c, &n), ESMT_OK);
  assert_true(n >= 12);
  /* every file in configs is a listed preset */
  DIR *d = opendir(configs_dir());
  assert_non_null(d);
  int files = 0;
  for (struct dirent *de; (de = readdir(d));) {
    size_t len = strlen(de->d_name);
    if (len < 6 || strcmp(de->d_name + len - 5, ".yaml") != 0) continue;
    files++;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(len - 5), de->d_name);
    int found = 0;
    for (int i = 0; i < n && !found; i++) {
      esmt_config_preset info = ESMT_CONFIG_PRESET_INIT;
      assert_int_equal(esmt_config_preset_info(c, i, &info), ESMT_OK);
      found = strcmp(info.name, name) == 0;
    }
    if (!found) fail_msg("%s is not listed", de->d_name);
  }
  closedir(d);
  assert_true(files >= 12);
  for (int i = 0; i < n; i++) {
    esmt_config_preset info = ESMT_CONFIG_PRESET_INIT;
    assert_int_equal(esmt_config_preset_info(c, i, &info), ESMT_OK);
    if (i) { /* sorted */
      esmt_config_preset prev = ESMT_CONFIG_PRESET_INIT;
      esmt_config_preset_info(c, i - 1, &prev);
      assert_true(strcmp(prev.name, info.name) < 0);
    }
    /* each says what it is for, and which backend */
    if (strlen(info.description) < 20 || !strstr(info.description, "ackend"))
      fail_msg("%s: description '%s'", info.name, info.description);
    esmt_config *a = fresh();
    esmt_config_set_preset_path(a, configs_dir());
    if (esmt_config_apply_preset(a, info.name) != ESMT_OK)
      fail_msg("%s: %s", info.name, esmt_last_error());
    if (esmt_config_validate(a) != ESMT_OK) fail_msg("%s: %s", info.name, esmt_last_error());
    /* a hardware profile names the backend it needs; the description agrees */
    const char *backend = gets(a, "backend.name");
    if (*backend && !strstr(info.description, backend))
      fail_msg("%s: backend %s not in '%s'", info.name, backend, info.description);
    assert_round_trip(a, info.name);
    esmt_config_destroy(a);
  }
  esmt_config_preset info = ESMT_CONFIG_PRESET_INIT;
  assert_int_equal(esmt_config_preset_info(c, n, &info), ESMT_ERR_INVALID_ARGUMENT);
  /* the default search path (the source tree, compiled in) lists them too */
  char list[4096];
  assert_int_equal(esmt_config_list_presets(list, sizeof list), ESMT_OK);
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (!has_line(list, need[i])) fail_msg("preset %s missing from:\n%s", need[i], list);
  char tiny[8];
  expect_error(esmt_config_list_presets(tiny, sizeof tiny), ESMT_ERR_INVALID_ARGUMENT,
               "bytes needed", NULL);

  /* the profiles the issue describes */
  assert_int_equal(esmt_config_apply_preset(c, "rtx2080super"), ESMT_OK);
  assert_string_equal(gets(c, "backend.name"), "turing_fp16");
  assert_string_equal(gets(c, "backend.precision"), "fp16");
  assert_string_equal(gets(c, "offload.optimizer"), "on");
  assert_int_equal(geti(c, "data.micro_batch"), 6);
  assert_int_equal(geti(c, "data.max_len"), 512);
  assert_int_equal(geti(c, "model.hidden_size"), 1280);
  assert_int_equal(geti(c, "backend.device_memory_limit"), 8589934592LL);
  /* presets apply in order: a model size over a hardware profile */
  assert_int_equal(esmt_config_apply_preset(c, "esm2_t12_35M"), ESMT_OK);
  assert_int_equal(geti(c, "model.num_layers"), 12);
  assert_string_equal(gets(c, "backend.name"), "turing_fp16");
  assert_int_equal(esmt_config_apply_preset(c, "a800"), ESMT_OK);
  assert_string_equal(gets(c, "offload.optimizer"), "on");
  assert_string_equal(gets(c, "offload.recompute"), "on");
  assert_int_equal(esmt_config_apply_preset(c, "triple-3080-lowmem"), ESMT_OK);
  assert_true(geti(c, "offload.pinned_memory_limit") > 0);
  assert_string_equal(gets(c, "backend.name"), "nccl_dp");
  assert_int_equal(esmt_config_apply_preset(c, "dual-gpu"), ESMT_OK);
  assert_string_equal(gets(c, "backend.name"), "nccl_dp");
  assert_int_equal(esmt_config_apply_preset(c, "rtx3080"), ESMT_OK);
  assert_string_equal(gets(c, "backend.precision"), "bf16");
  assert_int_equal(esmt_config_apply_preset(c, "cpu"), ESMT_OK);
  assert_string_equal(gets(c, "backend.name"), "cpu");
  assert_string_equal(gets(c, "backend.precision"), "fp32");

  expect_error(esmt_config_apply_preset(c, "rtx9090"), ESMT_ERR_CONFIG, "no preset named 'rtx9090'",
               "did you mean 'rtx3080'");
  expect_error(esmt_config_apply_preset(c, "../cpu"), ESMT_ERR_CONFIG, "not a preset name", NULL);
  expect_error(esmt_config_apply_preset(c, ""), ESMT_ERR_CONFIG, "not a preset name", NULL);
  esmt_config_destroy(c);
}

static void test_preset_search_order(void **state) {
  (void)state;
  char own[600], env[600];
  snprintf(own, sizeof own, "%s/own", g_dir);
  snprintf(env, sizeof env, "%s/env", g_dir);
  assert_int_equal(mkdir(own, 0755), 0);
  assert_int_equal(mkdir(env, 0755), 0);
  write_yaml("own/cpu.yaml", "# my cpu. Backend: cpu.\ntrain:\n  seed: 11\n");
  write_yaml("env/cpu.yaml", "# env cpu\ntrain:\n  seed: 22\n");
  write_yaml("env/mybox.yaml", "# my box\ntrain:\n  seed: 33\n");
  assert_int_equal(setenv("ESMTRAIN_CONFIG_PATH", env, 1), 0);
  esmt_config *c = fresh();
  /* $ESMTRAIN_CONFIG_PATH before the installed/source presets */
  assert_int_equal(esmt_config_apply_preset(c, "cpu"), ESMT_OK);
  assert_int_equal(geti(c, "train.seed"), 22);
  assert_int_equal(esmt_config_apply_preset(c, "mybox"), ESMT_OK);
  assert_int_equal(geti(c, "train.seed"), 33);
  assert_int_equal(esmt_config_apply_preset(c, "rtx3080"), ESMT_OK); /* still found further on */
  /* the handle's own directories before everything */
  assert_int_equal(esmt_config_set_preset_path(c, own), ESMT_OK);
  assert_int_equal(esmt_config_apply_preset(c, "cpu"), ESMT_OK);
  assert_int_equal(geti(c, "train.seed"), 11);
  const char *p = write_yaml("useown.yaml", "include: cpu\n");
  assert_int_equal(esmt_config_set(c, "train.seed", "1"), ESMT_OK);
  assert_int_equal(esmt_config_load_yaml(c, p), ESMT_OK);
  assert_int_equal(geti(c, "train.seed"), 11);
  int n = 0, seen = 0;
  assert_int_equal(esmt_config_preset_count(c, &n), ESMT_OK);
  for (int i = 0; i < n; i++) {
    esmt_config_preset info = ESMT_CONFIG_PRESET_INIT;
    assert_int_equal(esmt_config_preset_info(c, i, &info), ESMT_OK);
    if (strcmp(info.name, "cpu") == 0) {
      seen++;
      assert_string_equal(info.description, "my cpu. Backend: cpu.");
      assert_non_null(strstr(info.path, "/own/cpu.yaml"));
    }
  }
  assert_int_equal(seen, 1); /* shadowed, not listed twice */
  assert_int_equal(esmt_config_set_preset_path(c, NULL), ESMT_OK);
  assert_int_equal(esmt_config_apply_preset(c, "cpu"), ESMT_OK);
  assert_int_equal(geti(c, "train.seed"), 22);
  unsetenv("ESMTRAIN_CONFIG_PATH");
  esmt_config_destroy(c);
}

static void test_print_round_trip(void **state) {
  (void)state;
  esmt_config *c = fresh();
  assert_round_trip(c, "defaults");
  char *y = NULL;
  assert_int_equal(esmt_config_to_yaml(c, &y), ESMT_OK);
  assert_non_null(strstr(y, "\n  mask_prob: 0.15  #"));      /* shortest exact decimal */
  assert_non_null(strstr(y, "\n  lr: 0.0004  #"));
  assert_non_null(strstr(y, "one of esm2|cosine|constant"));
  assert_non_null(strstr(y, "(default 2000)"));
  free(y);
  /* strings YAML would otherwise misread, a long path, sizes, exponents */
  char longdir[700];
  memset(longdir, 'd', sizeof longdir - 1);
  longdir[sizeof longdir - 1] = '\0';
  for (int i = 50; i < 690; i += 50) longdir[i] = '/';
  assert_int_equal(esmt_config_set(c, "data.train_dir", longdir), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "train.out_dir", "runs/a \"quoted\" #x: y\\z"), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "backend.name", "yes"), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "offload.pinned_memory_limit", "1.5G"), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "optimizer.eps", "1e-30"), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "optimizer.lr", "0.1"), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "optimizer.decay_biases_and_norms", "off"), ESMT_OK);
  assert_round_trip(c, "tricky values");
  esmt_config *b = fresh();
  assert_int_equal(esmt_config_to_yaml(c, &y), ESMT_OK);
  assert_int_equal(esmt_config_load_yaml(b, write_yaml("rt.yaml", y)), ESMT_OK);
  free(y);
  assert_string_equal(gets(b, "data.train_dir"), longdir);
  assert_string_equal(gets(b, "train.out_dir"), "runs/a \"quoted\" #x: y\\z");
  assert_string_equal(gets(b, "backend.name"), "yes");
  assert_true(getd(b, "optimizer.eps") == 1e-30);
  int flag = 1;
  assert_int_equal(esmt_config_get_bool(b, "optimizer.decay_biases_and_norms", &flag), ESMT_OK);
  assert_int_equal(flag, 0);
  esmt_config_destroy(b);
  esmt_config_destroy(c);
}

/* ---------------------------------------------------------------- validate */

static void expect_invalid(esmt_config *c, const char *a, const char *b) {
  expect_error(esmt_config_validate(c), ESMT_ERR_CONFIG, a, b);
}

static void test_validation(void **state) {
  (void)state;
  esmt_config *c = fresh();
  assert_int_equal(esmt_config_set(c, "model.num_heads", "7"), ESMT_OK); /* set alone is fine */
  expect_invalid(c, "model.hidden_size (320)", "divisible by model.num_heads (7)");
  esmt_config_set(c, "model.num_heads", "64"); /* 320 / 64 = 5: odd */
  expect_invalid(c, "model.hidden_size / model.num_heads = 5", "even");
  esmt_config_set(c, "model.num_heads", "20");
  esmt_config_set(c, "data.max_len", "2048");
  expect_invalid(c, "data.max_len (2048)", "model.max_positions (1024)");
  esmt_config_set(c, "data.max_len", "512");
  esmt_config_set(c, "data.tokens_per_batch", "256");
  expect_invalid(c, "data.tokens_per_batch (256)", "data.max_len (512)");
  esmt_config_set(c, "data.micro_batch", "1"); /* a row count lifts the budget check */
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  esmt_config_set(c, "data.micro_batch", "0");
  esmt_config_set(c, "data.tokens_per_batch", "4096");
  esmt_config_set(c, "train.tokens_per_update", "1000");
  expect_invalid(c, "train.tokens_per_update (1000)", "4096");
  esmt_config_set(c, "data.micro_batch", "1"); /* 1 x 512 tokens per micro-batch */
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  esmt_config_set(c, "data.micro_batch", "0");
  esmt_config_set(c, "train.tokens_per_update", "4096");
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  esmt_config_set(c, "train.max_steps", "100");
  expect_invalid(c, "schedule.warmup_steps (2000)", "train.max_steps (100)");
  esmt_config_set(c, "train.fast_dev_run", "3"); /* a smoke run ignores the schedule's length */
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  esmt_config_set(c, "train.fast_dev_run", "0");
  esmt_config_set(c, "schedule.warmup_steps", "10");
  esmt_config_set(c, "train.max_steps", "0");
  expect_invalid(c, "schedule.kind esm2", "train.max_steps");
  esmt_config_set(c, "schedule.kind", "constant");
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  esmt_config_set(c, "train.max_steps", "100");
  esmt_config_set(c, "backend.name", "cpu");
  esmt_config_set(c, "backend.precision", "bf16"); /* the cpu backend computes in half too */
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  esmt_config_set(c, "backend.name", "turing_fp16");
  expect_invalid(c, "ampere_bf16", "backend.name turing_fp16");
  esmt_config_set(c, "backend.precision", "fp16");
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  esmt_config_set(c, "loss_scale.min", "1e6");
  expect_invalid(c, "loss_scale.min", "loss_scale.initial");
  esmt_config_set(c, "loss_scale.min", "1");
  esmt_config_set(c, "backend.device_memory_limit", "8");
  expect_invalid(c, "backend.device_memory_limit is 8 bytes", "8GiB");
  esmt_config_set(c, "backend.device_memory_limit", "8GiB");
  assert_int_equal(esmt_config_validate(c), ESMT_OK);
  assert_int_equal(esmt_config_validate(NULL), ESMT_ERR_INVALID_ARGUMENT);
  esmt_config_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_for_every_key),
      cmocka_unit_test(test_yaml_nested_keys),
      cmocka_unit_test(test_yaml_include_and_base),
      cmocka_unit_test(test_set_overrides),
      cmocka_unit_test(test_unknown_keys),
      cmocka_unit_test(test_bad_values),
      cmocka_unit_test(test_byte_sizes),
      cmocka_unit_test(test_yaml_syntax_and_file_errors),
      cmocka_unit_test(test_every_preset_loads_and_validates),
      cmocka_unit_test(test_preset_search_order),
      cmocka_unit_test(test_print_round_trip),
      cmocka_unit_test(test_validation),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
