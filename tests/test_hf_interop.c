/* SPDX-License-Identifier: MIT */
/* HF import/export edge cases in C: exact round trip, config errors
 * naming the field, sharded checkpoints and a missing shard, unexpected
 * tensors, pickles refused, and an export that never clobbers a directory. */
#define _GNU_SOURCE
#include "test_util.h"
#include "cpu_dir_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model.h"
#include "safetensors.h"

static esmt_model *small(uint64_t seed) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2; c.hidden_size = 32; c.num_heads = 2; c.max_positions = 64;
  esmt_model *m = NULL;
  if (esmt_model_create(g_ctx, &c, seed, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return m;
}

static void test_round_trip_exact(void **state) {
  (void)state;
  esmt_model *a = small(3), *b = NULL;
  const char *dir = path_in("export1");
  assert_int_equal(esmt_model_export_hf(a, dir, 0), ESMT_OK);
  const char *files[] = {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
                         "special_tokens_map.json"};
  for (int i = 0; i < 5; i++) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    assert_int_equal(access(p, F_OK), 0);
  }
  if (esmt_model_import_hf(g_ctx, dir, &b) != ESMT_OK) fail_msg("%s", esmt_last_error());
  float *pa = malloc(a->layout.total * 4), *pb = malloc(b->layout.total * 4);
  assert_int_equal(b->layout.total, a->layout.total);
  esmt_model_read_tensor(a, "lm_head.dense.weight", ESMT_BUF_PARAMS, pa, 32 * 32);
  esmt_model_read_tensor(b, "lm_head.dense.weight", ESMT_BUF_PARAMS, pb, 32 * 32);
  assert_memory_equal(pa, pb, 32 * 32 * 4);
  assert_memory_equal(a->inv_freq, b->inv_freq, 8 * sizeof(float));
  free(pa);
  free(pb);
  /* a non-empty directory is refused and left alone; overwrite replaces it */
  esmt_model *c = small(4);
  assert_int_equal(esmt_model_export_hf(c, dir, 0), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "not empty"));
  esmt_model *d = NULL;
  assert_int_equal(esmt_model_import_hf(g_ctx, dir, &d), ESMT_OK); /* still a's export */
  float x, y;
  esmt_model_read_tensor(a, "lm_head.bias", ESMT_BUF_PARAMS, &x, 1);
  assert_int_equal(esmt_model_export_hf(c, dir, 1), ESMT_OK);
  esmt_model_destroy(d);
  assert_int_equal(esmt_model_import_hf(g_ctx, dir, &d), ESMT_OK);
  float e1[32 * 33], e2[32 * 33];
  esmt_model_read_tensor(c, "esm.embeddings.word_embeddings.weight", ESMT_BUF_PARAMS, e1, 32 * 33);
  esmt_model_read_tensor(d, "esm.embeddings.word_embeddings.weight", ESMT_BUF_PARAMS, e2, 32 * 33);
  assert_memory_equal(e1, e2, sizeof e1);
  (void)y;
  esmt_model_destroy(a);
  esmt_model_destroy(b);
  esmt_model_destroy(c);
  esmt_model_destroy(d);
}

static void expect_import_error(const char *dir, esmt_status want, const char *fragment) {
  esmt_model *m = (esmt_model *)0x1;
  esmt_status st = esmt_model_import_hf(g_ctx, dir, &m);
  if (st != want) fail_msg("status %d, expected %d: %s", st, want, esmt_last_error());
  assert_null(m);
  if (!strstr(esmt_last_error(), fragment))
    fail_msg("message '%s' lacks '%s'", esmt_last_error(), fragment);
}

static void test_config_errors(void **state) {
  (void)state;
  esmt_model *a = small(5);
  const char *dir = path_in("cfg");
  assert_int_equal(esmt_model_export_hf(a, dir, 0), ESMT_OK);
  char cj[700];
  snprintf(cj, sizeof cj, "%s/config.json", dir);
  write_text(cj, "{\"model_type\": \"esm\", \"hidden_size\": 32, \"num_attention_heads\": 2,"
                 " \"intermediate_size\": 128, \"vocab_size\": 33}");
  expect_import_error(dir, ESMT_ERR_FORMAT, "num_hidden_layers");
  write_text(cj, "{\"model_type\": \"bert\"}");
  expect_import_error(dir, ESMT_ERR_FORMAT, "model_type is 'bert'");
  write_text(cj, "{\"model_type\": \"esm\", \"emb_layer_norm_before\": true}");
  expect_import_error(dir, ESMT_ERR_UNSUPPORTED, "emb_layer_norm_before");
  write_text(cj, "{\"model_type\": \"esm\", \"position_embedding_type\": \"absolute\"}");
  expect_import_error(dir, ESMT_ERR_UNSUPPORTED, "rotary");
  write_text(cj, "{not json");
  expect_import_error(dir, ESMT_ERR_FORMAT, "config.json");
  esmt_model_destroy(a);
}

/* Split an export's model.safetensors into two shards plus an index. */
static void test_sharded_and_extras(void **state) {
  (void)state;
  esmt_model *a = small(6), *b = NULL;
  const char *dir = path_in("sharded");
  assert_int_equal(esmt_model_export_hf(a, dir, 0), ESMT_OK);
  char one[700], s1[700], s2[700], idx[700];
  snprintf(one, sizeof one, "%s/model.safetensors", dir);
  snprintf(s1, sizeof s1, "%s/model-00001-of-00002.safetensors", dir);
  snprintf(s2, sizeof s2, "%s/model-00002-of-00002.safetensors", dir);
  snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
  esmt_st_file f;
  assert_int_equal(esmt_st_open(one, &f), ESMT_OK);
  char *json = malloc(1 << 16);
  size_t len = (size_t)snprintf(json, 1 << 16, "{\"metadata\": {}, \"weight_map\": {");
  for (int part = 0; part < 2; part++) {
    int n = 0;
    esmt_st_entry e[128];
    for (int i = part; i < f.count; i += 2) {
      const esmt_st_tensor *t = &f.tensors[i];
      e[n] = (esmt_st_entry){t->name, t->dtype, t->ndim, {t->shape[0], t->shape[1]}};
      n++;
      len += (size_t)snprintf(json + len, (1 << 16) - len, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                              len > 40 ? ", " : "", t->name, part + 1);
    }
    esmt_st_writer *w = NULL;
    assert_int_equal(esmt_st_writer_begin(part ? s2 : s1, e, n, NULL, 0, &w), ESMT_OK);
    for (int i = part; i < f.count; i += 2)
      assert_int_equal(esmt_st_writer_append(w, f.tensors[i].data, f.tensors[i].nbytes), ESMT_OK);
    assert_int_equal(esmt_st_writer_finish(w, NULL), ESMT_OK);
  }
  snprintf(json + len, (1 << 16) - len, "}}");
  esmt_st_close(&f);
  FILE *fi = fopen(idx, "w");
  fputs(json, fi);
  fclose(fi);
  free(json);
  unlink(one);
  if (esmt_model_import_hf(g_ctx, dir, &b) != ESMT_OK) fail_msg("%s", esmt_last_error());
  float x[32], y[32];
  esmt_model_read_tensor(a, "esm.encoder.layer.1.LayerNorm.bias", ESMT_BUF_PARAMS, x, 32);
  esmt_model_read_tensor(b, "esm.encoder.layer.1.LayerNorm.bias", ESMT_BUF_PARAMS, y, 32);
  assert_memory_equal(x, y, sizeof x);
  esmt_model_destroy(b);
  unlink(s2);
  expect_import_error(dir, ESMT_ERR_IO, "is missing");
  /* pickles are refused with the converter named */
  const char *pk = path_in("pickled");
  mkdir(pk, 0755);
  char p[700];
  snprintf(p, sizeof p, "%s/config.json", pk);
  write_text(p, "{\"model_type\": \"esm\", \"hidden_size\": 32, \"num_hidden_layers\": 2, "
                "\"num_attention_heads\": 2, \"intermediate_size\": 128, \"vocab_size\": 33}");
  snprintf(p, sizeof p, "%s/pytorch_model.bin", pk);
  write_text(p, "PK\x03\x04 pickle");
  expect_import_error(pk, ESMT_ERR_UNSUPPORTED, "convert_to_safetensors.py");
  expect_import_error(p, ESMT_ERR_UNSUPPORTED, "convert_to_safetensors.py");
  esmt_model_destroy(a);
}

static void test_unexpected_and_misshaped(void **state) {
  (void)state;
  esmt_model *a = small(7);
  const char *dir = path_in("extra");
  assert_int_equal(esmt_model_export_hf(a, dir, 0), ESMT_OK);
  char one[700];
  snprintf(one, sizeof one, "%s/model.safetensors", dir);
  /* rewrite with an extra tensor */
  esmt_st_file f;
  assert_int_equal(esmt_st_open(one, &f), ESMT_OK);
  esmt_st_entry e[128];
  int n = 0;
  for (int i = 0; i < f.count; i++, n++)
    e[n] = (esmt_st_entry){f.tensors[i].name, f.tensors[i].dtype, f.tensors[i].ndim,
                           {f.tensors[i].shape[0], f.tensors[i].shape[1]}};
  e[n++] = (esmt_st_entry){"esm.pooler.dense.weight", ESMT_ST_F32, 1, {4}};
  char tmp[700];
  snprintf(tmp, sizeof tmp, "%s/x.safetensors", g_dir);
  esmt_st_writer *w = NULL;
  assert_int_equal(esmt_st_writer_begin(tmp, e, n, NULL, 0, &w), ESMT_OK);
  for (int i = 0; i < f.count; i++) esmt_st_writer_append(w, f.tensors[i].data, f.tensors[i].nbytes);
  float four[4] = {0};
  esmt_st_writer_append(w, four, sizeof four);
  assert_int_equal(esmt_st_writer_finish(w, NULL), ESMT_OK);
  esmt_st_close(&f);
  rename(tmp, one);
  expect_import_error(dir, ESMT_ERR_FORMAT, "unexpected tensor 'esm.pooler.dense.weight'");
  /* a config that disagrees with the tensors: the shape error names the tensor */
  assert_int_equal(esmt_model_export_hf(a, dir, 1), ESMT_OK);
  char cj[700];
  snprintf(cj, sizeof cj, "%s/config.json", dir);
  write_text(cj, "{\"model_type\": \"esm\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": 2, \"intermediate_size\": 256, \"vocab_size\": 33}");
  expect_import_error(dir, ESMT_ERR_FORMAT, "esm.embeddings.word_embeddings.weight");
  esmt_model_destroy(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_exact), cmocka_unit_test(test_config_errors),
      cmocka_unit_test(test_sharded_and_extras), cmocka_unit_test(test_unexpected_and_misshaped),
  };
  return cmocka_run_group_tests(tests, cpu_dir_setup, cpu_dir_teardown);
}
