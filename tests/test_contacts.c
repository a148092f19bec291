/* SPDX-License-Identifier: MIT */
/* Attention maps (esmt_model_infer with ESMT_INFER_ATTENTION) and contact
 * maps on the cpu backend: every map's rows are probabilities, zero past
 * a protein's end is never returned, right-padded and packed rows agree;
 * the contact features are the attention without <cls>/<eos>, symmetrised
 * and average-product corrected, and the contacts their logistic
 * regression; a protein longer than the window is the average of its
 * windows' maps; a model without a (trained) contact head, an empty protein,
 * a protein longer than the window and a backend without attention_probs
 * are refused with a message; a head set here survives export and import;
 * a head trained on synthetic contacts (a teacher head's top pairs) ranks
 * pairs as the teacher; the contact-pairs file and its errors.
 * The numbers against transformers are tests/interop/test_contacts.py. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

enum { L = 2, H = 2, D = 16, MAXPOS = 24, W = MAXPOS - 2, K = L * H };

static esmt_context *g_ctx;
static esmt_model *g_m;

static int setup(void **state) {
  (void)state;
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 2;
  o.log_level = ESMT_LOG_ERROR;
  if (esmt_context_create(&o, &g_ctx)) return -1;
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = L;
  c.hidden_size = D;
  c.num_heads = H;
  c.max_positions = MAXPOS;
  c.precision = ESMT_PRECISION_FP32;
  return esmt_model_create(g_ctx, &c, 3, &g_m) == ESMT_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  esmt_model_destroy(g_m);
  esmt_context_destroy(g_ctx);
  return 0;
}

static const char *const k_prot[] = {"MKTAYIAKQRQISFV", "GLSDW", "ACDEFGHIKLMNPQRSTVWY"};
enum { NP = 3 };

static int residues(const char *s, int32_t *ids) {
  assert_int_equal(esmt_tokenize(s, strlen(s), ids, 64, NULL), ESMT_OK);
  return (int)strlen(s);
}

/* The proteins' attention: padded (one row each) into pad, packed (one row)
 * into pk; both [L][each protein [H, n, n]]. Returns sum of n^2. */
static size_t maps(float **pad, float **pk) {
  int32_t res[NP][64], n[NP];
  esmt_batch_builder *bp = NULL, *bk = NULL;
  assert_int_equal(esmt_batch_builder_create(ESMT_ROWS_PADDED, MAXPOS, &bp), ESMT_OK);
  assert_int_equal(esmt_batch_builder_create(ESMT_ROWS_PACKED, MAXPOS, &bk), ESMT_OK);
  size_t sq = 0;
  for (int p = 0; p < NP; p++) {
    n[p] = residues(k_prot[p], res[p]);
    sq += (size_t)(n[p] + 2) * (n[p] + 2);
    assert_int_equal(esmt_batch_builder_add(bp, res[p], n[p]), ESMT_OK);
    assert_int_equal(esmt_batch_builder_add(bk, res[p], n[p]), ESMT_OK);
  }
  esmt_batch b = ESMT_BATCH_INIT, k = ESMT_BATCH_INIT;
  assert_int_equal(esmt_batch_builder_get(bp, &b), ESMT_OK);
  assert_int_equal(esmt_batch_builder_get(bk, &k), ESMT_OK);
  assert_true(k.num_segments == NP && k.batch == 2);
  esmt_infer_request r = ESMT_INFER_REQUEST_INIT;
  r.outputs = ESMT_INFER_ATTENTION;
  *pad = r.attention = malloc((size_t)L * H * sq * sizeof(float));
  assert_int_equal(esmt_model_infer(g_m, &b, &r), ESMT_OK);
  *pk = r.attention = malloc((size_t)L * H * sq * sizeof(float));
  assert_int_equal(esmt_model_infer(g_m, &k, &r), ESMT_OK);
  esmt_batch_builder_destroy(bp);
  esmt_batch_builder_destroy(bk);
  return sq;
}

static void attention_rows_and_layouts(void **state) {
  (void)state;
  float *pad, *pk;
  const size_t sq = maps(&pad, &pk);
  double worst_sum = 0, worst_diff = 0, spread = 0;
  for (size_t i = 0; i < (size_t)L * H * sq; i++) worst_diff = fmax(worst_diff, fabs(pad[i] - pk[i]));
  size_t off = 0;
  for (int l = 0; l < L; l++)
    for (int p = 0; p < NP; p++) {
      const int n = (int)strlen(k_prot[p]) + 2;
      for (int h = 0; h < H; h++, off += (size_t)n * n)
        for (int i = 0; i < n; i++) {
          double s = 0, lo = 1, hi = 0;
          for (int j = 0; j < n; j++) {
            const float v = pad[off + (size_t)i * n + j];
            assert_true(v >= 0.0f && v <= 1.0f);
            s += v, lo = fmin(lo, v), hi = fmax(hi, v);
          }
          worst_sum = fmax(worst_sum, fabs(s - 1));
          spread = fmax(spread, hi - lo);
        }
    }
  print_message("rows sum to 1 within %.2g; padded vs packed %.2g; largest row spread %.3g\n",
                worst_sum, worst_diff, spread);
  assert_true(off == (size_t)L * H * sq);
  assert_true(worst_sum < 1e-5);
  assert_true(worst_diff < 1e-5);
  assert_true(spread > 1e-3); /* not uniform: the maps carry information */
  free(pad);
  free(pk);
}

/* Features of the first protein by hand from its attention maps. */
static void features_and_contacts(void **state) {
  (void)state;
  int32_t res[64];
  const int n = residues(k_prot[0], res), N = n + 2;
  float w[K], bias = 0;
  assert_int_equal(esmt_model_contact_head(g_m, w, K, &bias), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "no contact head"));
  float *c = malloc((size_t)n * n * sizeof *c);
  assert_int_equal(esmt_predict_contacts(g_m, res, n, c), ESMT_ERR_STATE);
  for (int k = 0; k < K; k++) w[k] = 0.3f * (float)(k + 1) * (k % 2 ? -1.0f : 1.0f);
  assert_int_equal(esmt_model_set_contact_head(g_m, w, K, -0.5f), ESMT_OK);
  assert_int_equal(esmt_model_set_contact_head(g_m, w, K - 1, -0.5f), ESMT_ERR_INVALID_ARGUMENT);
  float got_w[K], got_b = 0;
  assert_int_equal(esmt_model_contact_head(g_m, got_w, K, &got_b), ESMT_OK);
  assert_memory_equal(got_w, w, sizeof w);
  assert_true(got_b == -0.5f);

  float *feat = malloc((size_t)K * n * n * sizeof *feat);
  float *att = malloc((size_t)K * N * N * sizeof *att);
  assert_int_equal(esmt_contact_features(g_m, res, n, feat), ESMT_OK);
  assert_int_equal(esmt_predict_contacts(g_m, res, n, c), ESMT_OK);
  int32_t row[64];
  row[0] = ESMT_TOKEN_CLS;
  memcpy(row + 1, res, (size_t)n * sizeof *row);
  row[N - 1] = ESMT_TOKEN_EOS;
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = 1;
  b.seq_len = N;
  b.tokens = row;
  esmt_infer_request r = ESMT_INFER_REQUEST_INIT;
  r.outputs = ESMT_INFER_ATTENTION;
  r.attention = att;
  assert_int_equal(esmt_model_infer(g_m, &b, &r), ESMT_OK);
  double worst_f = 0, worst_c = 0, sym = 0;
  double *F = malloc((size_t)K * n * n * sizeof *F);
  for (int k = 0; k < K; k++) {
    const float *A = att + (size_t)k * N * N;
    double tot = 0, rs[64] = {0};
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        const double v = (double)A[(i + 1) * N + j + 1] + A[(j + 1) * N + i + 1];
        F[((size_t)k * n + i) * n + j] = v;
        rs[i] += v;
        tot += v;
      }
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double *f = &F[((size_t)k * n + i) * n + j];
        *f -= rs[i] * rs[j] / tot;
        worst_f = fmax(worst_f, fabs(*f - feat[((size_t)k * n + i) * n + j]));
      }
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double z = -0.5;
      for (int k = 0; k < K; k++) z += (double)w[k] * F[((size_t)k * n + i) * n + j];
      worst_c = fmax(worst_c, fabs(1 / (1 + exp(-z)) - c[i * n + j]));
      sym = fmax(sym, fabs(c[i * n + j] - c[j * n + i]));
    }
  print_message("features %.2g, contacts %.2g from the maps by hand; asymmetry %.2g\n", worst_f,
                worst_c, sym);
  assert_true(worst_f < 1e-6);
  assert_true(worst_c < 1e-6);
  assert_true(sym < 1e-6);
  free(F);
  free(att);
  free(feat);
  free(c);
}

/* A protein of 50 residues through windows of 22 (stride 11: starts 0, 11,
 * 22 and 28): each pair the average of the maps of the windows holding
 * both residues, 0 where none does; a protein that fits is
 * esmt_predict_contacts itself. Needs the head features_and_contacts set. */
static void contacts_windowed(void **state) {
  (void)state;
  enum { NL = 50, NW = 4 };
  static const int64_t starts[NW] = {0, 11, 22, 28};
  int32_t res[NL];
  const char *aa = "ACDEFGHIKLMNPQRSTVWY";
  for (int i = 0; i < NL; i++) assert_int_equal(esmt_tokenize(&aa[(i * 7) % 20], 1, &res[i], 1,
                                                              NULL), ESMT_OK);
  float *got = malloc((size_t)NL * NL * sizeof *got), *win = malloc((size_t)W * W * sizeof *win);
  double *sum = calloc((size_t)NL * NL, sizeof *sum);
  int *cnt = calloc((size_t)NL * NL, sizeof *cnt);
  assert_int_equal(esmt_predict_contacts_windowed(g_m, res, NL, 0, got), ESMT_OK);
  for (int w = 0; w < NW; w++) {
    assert_int_equal(esmt_predict_contacts(g_m, res + starts[w], W, win), ESMT_OK);
    for (int i = 0; i < W; i++)
      for (int j = 0; j < W; j++) {
        sum[(starts[w] + i) * NL + starts[w] + j] += win[i * W + j];
        cnt[(starts[w] + i) * NL + starts[w] + j]++;
      }
  }
  double worst = 0;
  int uncovered = 0;
  for (int k = 0; k < NL * NL; k++) {
    worst = fmax(worst, fabs((cnt[k] ? sum[k] / cnt[k] : 0.0) - got[k]));
    uncovered += !cnt[k];
  }
  print_message("windowed contacts: %.2g from the windows by hand; %d of %d pairs in no window\n",
                worst, uncovered, NL * NL);
  assert_true(worst < 1e-6);
  assert_true(uncovered > 0 && got[NL - 1] == 0.0f); /* residues 1 and 50 share no window */
  assert_true(cnt[0] == 1 && got[0] == sum[0]);     /* (1, 1): the first window's own value */
  /* one that fits: esmt_predict_contacts' values exactly */
  assert_int_equal(esmt_predict_contacts_windowed(g_m, res, W, 5, got), ESMT_OK);
  assert_int_equal(esmt_predict_contacts(g_m, res, W, win), ESMT_OK);
  assert_memory_equal(got, win, (size_t)W * W * sizeof *got);
  assert_int_equal(esmt_predict_contacts_windowed(g_m, res, NL, W + 1, got),
                   ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "stride of 23 residues is more than the window"));
  assert_int_equal(esmt_predict_contacts_windowed(g_m, res, 0, 0, got), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "empty"));
  free(got), free(win), free(sum), free(cnt);
}

/* The planner's figure is what esmt_model_infer allocates: one layer's
 * [B, H, T, T] fp32 on the device, that and every layer's maps on the host. */
static void attention_plan(void **state) {
  (void)state;
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  assert_int_equal(esmt_model_get_config(g_m, &c), ESMT_OK);
  uint64_t dev = 0, host = 0;
  assert_int_equal(esmt_plan_attention_maps(&c, 3, 10, &dev, &host), ESMT_OK);
  assert_true(dev == 3ull * H * 10 * 10 * sizeof(float));
  assert_true(host == dev * (1 + L));
  assert_int_equal(esmt_plan_attention_maps(&c, -1, 10, &dev, &host), ESMT_ERR_INVALID_ARGUMENT);
}

static void bad_inputs(void **state) {
  (void)state;
  int32_t res[W + 1];
  for (int i = 0; i < W + 1; i++) res[i] = 5;
  float *c = malloc((size_t)(W + 1) * (W + 1) * sizeof *c);
  assert_int_equal(esmt_predict_contacts(g_m, res, 0, c), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "empty"));
  assert_int_equal(esmt_predict_contacts(g_m, res, W + 1, c), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "longer than the model's window of 22"));
  assert_int_equal(esmt_contact_features(g_m, res, W + 1, c), ESMT_ERR_INVALID_ARGUMENT);
  free(c);
  /* a backend without attention_probs (a 2.0 plugin) */
  const esmtb_ops *real = g_m->ops;
  esmtb_ops old = *real;
  old.attention_probs = NULL;
  g_m->ops = &old;
  int32_t row[7] = {ESMT_TOKEN_CLS, 5, 6, 7, 8, 9, ESMT_TOKEN_EOS};
  float att[K * 49];
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = 1;
  b.seq_len = 7;
  b.tokens = row;
  esmt_infer_request r = ESMT_INFER_REQUEST_INIT;
  r.outputs = ESMT_INFER_ATTENTION;
  r.attention = att;
  const esmt_status st = esmt_model_infer(g_m, &b, &r);
  g_m->ops = real;
  assert_int_equal(st, ESMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(esmt_last_error(), "backend cpu cannot return attention maps"));
  r.attention = NULL;
  assert_int_equal(esmt_model_infer(g_m, &b, &r), ESMT_ERR_INVALID_ARGUMENT);
}

/* A head set on a model is what its export writes. */
static void head_survives_export(void **state) {
  (void)state;
  float w[K], b = 0, got[K], gb = 0;
  for (int k = 0; k < K; k++) w[k] = 0.25f * (float)k - 0.4f;
  assert_int_equal(esmt_model_set_contact_head(g_m, w, K, 0.75f), ESMT_OK);
  const char *dir = test_mkdtemp();
  char out[512];
  snprintf(out, sizeof out, "%s/export", dir);
  assert_int_equal(esmt_model_export_hf(g_m, out, 0), ESMT_OK);
  esmt_model *m2 = NULL;
  assert_int_equal(esmt_model_import_hf(g_ctx, out, &m2), ESMT_OK);
  assert_int_equal(esmt_model_contact_head(m2, got, K, &gb), ESMT_OK);
  assert_memory_equal(got, w, sizeof w);
  assert_true(gb == 0.75f);
  (void)b;
  esmt_model_destroy(m2);
  test_rmtree(dir);
}

/* Synthetic contacts: a teacher head's top 15% of pairs 6 or more apart
 * in four proteins. The head fitted on them (starting from none) ranks
 * the pairs as the teacher does. */
static void head_trained_on_synthetic_pairs(void **state) {
  (void)state;
  static const char *const prot[] = {"MKTAYIAKQRQISFVKSHFSRQ", "GLSDWEKLAAKHRNPQTVYCFM",
                                     "ACDEFGHIKLMNPQRSTVWYAC", "MSTNPKPQRKTKRNTNRRPQDV"};
  enum { NPR = 4 };
  int32_t res[NPR][64];
  const int32_t *rp[NPR];
  int len[NPR];
  float teacher[K];
  for (int k = 0; k < K; k++) teacher[k] = (float)sin(1.7 * k + 0.3) * 2.0f;
  assert_int_equal(esmt_model_set_contact_head(g_m, teacher, K, 0.0f), ESMT_OK);
  esmt_contact_pair pairs[NPR * W * W];
  size_t np = 0;
  for (int p = 0; p < NPR; p++) {
    len[p] = residues(prot[p], res[p]);
    rp[p] = res[p];
    const int n = len[p];
    float c[W * W], sorted[W * W];
    assert_int_equal(esmt_predict_contacts(g_m, res[p], n, c), ESMT_OK);
    int m = 0;
    for (int i = 0; i < n; i++)
      for (int j = i + 6; j < n; j++) sorted[m++] = c[i * n + j];
    for (int a = 1; a < m; a++) /* descending insertion sort */
      for (int b = a; b > 0 && sorted[b] > sorted[b - 1]; b--) {
        const float t = sorted[b];
        sorted[b] = sorted[b - 1];
        sorted[b - 1] = t;
      }
    const float cut = sorted[m * 15 / 100];
    for (int i = 0; i < n; i++)
      for (int j = i + 6; j < n; j++)
        if (c[i * n + j] > cut) pairs[np++] = (esmt_contact_pair){p, j, i}; /* either way round */
  }
  float zero[K] = {0};
  assert_int_equal(esmt_model_set_contact_head(g_m, zero, K, 0.0f), ESMT_OK);
  esmt_contact_train_options o = ESMT_CONTACT_TRAIN_OPTIONS_INIT;
  esmt_contact_train_result r = ESMT_CONTACT_TRAIN_RESULT_INIT;
  assert_int_equal(esmt_contact_head_train(g_m, &o, NPR, rp, len, pairs, np, &r), ESMT_OK);
  float w[K], b = 0;
  assert_int_equal(esmt_model_contact_head(g_m, w, K, &b), ESMT_OK);
  double dot = 0, n1 = 0, n2 = 0;
  for (int k = 0; k < K; k++) dot += w[k] * teacher[k], n1 += w[k] * w[k], n2 += teacher[k] * teacher[k];
  /* the fitted head's top-|contacts| pairs against the labels */
  int hit = 0, total = 0;
  for (int p = 0; p < NPR; p++) {
    const int n = len[p];
    float c[W * W];
    assert_int_equal(esmt_predict_contacts(g_m, res[p], n, c), ESMT_OK);
    for (size_t k = 0; k < np; k++) {
      if (pairs[k].protein != p) continue;
      const float v = c[pairs[k].i * n + pairs[k].j];
      int above = 0; /* pairs scored higher than this contact */
      for (int i = 0; i < n; i++)
        for (int j = i + 6; j < n; j++) above += c[i * n + j] > v;
      int listed = 0;
      for (size_t q = 0; q < np; q++) listed += pairs[q].protein == p;
      hit += above < listed;
      total++;
    }
  }
  print_message("trained on %llu pairs (%llu contacts) in %d Newton steps: loss %.4f, cosine to "
                "the teacher %.3f, contacts ranked in the top |contacts| %d/%d\n",
                (unsigned long long)r.pairs, (unsigned long long)r.contacts, r.iterations, r.loss,
                dot / sqrt(n1 * n2), hit, total);
  assert_true(r.contacts == np && r.iterations >= 1);
  assert_true(dot / sqrt(n1 * n2) > 0.9);
  assert_true(hit >= total * 9 / 10);
  /* no contact among the samples */
  assert_int_equal(esmt_contact_head_train(g_m, &o, NPR, rp, len, pairs, 0, &r),
                   ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "all non-contacts"));
}

static void pairs_file(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  char path[512];
  snprintf(path, sizeof path, "%s/pairs.txt", dir);
  static const char *const ids[] = {"a", "b"};
  const int len[] = {10, 20};
  static const struct {
    const char *text, *error;
  } cases[] = {
      {"# contacts\n\na 1 9\nb\t20 3\r\n", NULL},
      {"a 1 9\nc 1 2\n", "line 2: no protein 'c'"},
      {"a 1 11\n", "line 1: residues '1' and '11' of 'a' (10 residues)"},
      {"a 3 3\n", "two different numbers"},
      {"a 1\n", "line 1: expected 'ID I J'"},
      {"a 1 2 3\n", "expected 'ID I J'"},
      {"a 0 2\n", "two different numbers in 1..10"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(cases[c].text, f);
    fclose(f);
    esmt_contact_pair *p = NULL;
    size_t n = 0;
    const esmt_status st = esmt_contact_pairs_read(path, 2, ids, len, &p, &n);
    if (!cases[c].error) {
      assert_int_equal(st, ESMT_OK);
      assert_int_equal(n, 2);
      assert_true(p[0].protein == 0 && p[0].i == 0 && p[0].j == 8);
      assert_true(p[1].protein == 1 && p[1].i == 19 && p[1].j == 2);
    } else {
      assert_int_equal(st, ESMT_ERR_FORMAT);
      if (!strstr(esmt_last_error(), cases[c].error) || !strstr(esmt_last_error(), path))
        fail_msg("case %zu: '%s' lacks '%s' or the path", c, esmt_last_error(), cases[c].error);
      assert_null(p);
    }
    esmt_contact_pairs_free(p);
  }
  test_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(attention_rows_and_layouts),
      cmocka_unit_test(features_and_contacts),
      cmocka_unit_test(contacts_windowed),
      cmocka_unit_test(attention_plan),
      cmocka_unit_test(bad_inputs),
      cmocka_unit_test(head_survives_export),
      cmocka_unit_test(head_trained_on_synthetic_pairs),
      cmocka_unit_test(pairs_file),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
