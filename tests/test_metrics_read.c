/* SPDX-License-Identifier: MIT */
/* esmt_metrics_reader (trainer.h): metrics.jsonl read whole, followed as
 * it grows (a partial last line waits), read again when replaced, and a
 * missing file an error only when it must exist. */
#define _POSIX_C_SOURCE 200809L
#include "esmtrain/esmtrain.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void append(const char *path, const char *text) {
  FILE *f = fopen(path, "a");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_follow(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  char path[1024], moved[1024];
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  esmt_metrics_reader *r = NULL;
  assert_int_equal(esmt_metrics_reader_open(path, &r), ESMT_OK);
  size_t added = 9;
  int reset = 9;
  assert_int_equal(esmt_metrics_reader_poll(r, 0, &added, &reset), ESMT_OK); /* not yet */
  assert_int_equal(added, 0);
  assert_int_equal(esmt_metrics_reader_poll(r, 1, &added, &reset), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "cannot read"));
  append(path, "{\"kind\":\"train\",\"step\":1,\"loss\":3.5,\"lr\":1e-4,\"tokens\":100}\n"
               "not json\n"
               "{\"kind\":\"eval\",\"step\":1,\"loss\":3.2,\"perplexity\":24.5}\n"
               "{\"kind\":\"train\",\"step\":2,\"loss\":3.");
  assert_int_equal(esmt_metrics_reader_poll(r, 1, &added, &reset), ESMT_OK);
  assert_int_equal(added, 2);
  assert_int_equal(reset, 0);
  esmt_metrics_view v = ESMT_METRICS_VIEW_INIT;
  assert_int_equal(esmt_metrics_reader_view(r, &v), ESMT_OK);
  assert_int_equal(v.n_train, 1);
  assert_int_equal(v.n_eval, 1);
  assert_int_equal(v.bad_lines, 1);
  assert_float_equal(v.train[0].loss, 3.5, 0);
  assert_true(isnan(v.train[0].grad_norm)); /* a field the line lacks */
  assert_float_equal(v.eval[0].tokens, 100, 0);  /* from the train line of its step */
  append(path, "1}\n");                          /* the partial line completed */
  assert_int_equal(esmt_metrics_reader_poll(r, 1, &added, &reset), ESMT_OK);
  assert_int_equal(added, 1);
  assert_int_equal(esmt_metrics_reader_view(r, &v), ESMT_OK);
  assert_int_equal(v.n_train, 2);
  assert_float_equal(v.train[1].loss, 3.1, 0);
  /* replaced by a longer file (a resume rewrites it): read again from the start */
  snprintf(moved, sizeof moved, "%s/new.jsonl", dir);
  for (int i = 0; i < 8; i++)
    append(moved, "{\"kind\":\"train\",\"step\":7,\"loss\":2.0,\"grad_norm\":0.5}\n");
  assert_int_equal(rename(moved, path), 0);
  assert_int_equal(esmt_metrics_reader_poll(r, 1, &added, &reset), ESMT_OK);
  assert_int_equal(reset, 1);
  assert_int_equal(esmt_metrics_reader_view(r, &v), ESMT_OK);
  assert_int_equal(v.n_train, 8);
  assert_int_equal(v.train[0].step, 7);
  assert_int_equal(v.n_eval, 0);
  esmt_metrics_reader_close(r);
  test_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_follow)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
