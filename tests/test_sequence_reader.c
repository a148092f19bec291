/* SPDX-License-Identifier: MIT */
/* esmt_sequence_reader: FASTA (plain and gzip) and an ingested dataset,
 * read one protein at a time as token ids; letters outside the alphabet
 * become <unk> and are counted; other characters are refused with the
 * file, line and record; misuse is refused. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "esmtrain/esmtrain.h"

#define ASSERT_OK(expr)                                              \
  do {                                                               \
    esmt_status st_ = (expr);                                        \
    if (st_ != ESMT_OK) fail_msg("%s: %s", #expr, esmt_last_error()); \
  } while (0)

static const char *k_fasta = ">p1 first protein\nMKTa\nyX*\n>p2\n\n>p3\nAC-.\n";

static void write_text(const char *path, const char *text, int gz) {
  if (gz) {
    gzFile g = gzopen(path, "wb");
    assert_non_null(g);
    assert_int_equal(gzputs(g, text), (int)strlen(text));
    gzclose(g);
    return;
  }
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void reads(const char *path) {
  esmt_sequence_reader *r = NULL;
  ASSERT_OK(esmt_sequence_reader_open(path, NULL, &r));
  esmt_sequence s = ESMT_SEQUENCE_INIT;
  int got = 0;
  ASSERT_OK(esmt_sequence_reader_next(r, &s, &got));
  assert_int_equal(got, 1);
  assert_string_equal(s.id, "p1");
  assert_int_equal(s.length, 7);
  const char *letters = "MKTAY";
  for (int i = 0; i < 5; i++) assert_int_equal(s.tokens[i], esmt_token_id(letters[i]));
  assert_int_equal(s.tokens[5], esmt_token_id('X')); /* X is in the alphabet */
  assert_int_equal(s.tokens[6], ESMT_TOKEN_UNK);     /* '*' is not */
  assert_int_equal(s.unknown, 1);
  assert_int_equal(s.index, 0);
  ASSERT_OK(esmt_sequence_reader_next(r, &s, &got));
  assert_int_equal(got, 1);
  assert_string_equal(s.id, "p2");
  assert_int_equal(s.length, 0);
  ASSERT_OK(esmt_sequence_reader_next(r, &s, &got));
  assert_string_equal(s.id, "p3");
  assert_int_equal(s.length, 4);
  assert_int_equal(s.tokens[2], 30); /* '-' */
  assert_int_equal(s.tokens[3], 29); /* '.' */
  assert_int_equal(s.index, 2);
  uint64_t done = 0, total = 0;
  ASSERT_OK(esmt_sequence_reader_position(r, &done, &total));
  assert_true(total > 0 && done <= total);
  ASSERT_OK(esmt_sequence_reader_next(r, &s, &got));
  assert_int_equal(got, 0);
  esmt_sequence_reader_close(r);
}

static void fasta_plain_and_gzip(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/a.fasta", test_tmpdir);
  write_text(path, k_fasta, 0);
  reads(path);
  snprintf(path, sizeof path, "%s/a.fasta.gz", test_tmpdir);
  write_text(path, k_fasta, 1);
  reads(path);
}

static void bad_character_named(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/bad.fasta", test_tmpdir);
  write_text(path, ">ok\nMK\n>broken\nMK7L\n", 0);
  esmt_sequence_reader *r = NULL;
  ASSERT_OK(esmt_sequence_reader_open(path, NULL, &r));
  esmt_sequence s = ESMT_SEQUENCE_INIT;
  int got = 0;
  ASSERT_OK(esmt_sequence_reader_next(r, &s, &got));
  assert_int_equal(esmt_sequence_reader_next(r, &s, &got), ESMT_ERR_FORMAT);
  assert_int_equal(got, 0);
  assert_non_null(strstr(esmt_last_error(), "'broken' (line 3)"));
  assert_non_null(strstr(esmt_last_error(), "'7'"));
  esmt_sequence_reader_close(r);
}

static void dataset_split(void **state) {
  (void)state;
  char in[512], out[512];
  snprintf(in, sizeof in, "%s/d.fasta", test_tmpdir);
  snprintf(out, sizeof out, "%s/ds", test_tmpdir);
  write_text(in, ">a\nMKTAYIAK\n>b\nLLGG\n>c\nACDEFGHIK\n", 0);
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  const char *inputs[] = {in};
  o.inputs = inputs;
  o.n_inputs = 1;
  o.output_dir = out;
  o.valid_fraction = 0;
  esmt_ingest_stats st = ESMT_INGEST_STATS_INIT;
  ASSERT_OK(esmt_ingest(&o, &st));
  esmt_sequence_reader *r = NULL;
  ASSERT_OK(esmt_sequence_reader_open(out, "train", &r));
  esmt_sequence s = ESMT_SEQUENCE_INIT;
  int got = 0, n = 0;
  uint64_t residues = 0;
  for (;;) {
    ASSERT_OK(esmt_sequence_reader_next(r, &s, &got));
    if (!got) break;
    char want[32];
    snprintf(want, sizeof want, "train:%d", n);
    assert_string_equal(s.id, want);
    residues += s.length;
    n++;
  }
  assert_int_equal(n, 3);
  assert_int_equal(residues, 8 + 4 + 9);
  uint64_t done = 0, total = 0;
  ASSERT_OK(esmt_sequence_reader_position(r, &done, &total));
  assert_int_equal(done, 3);
  assert_int_equal(total, 3);
  esmt_sequence_reader_close(r);
  /* the valid split is empty: refused with a message */
  assert_int_equal(esmt_sequence_reader_open(out, "valid", &r), ESMT_ERR_FORMAT);
  assert_null(r);
  assert_non_null(strstr(esmt_last_error(), "empty"));
}

static void misuse_refused(void **state) {
  (void)state;
  esmt_sequence_reader *r = NULL;
  assert_int_equal(esmt_sequence_reader_open(NULL, NULL, &r), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_sequence_reader_open("x", "test", &r), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "train or valid"));
  char path[512];
  snprintf(path, sizeof path, "%s/missing.fasta", test_tmpdir);
  assert_int_not_equal(esmt_sequence_reader_open(path, NULL, &r), ESMT_OK);
  assert_null(r);
  snprintf(path, sizeof path, "%s/a.fasta", test_tmpdir);
  write_text(path, k_fasta, 0);
  ASSERT_OK(esmt_sequence_reader_open(path, NULL, &r));
  esmt_sequence s = ESMT_SEQUENCE_INIT;
  s.struct_size = 4;
  int got = 0;
  assert_int_equal(esmt_sequence_reader_next(r, &s, &got), ESMT_ERR_ABI);
  esmt_sequence_reader_close(r);
  esmt_sequence_reader_close(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fasta_plain_and_gzip),
      cmocka_unit_test(bad_character_named),
      cmocka_unit_test(dataset_split),
      cmocka_unit_test(misuse_refused),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
