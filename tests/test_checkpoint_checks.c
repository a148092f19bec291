/* SPDX-License-Identifier: MIT */
/* Checkpoint, resume and HF import verification (issue #16): safetensors
 * byte ranges, state.json's file table and step, checkpoints/latest, HF
 * config.json integers, and the resume settings comparison. */
#define _GNU_SOURCE
#include "test_util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "esmtrain/esmtrain.h"
#include "hf_import.h"
#include "resume_check.h"
#include "safetensors.h"

#define g_dir test_tmpdir /* the group's temporary directory */

/* A safetensors file with this JSON header and `data` zero bytes. */
static const char *write_st(const char *name, const char *header, size_t data) {
  static char p[256];
  snprintf(p, sizeof p, "%s/%s", g_dir, name);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  uint64_t n = strlen(header);
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
  assert_int_equal(fwrite(len, 1, 8, f), 8);
  assert_int_equal(fwrite(header, 1, n, f), n);
  for (size_t i = 0; i < data; i++) fputc(0, f);
  assert_int_equal(fclose(f), 0);
  return p;
}

static void assert_refused(esmt_status st, esmt_status want, const char *fragment) {
  assert_int_equal(st, want);
  if (!strstr(esmt_last_error(), fragment)) fail_msg("'%s' lacks '%s'", esmt_last_error(), fragment);
}

static void st_expect(const char *header, size_t data, const char *fragment) {
  esmt_st_file f;
  assert_refused(esmt_st_open(write_st("t.safetensors", header, data), &f), ESMT_ERR_FORMAT,
                 fragment);
}

static void safetensors_valid_file_opens(void **state) {
  (void)state;
  esmt_st_file f;
  const char *p = write_st("ok.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                           "\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],"
                           "\"data_offsets\":[8,16]},\"e\":{\"dtype\":\"F32\",\"shape\":[0],"
                           "\"data_offsets\":[8,8]}}", 16);
  assert_int_equal(esmt_st_open(p, &f), ESMT_OK);
  assert_int_equal(f.count, 3);
  esmt_st_close(&f);
}

static void safetensors_overlap_is_refused(void **state) {
  (void)state;
  st_expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
            "\"bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16,
            "tensors 'w' (data_offsets [0, 16]) and 'bias' ([8, 16]) overlap");
  /* the same range twice */
  st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "overlap");
}

static void safetensors_bad_ranges_are_refused(void **state) {
  (void)state;
  st_expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[200],\"data_offsets\":[0,800]}}", 16,
            "data_offsets [0, 800] end past the 16 bytes");
  st_expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,8]}}", 16,
            "data_offsets [12, 8] end before they begin");
  st_expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 16,
            "two non-negative integers");
  st_expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 16,
            "shape needs 12 bytes (3 elements of 4) but data_offsets [0, 8] span 8");
  /* 2^40 x 2^40 elements would wrap to 0 bytes, matching [0, 0] */
  st_expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],"
            "\"data_offsets\":[0,0]}}", 16, "too many elements");
  st_expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16,
            "duplicate object key");
}

static void safetensors_hostile_header_length_is_refused(void **state) {
  (void)state;
  char p[256];
  snprintf(p, sizeof p, "%s/hlen.safetensors", g_dir);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  fwrite("\xff\xff\xff\xff\xff\xff\xff\x7f{}      ", 1, 16, f);
  fclose(f);
  esmt_st_file st;
  assert_refused(esmt_st_open(p, &st), ESMT_ERR_FORMAT, "is over the 100 MiB limit");
}

/* state.json as esmt_checkpoint_save writes it, with `files` and `step`. */
static json_t *state_json(const char *files, int step, int trainer_step) {
  char text[1024];
  snprintf(text, sizeof text, "{\"format\":\"esmtrain-checkpoint\",\"version\":1,\"step\":%d,"
           "\"files\":%s,\"trainer\":{\"step\":%d}}", step, files, trainer_step);
  json_t *j = json_loads(text, 0, NULL);
  assert_non_null(j);
  return j;
}

#define BOTH "{\"model.safetensors\":{\"crc32\":1,\"bytes\":2},\"optimizer.safetensors\":" \
             "{\"crc32\":3,\"bytes\":4}}"

static void state_check(json_t *j, const char *dir, esmt_status want, const char *fragment) {
  esmt_status st = esmt_checkpoint_check_state(j, dir);
  json_decref(j);
  if (want == ESMT_OK) assert_int_equal(st, ESMT_OK);
  else assert_refused(st, want, fragment);
}

static void state_file_table_must_cover_the_files(void **state) {
  (void)state;
  state_check(state_json(BOTH, 3, 3), "/r/checkpoints/step-00000003", ESMT_OK, NULL);
  state_check(state_json("{}", 3, 3), "/r/checkpoints/step-00000003", ESMT_ERR_FORMAT,
              "is empty, it lacks model.safetensors");
  state_check(state_json("{\"model.safetensors\":{\"crc32\":1,\"bytes\":2}}", 3, 3),
              "/r/checkpoints/step-00000003", ESMT_ERR_FORMAT,
              "does not list optimizer.safetensors");
  state_check(state_json("{\"model.safetensors\":{\"crc32\":1},\"optimizer.safetensors\":"
                    "{\"crc32\":3,\"bytes\":4}}", 3, 3), "/r/checkpoints/step-00000003",
              ESMT_ERR_FORMAT, "the 'files' entry of model.safetensors needs 'bytes'");
  state_check(state_json("{\"model.safetensors\":{\"crc32\":1,\"bytes\":2},\"optimizer.safetensors\":"
                    "{\"crc32\":3,\"bytes\":4},\"../x\":{\"crc32\":1,\"bytes\":1}}", 3, 3),
              "/r/checkpoints/step-00000003", ESMT_ERR_FORMAT, "names '../x'");
}

static void state_step_must_match_the_directory(void **state) {
  (void)state;
  state_check(state_json(BOTH, 3, 3), "/r/checkpoints/step-00000005", ESMT_ERR_FORMAT,
              "records step 3 but its directory is step-00000005 (step 5)");
  state_check(state_json(BOTH, 3, 4), "/r/checkpoints/step-00000003", ESMT_ERR_FORMAT,
              "its trainer state step differs");
  /* a copy under a name of the user's is not checked against its name */
  state_check(state_json(BOTH, 3, 3), "/backup/my-copy", ESMT_OK, NULL);
}

static void make_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void latest_problems_name_the_checkpoints_present(void **state) {
  (void)state;
  char ck[256], p[512], out[512];
  snprintf(ck, sizeof ck, "%s/run/checkpoints", g_dir);
  snprintf(p, sizeof p, "mkdir -p %s/step-00000002 %s/step-00000004", ck, ck);
  assert_int_equal(system(p), 0);
  snprintf(p, sizeof p, "%s/step-00000002/state.json", ck);
  make_file(p, "{}");
  snprintf(p, sizeof p, "%s/step-00000004/state.json", ck);
  make_file(p, "{}");
  snprintf(p, sizeof p, "%s/latest", ck);
  char run[256];
  snprintf(run, sizeof run, "%s/run", g_dir);

  make_file(p, "step-00000004");
  assert_int_equal(esmt_checkpoint_resolve(run, out, sizeof out), ESMT_OK);
  assert_non_null(strstr(out, "checkpoints/step-00000004"));

  make_file(p, "");
  assert_refused(esmt_checkpoint_resolve(run, out, sizeof out), ESMT_ERR_FORMAT, "latest is empty");
  assert_non_null(strstr(esmt_last_error(), "step-00000002, step-00000004"));
  assert_non_null(strstr(esmt_last_error(), "checkpoints/step-00000004 (the newest)"));

  make_file(p, "\x01../../etc\n");
  assert_refused(esmt_checkpoint_resolve(run, out, sizeof out), ESMT_ERR_FORMAT,
                 "does not name a checkpoint: it holds '?../../etc'");

  make_file(p, "step-00000009\n");
  assert_refused(esmt_checkpoint_resolve(run, out, sizeof out), ESMT_ERR_IO,
                 "names checkpoint 'step-00000009', which does not exist");

  unlink(p);
  assert_int_equal(mkfifo(p, 0600), 0);
  assert_refused(esmt_checkpoint_resolve(run, out, sizeof out), ESMT_ERR_FORMAT,
                 "is a FIFO (named pipe)");
  unlink(p);
}

static void hf_config(const char *fields, esmt_status want, const char *fragment) {
  char text[1024];
  snprintf(text, sizeof text, "{\"model_type\":\"esm\",%s}", fields);
  esmt_model_config mc;
  esmt_status st = esmt_hf_config_parse(text, strlen(text), "config.json", &mc);
  if (want == ESMT_OK) assert_int_equal(st, ESMT_OK);
  else assert_refused(st, want, fragment);
}

#define HF_REST "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"intermediate_size\":64," \
                "\"vocab_size\":33"

static void hf_config_integers_are_range_checked(void **state) {
  (void)state;
  hf_config("\"hidden_size\":16," HF_REST, ESMT_OK, NULL);
  hf_config("\"hidden_size\":4294967312," HF_REST, ESMT_ERR_FORMAT,
            "field 'hidden_size' is 4294967312, outside the range esmtrain supports (2 to 65536)");
  hf_config("\"hidden_size\":16,\"max_position_embeddings\":2147483648," HF_REST, ESMT_ERR_FORMAT,
            "field 'max_position_embeddings' is 2147483648, outside");
  hf_config("\"hidden_size\":1.5," HF_REST, ESMT_ERR_FORMAT, "field 'hidden_size' is 1.5, not an integer");
  hf_config("\"hidden_size\":\"16\"," HF_REST, ESMT_ERR_FORMAT, "is \"16\", not an integer");
  hf_config("\"hidden_size\":true," HF_REST, ESMT_ERR_FORMAT, "is true, not an integer");
  hf_config(HF_REST, ESMT_ERR_FORMAT, "field 'hidden_size' is missing");
}

/* The YAML `train` writes into state.json for these settings. */
static char *config_yaml(const char *const *sets, int n) {
  esmt_config *c = NULL;
  assert_int_equal(esmt_config_create(&c), ESMT_OK);
  for (int i = 0; i < n; i++) assert_int_equal(esmt_config_set_assignment(c, sets[i]), ESMT_OK);
  char *y = NULL;
  assert_int_equal(esmt_config_to_yaml(c, &y), ESMT_OK);
  esmt_config_destroy(c);
  return y;
}

static esmt_status compare(const char *const *was_sets, int nw, const char *const *now_sets,
                           int nn, int world_was, int world_now, json_t *changes) {
  char *a = config_yaml(was_sets, nw), *b = config_yaml(now_sets, nn);
  esmt_resume_run was = {a, world_was, -1}, now = {b, world_now, -1};
  esmt_logger lg;
  memset(&lg, 0, sizeof lg);
  lg.min_level = ESMT_LOG_NONE;
  esmt_status st = esmt_resume_check(&was, &now, "/r/checkpoints/step-00000010", 10, &lg, changes);
  free(a);
  free(b);
  return st;
}

static void resume_refuses_changes_that_break_exactness(void **state) {
  (void)state;
  const char *was[] = {"optimizer.lr=4e-4", "train.max_steps=100"};
  const char *now[] = {"optimizer.lr=0.001", "train.max_steps=100", "data.tokens_per_batch=2048",
                       "schedule.kind=cosine"};
  json_t *changes = json_array();
  assert_refused(compare(was, 2, now, 4, 1, 1, changes), ESMT_ERR_CONFIG,
                 "resuming with 3 changed settings");
  assert_non_null(strstr(esmt_last_error(), "optimizer.lr: 0.0004 -> 0.001"));
  assert_non_null(strstr(esmt_last_error(), "data.tokens_per_batch: 4096 -> 2048"));
  assert_non_null(strstr(esmt_last_error(), "schedule.kind: esm2 -> cosine"));
  assert_non_null(strstr(esmt_last_error(), "--init-from /r/checkpoints/step-00000010"));
  assert_int_equal(json_array_size(changes), 0); /* nothing recorded when refused */
  /* the same value written differently is no change */
  const char *same[] = {"optimizer.lr=0.0004", "train.max_steps=100"};
  assert_int_equal(compare(was, 2, same, 2, 1, 1, changes), ESMT_OK);
  assert_int_equal(json_array_size(changes), 0);
  json_decref(changes);
}

static void resume_warns_and_records_allowed_changes(void **state) {
  (void)state;
  const char *was[] = {"train.max_steps=100", "backend.threads=4"};
  const char *now[] = {"train.max_steps=200", "backend.threads=2", "train.eval_every=50"};
  json_t *changes = json_array();
  assert_int_equal(compare(was, 2, now, 3, 1, 1, changes), ESMT_OK);
  assert_int_equal(json_array_size(changes), 3);
  json_t *e = json_array_get(changes, 0);
  assert_string_equal(json_string_value(json_object_get(e, "key")), "train.max_steps");
  assert_string_equal(json_string_value(json_object_get(e, "old")), "100");
  assert_string_equal(json_string_value(json_object_get(e, "new")), "200");
  assert_int_equal(json_integer_value(json_object_get(e, "step")), 10);
  json_decref(changes);
}

static void resume_world_size_needs_a_global_token_budget(void **state) {
  (void)state;
  const char *plain[] = {"train.max_steps=100"};
  json_t *changes = json_array();
  assert_refused(compare(plain, 1, plain, 1, 2, 1, changes), ESMT_ERR_CONFIG,
                 "world_size: 2 -> 1 (with train.tokens_per_update 0");
  const char *budget[] = {"train.tokens_per_update=8192"};
  assert_int_equal(compare(budget, 1, budget, 1, 2, 4, changes), ESMT_OK);
  assert_int_equal(json_array_size(changes), 1);
  assert_string_equal(json_string_value(json_object_get(json_array_get(changes, 0), "key")),
                      "world_size");
  /* the reason is recorded with it: the ranks share one batch order */
  const char *why = json_string_value(json_object_get(json_array_get(changes, 0), "reason"));
  assert_non_null(why);
  assert_non_null(strstr(why, "no batch seen twice or skipped"));
  /* an old checkpoint without a recorded world size is not compared */
  assert_int_equal(compare(plain, 1, plain, 1, 0, 3, NULL), ESMT_OK);
  json_decref(changes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(safetensors_valid_file_opens),
      cmocka_unit_test(safetensors_overlap_is_refused),
      cmocka_unit_test(safetensors_bad_ranges_are_refused),
      cmocka_unit_test(safetensors_hostile_header_length_is_refused),
      cmocka_unit_test(state_file_table_must_cover_the_files),
      cmocka_unit_test(state_step_must_match_the_directory),
      cmocka_unit_test(latest_problems_name_the_checkpoints_present),
      cmocka_unit_test(hf_config_integers_are_range_checked),
      cmocka_unit_test(resume_refuses_changes_that_break_exactness),
      cmocka_unit_test(resume_warns_and_records_allowed_changes),
      cmocka_unit_test(resume_world_size_needs_a_global_token_budget),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
