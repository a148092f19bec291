/* SPDX-License-Identifier: MIT */
/* TensorBoard event files (io/tfevents.c) and a run's metrics files
 * (train/metrics_sink.c): CRC-32C against its check value; every record
 * read back with its length and both masked CRCs checked and its Event
 * decoded by the generated protobuf-c code (file version, scalars' tags,
 * steps and values, a session start); metrics.jsonl trimmed to the step
 * a resume starts at, each step written once; clear errors. */
#define _GNU_SOURCE
#include "test_util.h"

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "metrics_sink.h"
#include "tensorboard_event.pb-c.h"
#include "tfevents.h"

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* The single event file in dir, read whole. */
static unsigned char *read_events(const char *dir, size_t *len, char *path, size_t cap) {
  char pat[512];
  snprintf(pat, sizeof pat, "%s/events.out.tfevents.*.esmtrain", dir);
  glob_t g;
  assert_int_equal(glob(pat, 0, NULL, &g), 0);
  assert_int_equal(g.gl_pathc, 1);
  snprintf(path, cap, "%s", g.gl_pathv[0]);
  globfree(&g);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  struct stat sb;
  assert_int_equal(fstat(fileno(f), &sb), 0);
  unsigned char *buf = malloc((size_t)sb.st_size + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)sb.st_size, f), (size_t)sb.st_size);
  fclose(f);
  *len = (size_t)sb.st_size;
  return buf;
}

/* Records of buf as decoded Events (checking the framing); their count. */
static int decode_records(const unsigned char *buf, size_t len, EsmtTb__Event **ev, int cap) {
  size_t off = 0;
  int n = 0;
  while (off < len) {
    assert_true(len - off >= 16);
    const uint64_t dlen = get_le(buf + off, 8);
    assert_int_equal(get_le(buf + off + 8, 4), esmt_tfrecord_masked_crc(buf + off, 8));
    assert_true(dlen <= len - off - 16);
    const unsigned char *data = buf + off + 12;
    assert_int_equal(get_le(data + dlen, 4), esmt_tfrecord_masked_crc(data, dlen));
    assert_true(n < cap);
    ev[n] = esmt_tb__event__unpack(NULL, dlen, data);
    assert_non_null(ev[n]);
    n++;
    off += 16 + dlen;
  }
  return n;
}

static void test_crc32c(void **state) {
  (void)state;
  /* the standard check value; ISA-L's convention (init, final xor) is ours to get right */
  assert_int_equal(esmt_crc32c("123456789", 9), 0xE3069283u);
  assert_int_equal(esmt_crc32c("", 0), 0u);
  /* 32 zero bytes: RFC 3720 B.4 */
  const unsigned char zeros[32] = {0};
  assert_int_equal(esmt_crc32c(zeros, 32), 0x8A9136AAu);
  const uint32_t c = esmt_crc32c("123456789", 9);
  assert_int_equal(esmt_tfrecord_masked_crc("123456789", 9),
                   (uint32_t)(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

static void test_records_read_back(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  esmt_tfevents *w = NULL;
  assert_int_equal(esmt_tfevents_open(dir, &w), ESMT_OK);
  assert_non_null(strstr(esmt_tfevents_path(w), "/events.out.tfevents."));
  assert_int_equal(esmt_tfevents_session_start(w, 3), ESMT_OK);
  for (int step = 3; step <= 5; step++) {
    const esmt_tfevents_scalar v[] = {{"train/loss", 2.5 / step}, {"train/lr", 1e-4 * step}};
    assert_int_equal(esmt_tfevents_scalars(w, step, v, 2), ESMT_OK);
  }
  /* a 0 is stored too (TensorBoard drops a value without simple_value) */
  const esmt_tfevents_scalar e[] = {{"eval/perplexity", 17.25}, {"train/skipped", 0}};
  assert_int_equal(esmt_tfevents_scalars(w, 5, e, 2), ESMT_OK);
  assert_int_equal(esmt_tfevents_flush(w), ESMT_OK);
  assert_int_equal(esmt_tfevents_close(w), ESMT_OK);

  size_t len = 0;
  char path[600];
  unsigned char *buf = read_events(dir, &len, path, sizeof path);
  EsmtTb__Event *ev[16];
  const int n = decode_records(buf, len, ev, 16);
  assert_int_equal(n, 6);
  assert_int_equal(ev[0]->what_case, ESMT_TB__EVENT__WHAT_FILE_VERSION);
  assert_string_equal(ev[0]->file_version, "brain.Event:2");
  assert_true(ev[0]->wall_time > 1.6e9); /* seconds since the epoch, not a monotonic clock */
  assert_int_equal(ev[1]->what_case, ESMT_TB__EVENT__WHAT_SESSION_LOG);
  assert_int_equal(ev[1]->session_log->status, ESMT_TB__SESSION_LOG__SESSION_STATUS__START);
  assert_int_equal(ev[1]->step, 3);
  for (int i = 2; i <= 4; i++) {
    const int step = i + 1;
    assert_int_equal(ev[i]->what_case, ESMT_TB__EVENT__WHAT_SUMMARY);
    assert_int_equal(ev[i]->step, step);
    assert_int_equal(ev[i]->summary->n_value, 2);
    assert_string_equal(ev[i]->summary->value[0]->tag, "train/loss");
    assert_int_equal(ev[i]->summary->value[0]->value_case,
                     ESMT_TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE);
    assert_float_equal(ev[i]->summary->value[0]->simple_value, (float)(2.5 / step), 0);
    assert_string_equal(ev[i]->summary->value[1]->tag, "train/lr");
    assert_float_equal(ev[i]->summary->value[1]->simple_value, (float)(1e-4 * step), 0);
  }
  assert_int_equal(ev[5]->step, 5);
  assert_string_equal(ev[5]->summary->value[0]->tag, "eval/perplexity");
  assert_float_equal(ev[5]->summary->value[0]->simple_value, 17.25f, 0);
  assert_string_equal(ev[5]->summary->value[1]->tag, "train/skipped");
  assert_int_equal(ev[5]->summary->value[1]->value_case,
                   ESMT_TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE);
  for (int i = 0; i < n; i++) esmt_tb__event__free_unpacked(ev[i], NULL);
  free(buf);
  test_rmtree(dir);
}

static void test_open_error(void **state) {
  (void)state;
  esmt_tfevents *w = (esmt_tfevents *)1;
  assert_int_equal(esmt_tfevents_open("/nonexistent-esmt-dir/run", &w), ESMT_ERR_IO);
  assert_null(w);
  assert_non_null(strstr(esmt_last_error(), "/nonexistent-esmt-dir/run/events.out.tfevents."));
  assert_non_null(strstr(esmt_last_error(), "No such file"));
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char *s = calloc(1, 1 << 16);
  assert_non_null(s);
  size_t n = fread(s, 1, (1 << 16) - 1, f);
  s[n] = '\0';
  fclose(f);
  return s;
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p++) n++;
  return n;
}

/* A run to step 4 (evaluated at 2 and 4), resumed at step 2: the jsonl
 * keeps steps 1-2 once each, a torn last line is dropped, an evaluation
 * at the resumed step is not repeated; the new event file starts a
 * session at step 3. */
static void test_sink_resume(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  char jsonl[600];
  snprintf(jsonl, sizeof jsonl, "%s/metrics.jsonl", dir);
  esmt_metrics_sink *s = NULL;
  assert_int_equal(esmt_metrics_sink_open(dir, 0, &s), ESMT_OK);
  esmt_eval_metrics em = ESMT_EVAL_METRICS_INIT;
  em.loss = 3.0;
  em.perplexity = 20.0;
  em.unigram_perplexity = 18.0;
  assert_int_equal(esmt_metrics_sink_eval(s, &em), ESMT_OK); /* step 0: before training */
  for (int step = 1; step <= 4; step++) {
    esmt_train_metrics tm = ESMT_TRAIN_METRICS_INIT;
    tm.step = step;
    tm.loss = step == 3 ? NAN : 3.0 - 0.1 * step; /* a skipped update's NaN: null */
    tm.lr = 1e-3;
    tm.loss_scale = 1;
    tm.eta_s = 4.0 - step;
    assert_int_equal(esmt_metrics_sink_train(s, &tm, 4), ESMT_OK);
    assert_int_equal(esmt_metrics_sink_train(s, &tm, 4), ESMT_OK); /* again: skipped */
    if (step % 2 == 0) {
      em.step = step;
      assert_int_equal(esmt_metrics_sink_eval(s, &em), ESMT_OK);
    }
  }
  assert_int_equal(esmt_metrics_sink_close(s), ESMT_OK);
  char *text = slurp(jsonl);
  assert_int_equal(count(text, "\"kind\":\"train\""), 4);
  assert_int_equal(count(text, "\"kind\":\"eval\""), 3);
  assert_int_equal(count(text, "\"loss\":null"), 1);
  assert_non_null(strstr(text, "\"rss_mib\":"));
  assert_int_equal(count(text, "\"max_steps\":4,"), 4);
  assert_non_null(strstr(text, "\"step\":1,\"max_steps\":4,"));
  assert_non_null(strstr(text, "\"eta_s\":3.0,"));
  assert_null(strstr(text, "device_")); /* no device figures (-1): none written */
  free(text);
  FILE *f = fopen(jsonl, "a"); /* a crash in the middle of a line */
  fputs("{\"kind\":\"train\",\"step\":5,\"lo", f);
  fclose(f);

  /* resume at step 2 (in a process whose event file name may repeat:
   * move the first file aside so that read_events sees the new one) */
  char path[600], moved[700];
  size_t len = 0;
  free(read_events(dir, &len, path, sizeof path));
  snprintf(moved, sizeof moved, "%s/old-events", dir);
  assert_int_equal(rename(path, moved), 0);
  assert_int_equal(esmt_metrics_sink_open(dir, 2, &s), ESMT_OK);
  em.step = 2;
  assert_int_equal(esmt_metrics_sink_eval(s, &em), ESMT_OK); /* kept already: not again */
  esmt_train_metrics tm = ESMT_TRAIN_METRICS_INIT;
  tm.step = 3;
  tm.loss = 2.0;
  tm.device_memory_used_mib = 1234.5; /* a GPU backend's figures */
  tm.device_memory_total_mib = 16384;
  tm.device_util_percent = 42;
  tm.device_temperature_c = 51;
  assert_int_equal(esmt_metrics_sink_train(s, &tm, 0), ESMT_OK);
  assert_int_equal(esmt_metrics_sink_close(s), ESMT_OK);
  text = slurp(jsonl);
  assert_int_equal(count(text, "\"kind\":\"train\""), 3); /* 1, 2 and the new 3 */
  assert_int_equal(count(text, "\"step\":3,"), 1);
  assert_int_equal(count(text, "\"step\":4,"), 0);
  assert_int_equal(count(text, "\"step\":5,"), 0);
  assert_int_equal(count(text, "\"kind\":\"eval\""), 2); /* 0 and 2 */
  assert_int_equal(text[strlen(text) - 1], '\n');
  assert_non_null(strstr(text, "\"step\":3,\"max_steps\":0,"));
  assert_non_null(strstr(text, "\"eta_s\":null,")); /* no length: no ETA */
  assert_non_null(strstr(text, "\"device_mem_mib\":1234.5,\"device_mem_total_mib\":16384.0,"
                                "\"device_util\":42.0,\"device_temp_c\":51.0}"));
  free(text);
  unsigned char *buf = read_events(dir, &len, path, sizeof path);
  EsmtTb__Event *ev[8];
  const int n = decode_records(buf, len, ev, 8);
  assert_int_equal(n, 3); /* version, session start, step 3 */
  assert_int_equal(ev[1]->what_case, ESMT_TB__EVENT__WHAT_SESSION_LOG);
  assert_int_equal(ev[1]->step, 3);
  assert_int_equal(ev[2]->step, 3);
  assert_int_equal(ev[2]->summary->n_value, 13); /* with the device's three */
  assert_string_equal(ev[2]->summary->value[10]->tag, "train/device_memory_mib");
  assert_float_equal(ev[2]->summary->value[11]->simple_value, 42.0f, 0);
  assert_string_equal(ev[2]->summary->value[12]->tag, "train/device_temperature_c");
  for (int i = 0; i < n; i++) esmt_tb__event__free_unpacked(ev[i], NULL);
  free(buf);
  test_rmtree(dir);
}

/* A run directory that cannot be written: the open says why, and the sink
 * stays usable (writes nothing, fails nothing more). */
static void test_sink_unwritable(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  char file[600];
  snprintf(file, sizeof file, "%s/not-a-dir", dir);
  FILE *f = fopen(file, "w");
  fclose(f);
  esmt_metrics_sink *s = NULL;
  assert_int_not_equal(esmt_metrics_sink_open(file, 0, &s), ESMT_OK);
  assert_non_null(strstr(esmt_last_error(), "not-a-dir"));
  assert_non_null(s);
  esmt_train_metrics tm = ESMT_TRAIN_METRICS_INIT;
  tm.step = 1;
  assert_int_equal(esmt_metrics_sink_train(s, &tm, 0), ESMT_OK);
  assert_int_equal(esmt_metrics_sink_close(s), ESMT_OK);
  test_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc32c),
      cmocka_unit_test(test_records_read_back),
      cmocka_unit_test(test_open_error),
      cmocka_unit_test(test_sink_resume),
      cmocka_unit_test(test_sink_unwritable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
