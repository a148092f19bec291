/* SPDX-License-Identifier: MIT */
/* Clusters (issue #21): ingest --clusters and the loader's cluster sampling.
 *
 * A protein is identified in every check by its residues (all sequences of
 * the synthetic set differ; in real data identical sequences that the
 * cluster file puts in different clusters are left out), and its true
 * cluster comes from reading the cluster file here, independently of the
 * library. Checked: the ingest's counts; no cluster in both splits; each
 * index cluster is one true cluster and vice versa; over E epochs each
 * cluster drawn exactly E times and its members uniformly (chi-square);
 * a cursor resumes the same batches; two ranks together draw every cluster
 * of an epoch, overlapping only in the padding batches the loader repeats.
 *
 * Synthetic data by default; ESMT_TEST_CLUSTERS_FASTA and _TSV name real
 * files instead (tests/interop/test_clusters_uniprot.sh: UniProt proteins
 * clustered by MMseqs2 at 50% identity). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"
#include "cluster_index.h"
#include "cluster_map.h"
#include "dataset_manifest.h"
#include "test_util.h"

/* ---- the truth: sequence hash -> (cluster hash, member index) ---- */

typedef struct protein { uint64_t seq, cluster; int ambiguous, copies; } protein;
typedef struct truth {
  protein *p;                 /* sorted by seq */
  size_t n;
  uint64_t *rep_of_member;    /* pairs (member hash, rep hash), sorted */
  size_t members;
} truth;

static uint64_t tokens_hash(const int32_t *t, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint64_t)t[i]) * 1099511628211ull;
  return h ^ (h >> 29);
}

static int cmp_u64_pair(const void *a, const void *b) {
  const uint64_t *x = a, *y = b;
  return (x[0] > y[0]) - (x[0] < y[0]);
}
static int cmp_protein(const void *a, const void *b) {
  const protein *x = a, *y = b;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

static uint64_t rep_of(const truth *t, uint64_t member) {
  size_t lo = 0, hi = t->members;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->rep_of_member[2 * mid] < member) lo = mid + 1;
    else hi = mid;
  }
  return lo < t->members && t->rep_of_member[2 * lo] == member ? t->rep_of_member[2 * lo + 1] : 0;
}

static void truth_load(truth *t, const char *fasta, const char *tsv) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(tsv, "r");
  assert_non_null(f);
  char line[4096];
  size_t cap = 0;
  while (fgets(line, sizeof line, f)) {
    char *tab = strchr(line, '\t');
    if (!tab) continue;
    line[strcspn(line, "\r\n")] = '\0';
    if (t->members == cap) {
      cap = cap ? 2 * cap : 4096;
      t->rep_of_member = realloc(t->rep_of_member, cap * 2 * sizeof(uint64_t));
    }
    t->rep_of_member[2 * t->members] = esmt_id_hash(tab + 1);
    t->rep_of_member[2 * t->members + 1] = esmt_id_hash_n(line, (size_t)(tab - line));
    t->members++;
  }
  fclose(f);
  qsort(t->rep_of_member, t->members, 2 * sizeof(uint64_t), cmp_u64_pair); /* first listing kept
                                                                            * is not needed: the
                                                                            * test data lists each
                                                                            * member once */
  esmt_sequence_reader *r = NULL;
  assert_int_equal(esmt_sequence_reader_open(fasta, NULL, &r), ESMT_OK);
  esmt_sequence s = ESMT_SEQUENCE_INIT;
  int got = 0;
  cap = 0;
  while (esmt_sequence_reader_next(r, &s, &got) == ESMT_OK && got) {
    uint64_t rep = rep_of(t, esmt_id_hash(s.id));
    const char *a = strchr(s.id, '|'), *b = a ? strchr(a + 1, '|') : NULL;
    if (!rep && b) rep = rep_of(t, esmt_id_hash_n(a + 1, (size_t)(b - a - 1))); /* UniProt */
    if (!rep) rep = esmt_id_hash(s.id); /* a cluster of its own */
    if (t->n == cap) {
      cap = cap ? 2 * cap : 4096;
      t->p = realloc(t->p, cap * sizeof *t->p);
    }
    t->p[t->n++] = (protein){tokens_hash(s.tokens, s.length), rep, 0, 1};
  }
  esmt_sequence_reader_close(r);
  qsort(t->p, t->n, sizeof *t->p, cmp_protein);
  /* one sequence twice in a cluster: one protein drawn for either copy;
   * in two clusters: not identifiable */
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (k && t->p[k - 1].seq == t->p[i].seq) {
      if (t->p[k - 1].cluster != t->p[i].cluster) t->p[k - 1].ambiguous = 1;
      t->p[k - 1].copies++;
      continue;
    }
    t->p[k++] = t->p[i];
  }
  t->n = k;
}

static const protein *lookup(const truth *t, uint64_t seq) {
  protein key = {seq, 0, 0, 0};
  return bsearch(&key, t->p, t->n, sizeof *t->p, cmp_protein);
}

/* ---- the synthetic set ---- */

static char g_dir[512], g_fasta[600], g_tsv[600], g_data[600];
static int g_synthetic;

#define SYN_RECORDS 400

static void write_synthetic(void) {
  FILE *fa = fopen(g_fasta, "w"), *ts = fopen(g_tsv, "w");
  assert_non_null(fa);
  assert_non_null(ts);
  uint64_t s = 12345;
  int cluster = 0, left = 0;
  for (int r = 0; r < SYN_RECORDS; r++) {
    fprintf(fa, ">p%d desc\n", r);
    const int len = 20 + r % 37;
    for (int i = 0; i < len; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      fputc("ACDEFGHIKLMNPQRSTVWY"[(s >> 33) % 20], fa);
    }
    fputc('\n', fa);
    if (r % 50 == 49) continue; /* 8 records in no cluster */
    if (left == 0) {            /* cluster sizes 1..12 */
      cluster = r;
      left = 1 + (r * 7) % 12;
    }
    fprintf(ts, "p%d\tp%d\n", cluster, r);
    left--;
  }
  fprintf(ts, "ghost1\tghost1\nghost1\tghost2\n"); /* a cluster with no record: 1 empty */
  fprintf(ts, "p1\tp2\n");                          /* a repeated line: 1 duplicate */
  fclose(fa);
  fclose(ts);
}

static int setup(void **state) {
  (void)state;
  const char *fa = getenv("ESMT_TEST_CLUSTERS_FASTA"), *ts = getenv("ESMT_TEST_CLUSTERS_TSV");
  snprintf(g_dir, sizeof g_dir, "%s", test_mkdtemp());
  snprintf(g_data, sizeof g_data, "%s/data", g_dir);
  g_synthetic = !(fa && ts);
  if (g_synthetic) {
    snprintf(g_fasta, sizeof g_fasta, "%s/prot.fa", g_dir);
    snprintf(g_tsv, sizeof g_tsv, "%s/clu.tsv", g_dir);
    write_synthetic();
  } else {
    snprintf(g_fasta, sizeof g_fasta, "%s", fa);
    snprintf(g_tsv, sizeof g_tsv, "%s", ts);
  }
  const char *in[1] = {g_fasta};
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  o.inputs = in;
  o.n_inputs = 1;
  o.output_dir = g_data;
  o.valid_fraction = g_synthetic ? 0.25 : 0.05;
  o.clusters = g_tsv;
  esmt_ingest_stats st = ESMT_INGEST_STATS_INIT;
  if (esmt_ingest(&o, &st) != ESMT_OK) {
    fprintf(stderr, "ingest: %s\n", esmt_last_error());
    return -1;
  }
  printf("ingest: %llu records; %llu clusters listed, %llu train / %llu valid clusters, %llu "
         "unclustered, %llu empty, %llu duplicate member lines\n",
         (unsigned long long)st.records, (unsigned long long)st.clusters_listed,
         (unsigned long long)st.train_clusters, (unsigned long long)st.valid_clusters,
         (unsigned long long)st.unclustered_records, (unsigned long long)st.empty_clusters,
         (unsigned long long)st.duplicate_members);
  if (g_synthetic && (st.unclustered_records != 8 || st.empty_clusters != 1 ||
                      st.duplicate_members != 1 || st.valid_clusters == 0)) {
    fprintf(stderr, "synthetic counts differ from 8 unclustered, 1 empty, 1 duplicate\n");
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_rmtree(g_dir);
  return 0;
}

/* The true cluster of every record of a split, in record order. */
static uint64_t *split_clusters(const truth *t, const char *split, size_t *n) {
  esmt_sequence_reader *r = NULL;
  assert_int_equal(esmt_sequence_reader_open(g_data, split, &r), ESMT_OK);
  esmt_sequence s = ESMT_SEQUENCE_INIT;
  int got = 0;
  size_t cap = 1024;
  uint64_t *c = malloc(cap * sizeof *c);
  *n = 0;
  while (esmt_sequence_reader_next(r, &s, &got) == ESMT_OK && got) {
    const protein *p = lookup(t, tokens_hash(s.tokens, s.length));
    assert_non_null(p);
    if (*n == cap) c = realloc(c, (cap *= 2) * sizeof *c);
    c[(*n)++] = p->ambiguous ? 0 : p->cluster;
  }
  esmt_sequence_reader_close(r);
  return c;
}

static int cmp_u64(const void *a, const void *b) {
  const uint64_t *x = a, *y = b;
  return (*x > *y) - (*x < *y);
}

static void test_validation_holds_out_whole_clusters(void **state) {
  (void)state;
  truth t;
  truth_load(&t, g_fasta, g_tsv);
  size_t nt = 0, nv = 0;
  uint64_t *tc = split_clusters(&t, "train", &nt), *vc = split_clusters(&t, "valid", &nv);
  qsort(tc, nt, sizeof *tc, cmp_u64);
  size_t shared = 0;
  for (size_t i = 0; i < nv; i++)
    if (vc[i] && bsearch(&vc[i], tc, nt, sizeof *tc, cmp_u64)) shared++;
  printf("train %zu records, valid %zu records: %zu valid records in a training cluster\n", nt,
         nv, shared);
  assert_true(nv > 0);
  assert_int_equal(shared, 0);
  free(tc);
  free(vc);
  free(t.p);
  free(t.rep_of_member);
}

static void test_index_clusters_are_true_clusters(void **state) {
  (void)state;
  truth t;
  truth_load(&t, g_fasta, g_tsv);
  size_t n = 0;
  uint64_t *truec = split_clusters(&t, "train", &n);
  esmt_dataset_manifest m;
  assert_int_equal(esmt_manifest_load(g_data, &m), ESMT_OK);
  esmt_cluster_index x;
  assert_int_equal(esmt_cluster_index_open(g_data, m.clusters[0].file, 0, m.dataset_id, n,
                                           m.clusters[0].clusters, m.clusters[0].crc32, &x),
                   ESMT_OK);
  uint64_t *first_true = malloc(x.clusters * sizeof *first_true);
  for (uint64_t c = 0; c < x.clusters; c++) {
    uint64_t first, size, rec;
    assert_int_equal(esmt_cluster_index_size(&x, c, &first, &size), ESMT_OK);
    first_true[c] = 0;
    for (uint64_t k = 0; k < size; k++) {
      assert_int_equal(esmt_cluster_index_member(&x, first + k, &rec), ESMT_OK);
      if (!truec[rec]) continue;
      if (!first_true[c]) first_true[c] = truec[rec];
      assert_true(truec[rec] == first_true[c]); /* one true cluster per index cluster */
    }
  }
  qsort(first_true, x.clusters, sizeof *first_true, cmp_u64);
  for (uint64_t c = 1; c < x.clusters; c++) /* ... and not split over two */
    assert_true(!first_true[c] || first_true[c] != first_true[c - 1]);
  printf("%llu index clusters, each one cluster of the file\n", (unsigned long long)x.clusters);
  esmt_cluster_index_close(&x);
  esmt_manifest_free(&m);
  free(first_true);
  free(truec);
  free(t.p);
  free(t.rep_of_member);
}

static esmt_loader_options cluster_loader(int epochs) {
  esmt_loader_options o = ESMT_LOADER_OPTIONS_INIT;
  o.dir = g_data;
  o.max_len = 8192 + 2; /* nothing cropped: a row is identified by its residues */
  o.tokens_per_batch = 1 << 15;
  o.sampling = ESMT_SAMPLING_CLUSTER;
  o.epochs = epochs;
  o.prefetch = 0;
  o.seed = 7;
  return o;
}

/* Each row's original residues (labels undo the masking) -> its hash. */
static int batch_rows(const esmt_batch *b, uint64_t *out) {
  int32_t *orig = malloc((size_t)b->seq_len * sizeof *orig);
  for (int r = 0; r < b->batch; r++) {
    const int32_t *tok = b->tokens + (size_t)r * b->seq_len, *lab = b->labels + (size_t)r * b->seq_len;
    int n = 0;
    for (int j = 1; j < b->seq_len; j++) { /* after <cls>, up to <eos> */
      const int32_t v = lab[j] != -100 ? lab[j] : tok[j];
      if (v == 2 || v == 1) break; /* <eos>, <pad> */
      orig[n++] = v;
    }
    out[r] = tokens_hash(orig, (size_t)n);
  }
  free(orig);
  return b->batch;
}

static int cmp_protein_cluster(const void *a, const void *b) {
  const protein *x = a, *y = b;
  if (x->cluster != y->cluster) return (x->cluster > y->cluster) - (x->cluster < y->cluster);
  return (x->seq > y->seq) - (x->seq < y->seq);
}

static void test_sampling_is_uniform(void **state) {
  (void)state;
  truth t;
  truth_load(&t, g_fasta, g_tsv);
  size_t n = 0;
  uint64_t *trainc = split_clusters(&t, "train", &n);
  free(trainc);
  const int E = g_synthetic ? 300 : 12;
  esmt_loader_options o = cluster_loader(E);
  esmt_loader *L = NULL;
  assert_int_equal(esmt_loader_create(&o, &L), ESMT_OK);
  /* draws per protein, counted in t.p (ambiguous ones aside) */
  uint64_t *draws = calloc(t.n, sizeof *draws), rows[4096], total = 0;
  esmt_batch b = ESMT_BATCH_INIT;
  while (esmt_loader_next(L, &b) == ESMT_OK) {
    const int k = batch_rows(&b, rows);
    for (int r = 0; r < k; r++) {
      const protein *p = lookup(&t, rows[r]);
      assert_non_null(p);
      draws[p - t.p]++;
      total++;
    }
  }
  esmt_loader_destroy(L);
  /* group by cluster: the cluster's draws, its training members */
  protein *byc = malloc(t.n * sizeof *byc);
  for (size_t i = 0; i < t.n; i++)
    byc[i] = (protein){draws[i], t.p[i].cluster, t.p[i].ambiguous, t.p[i].copies};
  qsort(byc, t.n, sizeof *byc, cmp_protein_cluster); /* .seq holds the draws here */
  /* members of a training cluster that were never drawn are valid-split or
   * members of the cluster; count a cluster's drawn total and the members
   * of it in the training split (those with draws, or not: split_clusters) */
  double chi = 0;
  long df = 0, clusters = 0, ambiguous = 0;
  size_t i = 0;
  while (i < t.n) {
    size_t j = i;
    uint64_t sum = 0;
    int amb = 0;
    long size = 0; /* its members (all in train: the split is by cluster), copies counted */
    while (j < t.n && byc[j].cluster == byc[i].cluster) {
      sum += byc[j].seq;
      amb |= byc[j].ambiguous;
      size += byc[j].copies;
      j++;
    }
    if (sum > 0 && !amb) {
      clusters++;
      assert_int_equal(sum, E); /* every epoch draws the cluster exactly once */
      for (size_t k = i; k < j; k++) {
        const double expect = (double)E * byc[k].copies / (double)size;
        chi += ((double)byc[k].seq - expect) * ((double)byc[k].seq - expect) / expect;
      }
      df += (long)(j - i) - 1;
    }
    ambiguous += amb && sum > 0;
    i = j;
  }
  const double z = df > 0 ? (chi - (double)df) / sqrt(2.0 * (double)df) : 0;
  printf("%llu draws over %d epochs: %ld clusters each drawn %d times (%ld with an ambiguous "
         "sequence left out); members: chi-square %.1f on %ld degrees of freedom (z = %.2f)\n",
         (unsigned long long)total, E, clusters, E, ambiguous, chi, df, z);
  assert_true(clusters > 0 && df > 0);
  assert_true(fabs(z) < 5.0);
  free(byc);
  free(draws);
  free(t.p);
  free(t.rep_of_member);
}

static int same_batch(const esmt_batch *a, const esmt_batch *b) {
  return a->batch == b->batch && a->seq_len == b->seq_len &&
         !memcmp(a->tokens, b->tokens, (size_t)a->batch * a->seq_len * sizeof(int32_t)) &&
         !memcmp(a->labels, b->labels, (size_t)a->batch * a->seq_len * sizeof(int32_t));
}

static void test_cursor_resumes_exactly(void **state) {
  (void)state;
  esmt_loader_options o = cluster_loader(0);
  esmt_loader *A = NULL, *B = NULL;
  assert_int_equal(esmt_loader_create(&o, &A), ESMT_OK);
  assert_int_equal(esmt_loader_create(&o, &B), ESMT_OK);
  esmt_batch a = ESMT_BATCH_INIT, b = ESMT_BATCH_INIT;
  for (int i = 0; i < 37; i++) assert_int_equal(esmt_loader_next(A, &a), ESMT_OK);
  char cur[512];
  assert_int_equal(esmt_loader_save_cursor(A, cur, sizeof cur), ESMT_OK);
  assert_non_null(strstr(cur, "\"sampling\":\"cluster\""));
  assert_int_equal(esmt_loader_restore_cursor(B, cur), ESMT_OK);
  for (int i = 0; i < 50; i++) { /* across an epoch boundary in the synthetic set */
    assert_int_equal(esmt_loader_next(A, &a), ESMT_OK);
    assert_int_equal(esmt_loader_next(B, &b), ESMT_OK);
    assert_true(same_batch(&a, &b));
  }
  esmt_loader_destroy(B);
  /* a sequence-sampling loader refuses the cursor, and says why */
  o.sampling = ESMT_SAMPLING_SEQUENCE;
  assert_int_equal(esmt_loader_create(&o, &B), ESMT_OK);
  assert_int_equal(esmt_loader_restore_cursor(B, cur), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "data.sampling changed"));
  esmt_loader_destroy(B);
  esmt_loader_destroy(A);
}

static void test_two_ranks_split_an_epoch(void **state) {
  (void)state;
  truth t;
  truth_load(&t, g_fasta, g_tsv);
  uint64_t *seen[2] = {calloc(t.n, sizeof(uint64_t)), calloc(t.n, sizeof(uint64_t))};
  uint64_t rows[4096];
  long batches[2] = {0, 0};
  for (int rank = 0; rank < 2; rank++) {
    esmt_loader_options o = cluster_loader(1);
    o.batch_rows = 4; /* many batches per window */
    o.rank = rank;
    o.world = 2;
    esmt_loader *L = NULL;
    assert_int_equal(esmt_loader_create(&o, &L), ESMT_OK);
    esmt_batch b = ESMT_BATCH_INIT;
    while (esmt_loader_next(L, &b) == ESMT_OK) {
      batches[rank]++;
      const int k = batch_rows(&b, rows);
      for (int r = 0; r < k; r++) seen[rank][lookup(&t, rows[r]) - t.p]++;
    }
    esmt_loader_destroy(L);
  }
  /* every drawn cluster of the one-process epoch is drawn by a rank; the
   * proteins both ranks drew are those of the repeated padding batches */
  esmt_loader_options o = cluster_loader(1);
  o.batch_rows = 4;
  esmt_loader *L = NULL;
  assert_int_equal(esmt_loader_create(&o, &L), ESMT_OK);
  esmt_batch b = ESMT_BATCH_INIT;
  long alone = 0, missing = 0, both = 0, one_batches = 0;
  uint64_t *one = calloc(t.n, sizeof(uint64_t));
  while (esmt_loader_next(L, &b) == ESMT_OK) {
    one_batches++;
    const int k = batch_rows(&b, rows);
    for (int r = 0; r < k; r++) one[lookup(&t, rows[r]) - t.p]++;
  }
  esmt_loader_destroy(L);
  for (size_t i = 0; i < t.n; i++) {
    alone += one[i] > 0;
    missing += one[i] > 0 && !seen[0][i] && !seen[1][i];
    both += seen[0][i] && seen[1][i];
  }
  const long repeated = batches[0] + batches[1] - one_batches; /* padding batches */
  printf("one process: %ld batches, %ld proteins; ranks: %ld + %ld batches (%ld repeated as "
         "padding), %ld proteins drawn by both, %ld missing\n", one_batches, alone, batches[0],
         batches[1], repeated, both, missing);
  assert_int_equal(missing, 0);
  assert_int_equal(batches[0], batches[1]);
  assert_true(repeated >= 0 && repeated <= one_batches / 2 + 1);
  if (repeated == 0) assert_int_equal(both, 0);
  assert_true(both <= repeated * 4); /* 4 rows a batch */
  free(one);
  free(seen[0]);
  free(seen[1]);
  free(t.p);
  free(t.rep_of_member);
}

/* A count of clusters held out instead of a fraction (synthetic set only:
 * its counts are known). */
static void test_valid_cluster_count(void **state) {
  (void)state;
  if (!g_synthetic) skip();
  char out[700];
  snprintf(out, sizeof out, "%s/count", g_dir);
  const char *in[1] = {g_fasta};
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  o.inputs = in;
  o.n_inputs = 1;
  o.output_dir = out;
  o.clusters = g_tsv;
  o.valid_clusters = 5;
  esmt_ingest_stats st = ESMT_INGEST_STATS_INIT;
  assert_int_equal(esmt_ingest(&o, &st), ESMT_OK);
  assert_int_equal(st.valid_clusters, 5);
  assert_int_equal(st.train_clusters, st.clusters_listed - 1 - 5 + 8); /* -1 empty, +8 own */
  o.valid_clusters = 58; /* all listed: nothing left to train on */
  snprintf(out, sizeof out, "%s/count-all", g_dir);
  assert_int_equal(esmt_ingest(&o, &st), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "would leave none to train on"));
}

/* Packed rows draw the same proteins as unpacked ones, and resume alike. */
static void test_packed_cluster_sampling(void **state) {
  (void)state;
  esmt_loader_options o = cluster_loader(1);
  o.max_len = 128;
  o.tokens_per_batch = 256; /* two rows a batch: many batches */
  o.pack = 1;
  esmt_loader *A = NULL, *B = NULL;
  assert_int_equal(esmt_loader_create(&o, &A), ESMT_OK);
  assert_int_equal(esmt_loader_create(&o, &B), ESMT_OK);
  esmt_batch a = ESMT_BATCH_INIT, b = ESMT_BATCH_INIT;
  long proteins = 0, batches = 0;
  char cur[512] = "";
  while (esmt_loader_next(A, &a) == ESMT_OK) {
    assert_true(a.num_segments > 0);
    proteins += a.num_segments;
    if (++batches == 3) assert_int_equal(esmt_loader_save_cursor(A, cur, sizeof cur), ESMT_OK);
  }
  esmt_dataset_manifest m;
  assert_int_equal(esmt_manifest_load(g_data, &m), ESMT_OK);
  printf("packed: %ld batches, %ld proteins in one epoch of %llu clusters\n", batches, proteins,
         (unsigned long long)m.clusters[0].clusters);
  assert_int_equal(proteins, (long)m.clusters[0].clusters); /* one per cluster */
  esmt_manifest_free(&m);
  if (batches > 3) { /* resume after batch 3: the same fourth batch */
    esmt_loader_destroy(A);
    assert_int_equal(esmt_loader_create(&o, &A), ESMT_OK);
    for (int i = 0; i < 4; i++) assert_int_equal(esmt_loader_next(A, &a), ESMT_OK);
    assert_int_equal(esmt_loader_restore_cursor(B, cur), ESMT_OK);
    assert_int_equal(esmt_loader_next(B, &b), ESMT_OK);
    assert_true(same_batch(&a, &b));
  }
  esmt_loader_destroy(A);
  esmt_loader_destroy(B);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validation_holds_out_whole_clusters),
      cmocka_unit_test(test_index_clusters_are_true_clusters),
      cmocka_unit_test(test_sampling_is_uniform),
      cmocka_unit_test(test_cursor_resumes_exactly),
      cmocka_unit_test(test_two_ranks_split_an_epoch),
      cmocka_unit_test(test_valid_cluster_count),
      cmocka_unit_test(test_packed_cluster_sampling),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
