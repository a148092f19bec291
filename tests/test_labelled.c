/* SPDX-License-Identifier: MIT */
/* esmt_labelled_read and esmt_labelled_loader (finetune.h): labels of each
 * task read from CSV/TSV, the three ways to split, the batches a split
 * yields (targets, per-residue labels, order, cursor), and every bad input
 * refused with the file, line and column named. */
#define _POSIX_C_SOURCE 200809L
#include "esmtrain/esmtrain.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *write_file(const char *name, const char *text) {
  static char path[4][512];
  static int slot;
  char *p = path[slot++ % 4];
  snprintf(p, 512, "%s/%s", test_tmpdir, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return p;
}

static esmt_labelled *read_ok(esmt_labelled_options *o) {
  esmt_labelled *d = NULL;
  const esmt_status st = esmt_labelled_read(o, &d);
  if (st) fprintf(stderr, "%s\n", esmt_last_error());
  assert_int_equal(st, ESMT_OK);
  return d;
}

static void read_fails(esmt_labelled_options *o, const char *needle) {
  esmt_labelled *d = (esmt_labelled *)1;
  assert_int_not_equal(esmt_labelled_read(o, &d), ESMT_OK);
  assert_null(d);
  if (!strstr(esmt_last_error(), needle))
    fail_msg("\"%s\" lacks \"%s\"", esmt_last_error(), needle);
}

static esmt_batch next_batch(esmt_batch_source *s) {
  esmt_batch b = ESMT_BATCH_INIT;
  assert_int_equal(s->next(s->user, &b), ESMT_OK);
  return b;
}

static void test_seq_class_split_column(void **state) {
  (void)state;
  esmt_labelled_options o = ESMT_LABELLED_OPTIONS_INIT;
  o.path = write_file("cls.csv", "id,sequence,label,split\n"
                                 "a,MKV,membrane,train\n"
                                 "b,MKVLA,cytoplasm,train\n"
                                 "c,AC,membrane,valid\n"
                                 "d,ACDE,cytoplasm,TEST\n");
  o.split_column = "split";
  esmt_labelled *d = read_ok(&o);
  assert_int_equal(esmt_labelled_count(d, ESMT_LABELLED_TRAIN), 2);
  assert_int_equal(esmt_labelled_count(d, ESMT_LABELLED_VALID), 1);
  assert_int_equal(esmt_labelled_count(d, ESMT_LABELLED_TEST), 1);
  assert_int_equal(esmt_labelled_num_labels(d), 2); /* sorted: cytoplasm 0, membrane 1 */
  assert_string_equal(esmt_labelled_label_name(d, 0), "cytoplasm");
  assert_string_equal(esmt_labelled_label_name(d, 1), "membrane");
  char json[64];
  assert_int_equal(esmt_labelled_label_json(d, json, sizeof json), ESMT_OK);
  assert_string_equal(json, "[\"cytoplasm\",\"membrane\"]");
  assert_int_equal(esmt_labelled_label_json(d, json, 8), ESMT_ERR_INVALID_ARGUMENT);

  esmt_labelled_loader *L = NULL;
  assert_int_equal(esmt_labelled_loader_create(d, ESMT_LABELLED_TRAIN, 8, 0, 1, 1, &L), ESMT_OK);
  esmt_batch_source s = ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_labelled_loader_as_source(L, &s), ESMT_OK);
  esmt_batch b = next_batch(&s);
  assert_int_equal(b.batch, 2);
  assert_int_equal(b.seq_len, 7); /* <cls> MKVLA <eos> */
  assert_null(b.labels);
  assert_float_equal(b.targets[0], 1.0, 0); /* a: membrane */
  assert_float_equal(b.targets[1], 0.0, 0);
  const int32_t row0[7] = {ESMT_TOKEN_CLS, esmt_token_id('M'), esmt_token_id('K'),
                           esmt_token_id('V'), ESMT_TOKEN_EOS, ESMT_TOKEN_PAD, ESMT_TOKEN_PAD};
  assert_memory_equal(b.tokens, row0, sizeof row0);
  assert_int_equal(s.next(s.user, &b), ESMT_ERR_STATE); /* one epoch */
  esmt_labelled_loader_destroy(L);
  esmt_labelled_free(d);
}

static void test_residue_labels(void **state) {
  (void)state;
  esmt_labelled_options o = ESMT_LABELLED_OPTIONS_INIT;
  o.task = ESMT_HEAD_RESIDUE_CLASS;
  o.path = write_file("res.tsv", "sequence\tlabel\tsplit\n"
                                 "MKVL\tHH-E\ttrain\n"
                                 "ACD\tE.C\tvalid\n"
                                 "AC\tCH\ttrain\n");
  o.split_column = "split";
  o.max_len = 5; /* MKVL cropped to MKV, its labels with it */
  esmt_labelled *d = read_ok(&o);
  assert_int_equal(esmt_labelled_num_labels(d), 3); /* C E H */
  esmt_labelled_loader *L = NULL;
  assert_int_equal(esmt_labelled_loader_create(d, ESMT_LABELLED_TRAIN, 2, 0, 1, 1, &L), ESMT_OK);
  esmt_batch_source s = ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_labelled_loader_as_source(L, &s), ESMT_OK);
  esmt_batch b = next_batch(&s);
  assert_int_equal(b.seq_len, 5);
  assert_null(b.targets);
  const int32_t I = ESMT_LABEL_IGNORE;
  const int32_t want[10] = {I, 2, 2, I, I, /* MKV: H H -, then <eos> */
                            I, 0, 2, I, I}; /* AC: C H, <eos>, <pad> */
  assert_memory_equal(b.labels, want, sizeof want);
  esmt_labelled_loader_destroy(L);
  esmt_labelled_free(d);

  /* a list with a separator, and the wrong length named */
  o.path = write_file("res_list.csv", "sequence,label\nMKV,bind;-;none\nACD,none;none\n");
  o.label_separator = ";";
  o.split_column = NULL;
  o.valid_fraction = 0;
  read_fails(&o, "res_list.csv: line 3: column 'label': 2 labels for 3 residues");
  o.path = write_file("res_short.csv", "sequence,label\nMKV,HHE\nACD,HE\n");
  o.label_separator = NULL;
  read_fails(&o, "res_short.csv: line 3: column 'label': 2 labels for 3 residues");
}

static void test_multilabel_and_regression(void **state) {
  (void)state;
  esmt_labelled_options o = ESMT_LABELLED_OPTIONS_INIT;
  o.task = ESMT_HEAD_MULTILABEL;
  o.valid_fraction = 0;
  o.label_separator = "|";
  o.path = write_file("ml.csv", "sequence,label\nMKV,nucleus|membrane\nACD,\nAAA,nucleus\n");
  esmt_labelled *d = read_ok(&o);
  assert_int_equal(esmt_labelled_num_labels(d), 2); /* membrane, nucleus */
  esmt_labelled_loader *L = NULL;
  assert_int_equal(esmt_labelled_loader_create(d, ESMT_LABELLED_TRAIN, 3, 0, 1, 1, &L), ESMT_OK);
  esmt_batch_source s = ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_labelled_loader_as_source(L, &s), ESMT_OK);
  esmt_batch b = next_batch(&s);
  const float want[6] = {1, 1, 0, 0, 0, 1};
  assert_memory_equal(b.targets, want, sizeof want);
  esmt_labelled_loader_destroy(L);
  esmt_labelled_free(d);

  const char *cols[2] = {"a", "b"};
  o.label_columns = cols;
  o.n_label_columns = 2;
  o.label_separator = NULL;
  o.path = write_file("ml01.csv", "sequence,a,b\nMKV,1,0\nACD,0,yes\n");
  read_fails(&o, "ml01.csv: line 3: column 'b': not 0 or 1: yes");

  o.task = ESMT_HEAD_REGRESSION;
  o.path = write_file("reg.csv", "sequence,a,b\nMKV,1.5,-2\nACD,0.25,3e1\n");
  d = read_ok(&o);
  assert_int_equal(esmt_labelled_num_labels(d), 2);
  assert_string_equal(esmt_labelled_label_name(d, 1), "b");
  assert_int_equal(esmt_labelled_loader_create(d, ESMT_LABELLED_TRAIN, 2, 0, 1, 1, &L), ESMT_OK);
  assert_int_equal(esmt_labelled_loader_as_source(L, &s), ESMT_OK);
  b = next_batch(&s);
  const float want_reg[4] = {1.5f, -2.0f, 0.25f, 30.0f};
  assert_memory_equal(b.targets, want_reg, sizeof want_reg);
  esmt_labelled_loader_destroy(L);
  esmt_labelled_free(d);
  o.path = write_file("reg_bad.csv", "sequence,a,b\nMKV,1.5,-2\nACD,0.25,high\n");
  read_fails(&o, "reg_bad.csv: line 3: column 'b': not a finite number: high");
  o.path = write_file("reg_missing.csv", "sequence,a,b\nMKV,1.5,\n");
  read_fails(&o, "reg_missing.csv: line 2: column 'b': the label is missing");
  o.path = write_file("reg_nocol.csv", "sequence,a,c\nMKV,1.5,2\n");
  read_fails(&o, "reg_nocol.csv: the header has no column 'b'");
}

static void test_bad_rows(void **state) {
  (void)state;
  esmt_labelled_options o = ESMT_LABELLED_OPTIONS_INIT;
  o.split_column = "split";
  o.path = write_file("unseen.csv", "sequence,label,split\nMKV,a,train\nMKA,b,train\n"
                                    "ACD,c,valid\n");
  read_fails(&o, "unseen.csv: line 4: column 'label': class 'c' (a validation row) is in no "
                 "training row");
  o.path = write_file("badseq.csv", "sequence,label,split\nMKV,a,train\nMK1,b,train\n");
  read_fails(&o, "badseq.csv: line 3: column 'sequence': character 3 (byte 0x31) is not an "
                 "amino-acid letter");
  o.path = write_file("badsplit.csv", "sequence,label,split\nMKV,a,train\nMKA,b,dev\n");
  read_fails(&o, "badsplit.csv: line 3: column 'split': not a split (train, valid or test): dev");
  o.path = write_file("oneclass.csv", "sequence,label,split\nMKV,a,train\nMKA,a,train\n");
  read_fails(&o, "training rows hold 1 class");
  o.path = write_file("nolabel.csv", "sequence,label,split\nMKV,a,train\nMKA,,train\n");
  read_fails(&o, "nolabel.csv: line 3: column 'label': the label is missing");
}

/* Rows of each split whose protein is MKVLAA, and a signature of the
 * validation split's proteins. */
static void split_census(const esmt_labelled *d, uint64_t dup[3], uint64_t *valid_sig) {
  const int32_t mk[8] = {ESMT_TOKEN_CLS, esmt_token_id('M'), esmt_token_id('K'),
                         esmt_token_id('V'), esmt_token_id('L'), esmt_token_id('A'),
                         esmt_token_id('A'), ESMT_TOKEN_EOS};
  *valid_sig = 0;
  for (int split = 0; split < 3; split++) {
    dup[split] = 0;
    esmt_labelled_loader *L = NULL;
    assert_int_equal(esmt_labelled_loader_create(d, (esmt_labelled_split)split, 16, 0, 1, 1, &L),
                     ESMT_OK);
    esmt_batch_source s = ESMT_BATCH_SOURCE_INIT;
    assert_int_equal(esmt_labelled_loader_as_source(L, &s), ESMT_OK);
    esmt_batch b = ESMT_BATCH_INIT;
    while (s.next(s.user, &b) == ESMT_OK)
      for (int r = 0; r < b.batch; r++) {
        const int32_t *t = b.tokens + (size_t)r * b.seq_len;
        dup[split] += !memcmp(t, mk, sizeof mk);
        for (int k = 0; split == 1 && k < b.seq_len; k++) *valid_sig = *valid_sig * 31 + (uint64_t)t[k];
      }
    esmt_labelled_loader_destroy(L);
  }
}

/* The fraction split: a function of the residues and the seed. */
static void test_fraction_and_cluster_split(void **state) {
  (void)state;
  char text[1 << 15] = "id,sequence,label\n";
  static const char aa[] = "ACDEFGHIKLMNPQRSTVWY";
  for (int i = 0; i < 400; i++) {
    char seq[8];
    for (int k = 0; k < 6; k++) seq[k] = aa[(i * 7 + k * 13 + (i / 20) * k) % 20];
    seq[6] = 0;
    /* row 2i+1 repeats row 2i's protein under another id */
    snprintf(text + strlen(text), sizeof text - strlen(text), "p%d,%s,%c\n", i, i % 2 ? "MKVLAA" : seq,
             "ab"[i % 2]);
  }
  esmt_labelled_options o = ESMT_LABELLED_OPTIONS_INIT;
  o.path = write_file("frac.csv", text);
  o.valid_fraction = 0.25;
  o.test_fraction = 0.25;
  esmt_labelled *d = read_ok(&o);
  assert_int_equal(esmt_labelled_count(d, ESMT_LABELLED_TRAIN) +
                       esmt_labelled_count(d, ESMT_LABELLED_VALID) +
                       esmt_labelled_count(d, ESMT_LABELLED_TEST), 400);
  assert_true(esmt_labelled_count(d, ESMT_LABELLED_VALID) > 20);
  assert_true(esmt_labelled_count(d, ESMT_LABELLED_TEST) > 20);
  uint64_t dup[3], sig1, sig2, sig1_again;
  split_census(d, dup, &sig1);
  /* the 200 copies of MKVLAA go together, to one split */
  assert_int_equal(dup[0] + dup[1] + dup[2], 200);
  assert_true(dup[0] == 200 || dup[1] == 200 || dup[2] == 200);
  esmt_labelled_free(d);
  o.seed = 2; /* another seed draws another split */
  d = read_ok(&o);
  split_census(d, dup, &sig2);
  esmt_labelled_free(d);
  o.seed = 1; /* the same seed the same one */
  d = read_ok(&o);
  split_census(d, dup, &sig1_again);
  esmt_labelled_free(d);
  assert_true(sig1 != sig2);
  assert_true(sig1 == sig1_again);

  /* clusters: every member of a cluster in the split of its representative */
  char clusters[1 << 14] = "";
  for (int i = 0; i < 400; i++)
    snprintf(clusters + strlen(clusters), sizeof clusters - strlen(clusters), "p%d\tp%d\n",
             i - i % 10, i);
  o.clusters = write_file("clu.tsv", clusters);
  o.test_fraction = 0;
  o.valid_fraction = 0.3;
  d = read_ok(&o);
  assert_int_equal(esmt_labelled_count(d, ESMT_LABELLED_VALID) % 10, 0);
  assert_true(esmt_labelled_count(d, ESMT_LABELLED_VALID) > 0);
  esmt_labelled_free(d);
  o.path = write_file("noid.csv", "sequence,label\nMKV,a\n");
  read_fails(&o, "noid.csv: a split by clusters needs the proteins' ids");
}

/* Shuffled epochs: a seeded order, restored by the cursor; the eval pass. */
static void test_loader_order_and_cursor(void **state) {
  (void)state;
  char text[4096] = "sequence,label\n";
  static const char aa[] = "ACDEFGHIKLMNPQRSTVWY";
  for (int i = 0; i < 20; i++)
    snprintf(text + strlen(text), sizeof text - strlen(text), "M%c%c,%c\n", aa[i], aa[(i * 3) % 20],
             "xy"[i % 2]);
  esmt_labelled_options o = ESMT_LABELLED_OPTIONS_INIT;
  o.path = write_file("order.csv", text);
  o.valid_fraction = 0;
  esmt_labelled *d = read_ok(&o);
  esmt_labelled_loader *A = NULL, *B = NULL;
  assert_int_equal(esmt_labelled_loader_create(d, ESMT_LABELLED_TRAIN, 3, 1, 0, 7, &A), ESMT_OK);
  assert_int_equal(esmt_labelled_loader_create(d, ESMT_LABELLED_TRAIN, 3, 1, 0, 7, &B), ESMT_OK);
  esmt_batch_source a = ESMT_BATCH_SOURCE_INIT, b = ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_labelled_loader_as_source(A, &a), ESMT_OK);
  assert_int_equal(esmt_labelled_loader_as_source(B, &b), ESMT_OK);
  float first_epoch[21], second_epoch[21];
  int n = 0;
  uint64_t e = 9;
  for (int k = 0; k < 7; k++) { /* 20 rows: 6 batches of 3 and one of 2 */
    esmt_batch x = next_batch(&a);
    for (int r = 0; r < x.batch; r++) first_epoch[n++] = x.targets[r] + 2.0f * (float)x.tokens[r * x.seq_len + 2];
  }
  assert_int_equal(n, 20);
  assert_int_equal(a.epoch(a.user, &e), ESMT_OK);
  assert_int_equal(e, 0);
  char cursor[128];
  assert_int_equal(a.save_cursor(a.user, cursor, sizeof cursor), ESMT_OK);
  esmt_batch x = next_batch(&a);
  assert_int_equal(a.epoch(a.user, &e), ESMT_OK);
  assert_int_equal(e, 1);
  for (int r = 0; r < x.batch; r++) second_epoch[r] = x.targets[r] + 2.0f * (float)x.tokens[r * x.seq_len + 2];
  assert_true(memcmp(first_epoch, second_epoch, 3 * sizeof(float)) != 0); /* a new order */
  /* B restored to A's cursor gives A's next batch */
  assert_int_equal(b.restore_cursor(b.user, cursor), ESMT_OK);
  esmt_batch y = next_batch(&b);
  for (int r = 0; r < y.batch; r++)
    assert_float_equal(second_epoch[r], y.targets[r] + 2.0f * (float)y.tokens[r * y.seq_len + 2], 0);
  assert_int_equal(b.restore_cursor(b.user, "{\"epoch\":0,\"position\":99}"), ESMT_ERR_FORMAT);
  esmt_labelled_loader_destroy(A);
  esmt_labelled_loader_destroy(B);
  esmt_labelled_free(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seq_class_split_column), cmocka_unit_test(test_residue_labels),
      cmocka_unit_test(test_multilabel_and_regression), cmocka_unit_test(test_bad_rows),
      cmocka_unit_test(test_fraction_and_cluster_split),
      cmocka_unit_test(test_loader_order_and_cursor)};
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
