/* SPDX-License-Identifier: MIT */
/* See reference_fixture.h. */
#include "test_util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_fixture.h"

const char *const k_fixtures[2] = {"tiny_hd16", "small_hd64"};

static int json_int(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (!json_is_integer(v)) fail_msg("fixture config lacks integer '%s'", k);
  return (int)json_integer_value(v);
}

static double json_num(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (!json_is_number(v)) fail_msg("fixture optimizer lacks number '%s'", k);
  return json_number_value(v);
}

void load_fixture(const char *name, fixture *fx) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/reference/fixtures/%s.safetensors", test_src_dir(), name);
  if (esmt_st_open(path, &fx->file) != ESMT_OK) fail_msg("%s", esmt_last_error());
  const char *fmt = esmt_st_meta_get(&fx->file, "format");
  const char *ver = esmt_st_meta_get(&fx->file, "version");
  assert_non_null(fmt);
  assert_string_equal(fmt, "esmtrain-fixture");
  assert_non_null(ver);
  assert_string_equal(ver, "1");
  json_error_t err;
  json_t *c = json_loads(esmt_st_meta_get(&fx->file, "config"), 0, &err);
  /* the optimizer of its step(s): "adamw" (make_fixtures.py) or "lion"
   * (make_lion_fixture.py, which has no eps) */
  const char *am = esmt_st_meta_get(&fx->file, "adamw");
  json_t *a = json_loads(am ? am : esmt_st_meta_get(&fx->file, "lion"), 0, &err);
  fx->lion = !am;
  assert_non_null(c);
  assert_non_null(a);
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  cfg.num_layers = json_int(c, "num_layers");
  cfg.hidden_size = json_int(c, "hidden_size");
  cfg.num_heads = json_int(c, "num_heads");
  cfg.ffn_size = json_int(c, "ffn_size");
  fx->B = json_int(c, "batch");
  fx->T = json_int(c, "seq_len");
  cfg.max_positions = 1024;
  fx->cfg = cfg;
  fx->lr = json_num(a, "lr");
  fx->beta1 = json_num(a, "beta1");
  fx->beta2 = json_num(a, "beta2");
  fx->eps = fx->lion ? 0 : json_num(a, "eps");
  fx->wd = json_num(a, "weight_decay");
  json_decref(c);
  json_decref(a);
}

const esmt_st_tensor *need(const fixture *fx, const char *name) {
  const esmt_st_tensor *t = esmt_st_find(&fx->file, name);
  if (!t) fail_msg("fixture has no tensor '%s'", name);
  return t;
}

double rel_err(const float *a, const double *b, uint64_t n) {
  double num = 0, den = 0;
  for (uint64_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

void load_weights(esmt_model *m, const fixture *fx) {
  int n = 0;
  assert_int_equal(esmt_model_tensor_count(m, &n), ESMT_OK);
  for (int i = 0; i < n; i++) {
    esmt_tensor_info ti = {.struct_size = sizeof ti};
    assert_int_equal(esmt_model_tensor_info(m, i, &ti), ESMT_OK);
    const esmt_st_tensor *t = need(fx, ti.name);
    assert_int_equal(t->numel, ti.numel);
    float *buf = malloc(ti.numel * sizeof *buf);
    esmt_st_to_f32(t, buf);
    if (esmt_model_write_tensor(m, ti.name, ESMT_BUF_PARAMS, buf, ti.numel) != ESMT_OK)
      fail_msg("%s", esmt_last_error());
    free(buf);
  }
}

int32_t *load_i32(const fixture *fx, const char *name) {
  const esmt_st_tensor *t = need(fx, name);
  assert_int_equal(t->numel, (uint64_t)fx->B * fx->T);
  int32_t *v = malloc(t->numel * sizeof *v);
  double *d = malloc(t->numel * sizeof *d);
  esmt_st_to_f64(t, d);
  for (uint64_t i = 0; i < t->numel; i++) v[i] = (int32_t)d[i];
  free(d);
  return v;
}

double compare_all(esmt_model *m, const fixture *fx, esmt_buffer which, const char *prefix,
                          double tol, const char *what) {
  int n = 0;
  double worst = 0;
  esmt_model_tensor_count(m, &n);
  for (int i = 0; i < n; i++) {
    esmt_tensor_info ti = {.struct_size = sizeof ti};
    esmt_model_tensor_info(m, i, &ti);
    char key[160];
    snprintf(key, sizeof key, "%s%s", prefix, ti.name);
    const esmt_st_tensor *t = need(fx, key);
    float *ours = malloc(ti.numel * sizeof *ours);
    double *ref = malloc(ti.numel * sizeof *ref);
    assert_int_equal(esmt_model_read_tensor(m, ti.name, which, ours, ti.numel), ESMT_OK);
    esmt_st_to_f64(t, ref);
    double e = rel_err(ours, ref, ti.numel);
    if (e > worst) worst = e;
    if (!(e <= tol)) fail_msg("%s %s: relative error %.3g > %.1g", what, ti.name, e, tol);
    free(ours);
    free(ref);
  }
  return worst;
}
