/* SPDX-License-Identifier: MIT */
/* Inference from protein strings through the public API alone (infer.h)
 * on the cpu backend: esmt_tokenize and its <unk> policy, the batch
 * builder's padded and packed rows, esmt_embed of proteins shorter and
 * longer than the window (truncated: the first window's own inference;
 * windows: each residue the average of the windows that hold it), the
 * pseudo-log-likelihood against masked rows run by hand, and scores
 * through the API equal, digit for digit, to `esmtrain-example score`'s
 * CSV (the CLI's path in ESMT_TEST_CLI). */
#define _POSIX_C_SOURCE 200809L
#include "cpu_dir_fixture.h"
#include "esmtrain/esmtrain.h"
#include "test_util.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

enum { D = 16, MAXPOS = 12, W = MAXPOS - 2 };

static esmt_model *g_model;

/* The context's one thread (ESMT_TEST_THREADS, set for this suite) is the
 * CLI's --threads 1 in test_cli_equal. */
static int setup(void **state) {
  return cpu_dir_setup(state) || cpu_dir_small_model(D, MAXPOS, &g_model) ? -1 : 0;
}

static int teardown(void **state) {
  esmt_model_destroy(g_model);
  return cpu_dir_teardown(state);
}

static const char *const k_proteins[] = {"MKTAYIAKQR", "GLSD", "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ",
                                         "ACDEFGHIKLMNP"};
enum { NP = 4 };

static int64_t tokenize(const char *s, int32_t *ids) {
  assert_int_equal(esmt_tokenize(s, strlen(s), ids, 64, NULL), ESMT_OK);
  return (int64_t)strlen(s);
}

static void test_tokenize(void **state) {
  (void)state;
  int32_t ids[16];
  uint64_t unk = 9;
  assert_int_equal(esmt_tokenize("LaJ*-", 5, ids, 16, &unk), ESMT_OK);
  assert_int_equal(ids[0], esmt_token_id('L'));
  assert_int_equal(ids[1], esmt_token_id('A'));
  assert_int_equal(ids[2], ESMT_TOKEN_UNK); /* J: a letter outside the alphabet */
  assert_int_equal(ids[3], ESMT_TOKEN_UNK); /* '*' */
  assert_int_equal(ids[4], esmt_token_id('-'));
  assert_int_equal(unk, 2);
  assert_int_equal(esmt_tokenize("MK1L", 4, ids, 16, NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "'1' at position 3"));
  assert_int_equal(esmt_tokenize("MKL", 3, ids, 2, NULL), ESMT_ERR_INVALID_ARGUMENT);
}

static void test_batch_builder(void **state) {
  (void)state;
  int32_t a[64], b[64];
  const int na = (int)tokenize("MKT", a), nb = (int)tokenize("GL", b);
  esmt_batch_builder *bb = NULL;
  assert_int_equal(esmt_batch_builder_create(ESMT_ROWS_PADDED, MAXPOS, &bb), ESMT_OK);
  assert_int_equal(esmt_batch_builder_add(bb, a, na), ESMT_OK);
  assert_int_equal(esmt_batch_builder_add(bb, b, nb), ESMT_OK);
  int32_t long_one[64];
  assert_int_equal(esmt_batch_builder_add(bb, long_one, W + 1), ESMT_ERR_INVALID_ARGUMENT);
  esmt_batch batch = ESMT_BATCH_INIT;
  assert_int_equal(esmt_batch_builder_get(bb, &batch), ESMT_OK);
  assert_int_equal(batch.batch, 2);
  assert_int_equal(batch.seq_len, 5);
  const int32_t want[10] = {ESMT_TOKEN_CLS, a[0], a[1], a[2], ESMT_TOKEN_EOS,
                            ESMT_TOKEN_CLS, b[0], b[1], ESMT_TOKEN_EOS, ESMT_TOKEN_PAD};
  assert_memory_equal(batch.tokens, want, sizeof want);
  assert_int_equal(batch.num_segments, 0);
  esmt_batch_builder_destroy(bb);

  /* packed into rows of 8: "MKT" (5) then "GL" (4) does not fit: two rows */
  assert_int_equal(esmt_batch_builder_create(ESMT_ROWS_PACKED, 8, &bb), ESMT_OK);
  assert_int_equal(esmt_batch_builder_add(bb, a, na), ESMT_OK);
  assert_int_equal(esmt_batch_builder_add(bb, b, nb), ESMT_OK);
  assert_int_equal(esmt_batch_builder_add(bb, b, 1), ESMT_OK); /* "G" fits after "GL" */
  batch = (esmt_batch)ESMT_BATCH_INIT;
  assert_int_equal(esmt_batch_builder_get(bb, &batch), ESMT_OK);
  assert_int_equal(batch.batch, 2);
  assert_int_equal(batch.seq_len, 8);
  assert_int_equal(batch.num_segments, 3);
  assert_int_equal(batch.seg_start[1], 8);
  assert_int_equal(batch.seg_len[1], 4);
  assert_int_equal(batch.seg_start[2], 12);
  assert_int_equal(batch.tokens[12], ESMT_TOKEN_CLS);
  assert_int_equal(batch.tokens[14], ESMT_TOKEN_EOS);
  assert_int_equal(batch.tokens[7], ESMT_TOKEN_PAD);
  esmt_batch_builder_destroy(bb);
}

/* Per-token representations of the last layer of one protein of n <= W
 * residues, run alone: [n + 2, D]. */
static void infer_alone(const int32_t *res, int n, float *rep) {
  esmt_batch_builder *bb = NULL;
  assert_int_equal(esmt_batch_builder_create(ESMT_ROWS_PADDED, MAXPOS, &bb), ESMT_OK);
  assert_int_equal(esmt_batch_builder_add(bb, res, n), ESMT_OK);
  esmt_batch batch = ESMT_BATCH_INIT;
  assert_int_equal(esmt_batch_builder_get(bb, &batch), ESMT_OK);
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_PER_TOKEN;
  q.per_token = rep;
  assert_int_equal(esmt_model_infer(g_model, &batch, &q), ESMT_OK);
  esmt_batch_builder_destroy(bb);
}

static void embed_all(esmt_long_policy policy, esmt_embedding *e, int32_t ids[NP][64],
                      int64_t *len) {
  const int32_t *res[NP];
  for (int i = 0; i < NP; i++) {
    len[i] = tokenize(k_proteins[i], ids[i]);
    res[i] = ids[i];
    e[i] = (esmt_embedding)ESMT_EMBEDDING_INIT;
  }
  esmt_embed_request rq = ESMT_EMBED_REQUEST_INIT;
  rq.per_token = 1;
  rq.long_policy = policy;
  rq.stride = 4;
  rq.batch_tokens = 30; /* several batches */
  assert_int_equal(esmt_embed(g_model, &rq, NP, res, len, e), ESMT_OK);
}

static void test_embed_truncate(void **state) {
  (void)state;
  esmt_embedding e[NP];
  int32_t ids[NP][64];
  int64_t len[NP];
  embed_all(ESMT_LONG_TRUNCATE, e, ids, len);
  float rep[MAXPOS * D];
  for (int i = 0; i < NP; i++) {
    const int kept = len[i] < W ? (int)len[i] : W;
    assert_int_equal(e[i].kept, kept);
    assert_int_equal(e[i].pieces, 1);
    infer_alone(ids[i], kept, rep);
    for (int c = 0; c < D; c++) {
      double m = 0;
      for (int t = 0; t < kept; t++) m += rep[(1 + t) * D + c];
      assert_float_equal(e[i].mean[c], m / kept, 1e-5);
      assert_float_equal(e[i].cls[c], rep[c], 1e-5);
      assert_float_equal(e[i].per_token[(kept - 1) * D + c], rep[kept * D + c], 1e-5);
    }
  }
  esmt_embedding_release(e, NP);
}

static void test_embed_windows(void **state) {
  (void)state;
  esmt_embedding e[NP];
  int32_t ids[NP][64];
  int64_t len[NP];
  embed_all(ESMT_LONG_WINDOWS, e, ids, len);
  /* protein 2: 33 residues, windows of 10 at 0, 4, ..., 20 and 23 */
  assert_int_equal(e[2].kept, 33);
  assert_int_equal(e[2].pieces, 7);
  assert_int_equal(e[3].pieces, 2); /* 13 residues: windows at 0 and 3 */
  float w0[MAXPOS * D], w1[MAXPOS * D];
  infer_alone(ids[2], W, w0);      /* window at 0 */
  infer_alone(ids[2] + 4, W, w1);  /* window at 4 */
  for (int c = 0; c < D; c++) {
    /* residue 1 is only in the window at 0; residue 5 in those at 0 and 4 */
    assert_float_equal(e[2].per_token[1 * D + c], w0[2 * D + c], 1e-5);
    assert_float_equal(e[2].per_token[5 * D + c], (w0[6 * D + c] + w1[2 * D + c]) / 2, 1e-5);
  }
  esmt_embedding_release(e, NP);
}

/* PLL by hand: each residue masked in its own row (the scorer's window
 * rule for a protein over W residues). */
static double pll_by_hand(const int32_t *res, int n) {
  double pll = 0;
  float *lg = malloc((size_t)MAXPOS * ESMT_VOCAB_SIZE * sizeof *lg);
  int32_t row[MAXPOS];
  for (int r = 0; r < n; r++) {
    int s = n <= W ? 0 : r - W / 2;
    if (s > n - W) s = n - W;
    if (s < 0) s = 0;
    const int w = n < W ? n : W;
    row[0] = ESMT_TOKEN_CLS;
    memcpy(row + 1, res + s, (size_t)w * sizeof *row);
    row[1 + r - s] = ESMT_TOKEN_MASK;
    row[w + 1] = ESMT_TOKEN_EOS;
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = 1;
    b.seq_len = w + 2;
    b.tokens = row;
    esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
    q.outputs = ESMT_INFER_LOGITS;
    q.logits = lg;
    assert_int_equal(esmt_model_infer(g_model, &b, &q), ESMT_OK);
    const float *l = lg + (size_t)(1 + r - s) * ESMT_VOCAB_SIZE;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < ESMT_VOCAB_SIZE; v++) mx = l[v] > mx ? l[v] : mx;
    for (int v = 0; v < ESMT_VOCAB_SIZE; v++) sum += exp((double)l[v] - mx);
    pll += (double)l[res[r]] - mx - log(sum);
  }
  free(lg);
  return pll;
}

static void test_pll(void **state) {
  (void)state;
  int32_t ids[64];
  for (int i = 0; i < NP; i++) {
    const int n = (int)tokenize(k_proteins[i], ids);
    double pll = 0;
    assert_int_equal(esmt_score_pll(g_model, ids, n, 64, &pll), ESMT_OK);
    assert_float_equal(pll, pll_by_hand(ids, n), 1e-4);
  }
}

static void test_variants(void **state) {
  (void)state;
  int32_t ids[64];
  const int n = (int)tokenize(k_proteins[2], ids);
  esmt_mutation m[4];
  int k = 0;
  assert_int_equal(esmt_mutations_parse("K2A:Q33L", m, 4, &k), ESMT_OK);
  assert_int_equal(k, 2);
  assert_int_equal(m[1].residue, 33);
  assert_int_equal(esmt_mutations_parse("K2A:K2L", m, 4, &k), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "mutated twice"));
  esmt_mutation one = {1, esmt_token_id('K'), esmt_token_id('A')};
  esmt_mutation two[2] = {{1, esmt_token_id('K'), esmt_token_id('A')},
                          {32, esmt_token_id('Q'), esmt_token_id('L')}};
  const int32_t *res[1] = {ids};
  const int len[1] = {n};
  esmt_variant v[2] = {{0, 1, &one}, {0, 2, two}};
  double sc[2];
  assert_int_equal(esmt_score_variants(g_model, 1, res, len, v, 2, 64, NULL, NULL, sc), ESMT_OK);
  assert_true(isfinite(sc[0]) && sc[0] != 0);
  esmt_variant v1 = {0, 1, &two[1]};
  double last;
  assert_int_equal(esmt_score_variants(g_model, 1, res, len, &v1, 1, 64, NULL, NULL, &last),
                   ESMT_OK);
  assert_float_equal(sc[1], sc[0] + last, 1e-9); /* masked marginals add up */
  esmt_mutation wrong = {1, esmt_token_id('A'), esmt_token_id('L')}; /* residue 2 is K */
  esmt_variant vw = {0, 1, &wrong};
  assert_int_equal(esmt_score_variants(g_model, 1, res, len, &vw, 1, 64, NULL, NULL, sc),
                   ESMT_ERR_INVALID_ARGUMENT);
}

/* The CLI's `score` CSV equals the API's numbers printed the same way. */
typedef struct expect { char lines[NP][128]; const char *ids[NP]; } expect;

static int on_protein(void *user, uint64_t index, int length, double pll) {
  expect *x = user;
  snprintf(x->lines[index], sizeof x->lines[index], "%s,%d,%.9g,%.9g", x->ids[index], length,
           pll, exp(-pll / length));
  return 0;
}

static void test_cli_equal(void **state) {
  (void)state;
  const char *cli = getenv("ESMT_TEST_CLI");
  if (!cli || !*cli) skip();
  const char *dir = test_mkdtemp();
  char path[1024], cmd[4096];
  snprintf(path, sizeof path, "%s/model", dir);
  assert_int_equal(esmt_model_save(g_model, path, 0), ESMT_OK);
  snprintf(path, sizeof path, "%s/p.fa", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  expect x;
  static const char *const names[NP] = {"a", "b", "c", "d"};
  for (int i = 0; i < NP; i++) fprintf(f, ">%s\n%s\n", names[i], k_proteins[i]), x.ids[i] = names[i];
  fclose(f);
  snprintf(cmd, sizeof cmd, "'%s' score '%s/model' '%s/p.fa' -o '%s/out.csv' --backend cpu "
           "--threads 1 --batch-tokens 40 --quiet >/dev/null", cli, dir, dir, dir);
  assert_int_equal(system(cmd), 0);
  esmt_pll_scorer *s = NULL;
  assert_int_equal(esmt_pll_scorer_create(g_model, 40, on_protein, &x, &s), ESMT_OK);
  int32_t ids[64];
  for (int i = 0; i < NP; i++) {
    const int n = (int)tokenize(k_proteins[i], ids);
    assert_int_equal(esmt_pll_scorer_add(s, ids, n), ESMT_OK);
  }
  assert_int_equal(esmt_pll_scorer_finish(s), ESMT_OK);
  esmt_pll_scorer_destroy(s);
  snprintf(path, sizeof path, "%s/out.csv", dir);
  f = fopen(path, "r");
  assert_non_null(f);
  char line[256];
  assert_non_null(fgets(line, sizeof line, f)); /* header */
  for (int i = 0; i < NP; i++) {
    assert_non_null(fgets(line, sizeof line, f));
    line[strcspn(line, "\n")] = 0;
    assert_string_equal(line, x.lines[i]);
  }
  fclose(f);
  test_rmtree(dir);
}

static void read_file(const char *path, char *buf, size_t cap, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  *len = fread(buf, 1, cap, f);
  fclose(f);
}

/* Rows streamed into .npy, a resume cut back to the commit, then the
 * arrays copied into one safetensors file that must be new. */
static void test_npy_safetensors(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  char path[1024], st_path[1024], buf[4096];
  snprintf(path, sizeof path, "%s/mean.npy", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
  assert_true(fd >= 0);
  esmt_npy_stream *s = NULL;
  assert_int_equal(esmt_npy_stream_start(fd, path, ESMT_NPY_F32, 2, -1, &s), ESMT_OK);
  const float rows[6] = {1, 2, 3, 4, 5, 6};
  assert_int_equal(esmt_npy_stream_append(s, rows, 2), ESMT_OK);
  assert_int_equal(esmt_npy_stream_commit(s), ESMT_OK);
  assert_int_equal(esmt_npy_stream_append(s, rows + 4, 1), ESMT_OK); /* never committed */
  esmt_npy_stream_end(s);
  /* a resume of more rows than the file holds is refused */
  assert_int_equal(esmt_npy_stream_start(fd, path, ESMT_NPY_F32, 2, 4, &s), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "fewer than"));
  assert_int_equal(esmt_npy_stream_start(fd, path, ESMT_NPY_F32, 2, 2, &s), ESMT_OK);
  assert_int_equal(esmt_npy_stream_cut(s), ESMT_OK);
  size_t len = 0;
  read_file(path, buf, sizeof buf, &len);
  assert_int_equal(len, ESMT_NPY_HEADER_BYTES + 4 * sizeof(float));
  assert_memory_equal(buf, "\x93NUMPY\x01\x00", 8);
  assert_non_null(strstr(buf + 10, "'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"));
  assert_memory_equal(buf + ESMT_NPY_HEADER_BYTES, rows, 4 * sizeof(float));

  snprintf(st_path, sizeof st_path, "%s/e.safetensors", dir);
  const char *names[1] = {"mean"};
  const char *meta[2] = {"ids", "ids.txt"};
  assert_int_equal(esmt_npy_streams_to_safetensors(st_path, &s, names, 1, meta, 1), ESMT_OK);
  read_file(st_path, buf, sizeof buf - 1, &len);
  buf[len] = 0;
  const char want[] = "{\"__metadata__\":{\"ids\":\"ids.txt\"},\"mean\":{\"dtype\":\"F32\","
                      "\"shape\":[2,2],\"data_offsets\":[0,16]}}";
  assert_memory_equal(buf + 8, want, sizeof want - 1);
  uint64_t hl = 0;
  memcpy(&hl, buf, 8);
  assert_int_equal(hl % 8, 0);
  assert_int_equal(len, 8 + hl + 16);
  assert_memory_equal(buf + 8 + hl, rows, 16);
  /* the output must be new: an existing file is never truncated */
  assert_int_equal(esmt_npy_streams_to_safetensors(st_path, &s, names, 1, meta, 1), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "cannot create"));
  read_file(st_path, buf, sizeof buf, &len);
  assert_int_equal(len, 8 + hl + 16);
  esmt_npy_stream_end(s);
  close(fd);
  test_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tokenize),       cmocka_unit_test(test_batch_builder),
      cmocka_unit_test(test_embed_truncate), cmocka_unit_test(test_embed_windows),
      cmocka_unit_test(test_pll),            cmocka_unit_test(test_variants),
      cmocka_unit_test(test_cli_equal),      cmocka_unit_test(test_npy_safetensors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
