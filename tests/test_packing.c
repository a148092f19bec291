/* SPDX-License-Identifier: MIT */
/* Packed rows end to end (issue #8 item 3):
 *  - model: a packed micro-batch gives the loss, logits and gradients of
 *    the same sequences right-padded one per row (which test_model_reference
 *    ties to the float64 PyTorch reference), rel <= 1e-5;
 *  - loader: every record of an epoch exactly once, rows within max_len,
 *    segments inside rows, padding between them, resume mid-epoch gives
 *    the same batches, ranks together see the batches one process sees;
 *  - real-token counting in the forward result, the trainer and the
 *    loader stats;
 *  - data.pack: on with a backend lacking packed rows fails clearly, auto
 *    follows the backend. */
#define _GNU_SOURCE
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "model.h"
#include "trainer.h"
#include "trainer_fixture.h"

#define ASSERT_OK(x)                                                        \
  do {                                                                      \
    esmt_status st_ = (x);                                                  \
    if (st_ != ESMT_OK) fail_msg("%s -> %d: %s", #x, st_, esmt_last_error()); \
  } while (0)

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

/* ------------------------------------------------------------------ */
/* (a) packed == right-padded through the model                        */
/* ------------------------------------------------------------------ */

enum { NS = 6 };
static const int seq_lens[NS] = {25, 7, 17, 10, 3, 32}; /* tokens incl. cls/eos */

/* Sequence s: cls, residues, eos; ~15% of residues masked (labels). */
static void make_seq(int s, int32_t *tok, int32_t *lab) {
  const int n = seq_lens[s];
  for (int k = 0; k < n; k++) {
    lab[k] = ESMT_LABEL_IGNORE;
    if (k == 0) { tok[k] = ESMT_TOKEN_CLS; continue; }
    if (k == n - 1) { tok[k] = ESMT_TOKEN_EOS; continue; }
    tok[k] = 4 + (int32_t)(rnd() % 20);
    if (rnd() % 100 < 15 || k == 1) {
      lab[k] = tok[k];
      tok[k] = rnd() % 5 ? ESMT_TOKEN_MASK : 4 + (int32_t)(rnd() % 20);
    }
  }
}

static double rel_diff(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Loss, logits [B*T*V] and gradients of one batch from fresh zero grads. */
static void run_batch(esmt_model *m, const esmt_batch *b, esmt_forward_result *r, float *logits,
                      float *grads) {
  ASSERT_OK(esmt_model_zero_grad(m));
  ASSERT_OK(esmt_model_forward(m, b, r, logits));
  ASSERT_OK(esmt_model_backward(m));
  ASSERT_OK(esmt_flat_download(m, grads, m->mem.grads));
}

static void test_model_packed_equals_padded(void **state) {
  (void)state;
  esmt_model *m = fixture_model(); /* max_positions 64 */
  const int V = m->V;
  int32_t stok[NS][32], slab[NS][32];
  for (int s = 0; s < NS; s++) make_seq(s, stok[s], slab[s]);
  /* unpacked: one sequence per row, T = the longest */
  enum { UT = 32 };
  int32_t utok[NS * UT], ulab[NS * UT];
  for (int i = 0; i < NS * UT; i++) { utok[i] = ESMT_TOKEN_PAD; ulab[i] = ESMT_LABEL_IGNORE; }
  for (int s = 0; s < NS; s++) {
    memcpy(utok + s * UT, stok[s], (size_t)seq_lens[s] * sizeof(int32_t));
    memcpy(ulab + s * UT, slab[s], (size_t)seq_lens[s] * sizeof(int32_t));
  }
  /* packed into rows of 40: [25, 7] (+8 pad), [17, 10, 3] (+10), [32] (+8) */
  enum { PB = 3, PT = 40 };
  const int order[NS] = {0, 1, 2, 3, 4, 5}, row_of[NS] = {0, 0, 1, 1, 1, 2};
  int32_t ptok[PB * PT], plab[PB * PT], start[NS], len[NS];
  for (int i = 0; i < PB * PT; i++) { ptok[i] = ESMT_TOKEN_PAD; plab[i] = ESMT_LABEL_IGNORE; }
  int fill[PB] = {0};
  for (int k = 0; k < NS; k++) {
    const int s = order[k], r = row_of[k];
    start[k] = r * PT + fill[r];
    len[k] = seq_lens[s];
    memcpy(ptok + start[k], stok[s], (size_t)len[k] * sizeof(int32_t));
    memcpy(plab + start[k], slab[s], (size_t)len[k] * sizeof(int32_t));
    fill[r] += len[k];
  }
  esmt_batch ub = ESMT_BATCH_INIT, pb = ESMT_BATCH_INIT;
  ub.batch = NS; ub.seq_len = UT; ub.tokens = utok; ub.labels = ulab;
  pb.batch = PB; pb.seq_len = PT; pb.tokens = ptok; pb.labels = plab;
  pb.num_segments = NS; pb.seg_start = start; pb.seg_len = len;
  const uint64_t P = m->layout.total;
  float *ug = malloc(P * sizeof *ug), *pg = malloc(P * sizeof *pg);
  float *ul = malloc((size_t)NS * UT * V * sizeof *ul), *pl = malloc((size_t)PB * PT * V * sizeof *pl);
  assert_true(ug && pg && ul && pl);
  for (size_t i = 0; i < (size_t)PB * PT * V; i++) pl[i] = NAN;
  esmt_forward_result ur = ESMT_FORWARD_RESULT_INIT, pr = ESMT_FORWARD_RESULT_INIT;
  run_batch(m, &ub, &ur, ul, ug);
  run_batch(m, &pb, &pr, pl, pg);
  /* counts: the same selected and real tokens */
  uint64_t real = 0;
  for (int s = 0; s < NS; s++) real += (uint64_t)seq_lens[s];
  assert_int_equal(ur.selected, pr.selected);
  assert_int_equal(pr.real_tokens, real);
  assert_int_equal(ur.real_tokens, real);
  const double lrel = fabs(pr.loss - ur.loss) / fabs(ur.loss);
  print_message("packed vs padded: loss %.9g vs %.9g (rel %.2e)\n", pr.loss, ur.loss, lrel);
  assert_true(lrel <= 1e-6);
  /* logits token by token; padding positions 0 */
  int seg_of[PB * PT];
  for (int i = 0; i < PB * PT; i++) seg_of[i] = -1;
  for (int k = 0; k < NS; k++)
    for (int j = 0; j < len[k]; j++) seg_of[start[k] + j] = k;
  double worst = 0;
  for (int i = 0; i < PB * PT; i++) {
    const float *p = pl + (size_t)i * V;
    if (seg_of[i] < 0) {
      for (int v = 0; v < V; v++) assert_true(p[v] == 0.0f);
      continue;
    }
    const int k = seg_of[i], s = order[k];
    const float *u = ul + ((size_t)s * UT + (size_t)(i - start[k])) * V;
    const double d = rel_diff(p, u, (size_t)V);
    if (d > worst) worst = d;
  }
  print_message("packed vs padded: worst logits row rel %.2e\n", worst);
  assert_true(worst <= 1e-5);
  const double grel = rel_diff(pg, ug, (size_t)P);
  print_message("packed vs padded: gradients rel %.2e over %llu parameters\n", grel,
                (unsigned long long)P);
  assert_true(grel <= 1e-5);
  /* and tensor by tensor (a small tensor's error is not hidden by a big one) */
  for (int t = 0; t < m->layout.count; t++) {
    const esmt_tensor_info *ti = &m->layout.tensors[t];
    const double d = rel_diff(pg + ti->offset, ug + ti->offset, ti->numel);
    if (d > 1e-5) fail_msg("%s: gradient rel %.3g > 1e-5", ti->name, d);
  }
  /* activation recompute re-runs each layer inside backward: with packed
   * rows it must pick up the same segments (bit-identical gradients) */
  float *rg = malloc(P * sizeof *rg);
  assert_non_null(rg);
  esmt_forward_result rr = ESMT_FORWARD_RESULT_INIT;
  ASSERT_OK(esmt_model_set_recompute(m, 1));
  run_batch(m, &pb, &rr, NULL, rg);
  ASSERT_OK(esmt_model_set_recompute(m, 0));
  assert_true(rr.loss == pr.loss);
  assert_memory_equal(rg, pg, P * sizeof *rg);
  free(rg);
  /* a caller from before segments (shorter esmt_batch, junk after it) gets
   * the right-padded result */
  struct { esmt_batch b; int32_t junk[8]; } oldb;
  memset(&oldb, 0x7F, sizeof oldb);
  memcpy(&oldb.b, &ub, offsetof(esmt_batch, num_segments));
  oldb.b.struct_size = (uint32_t)offsetof(esmt_batch, num_segments);
  esmt_forward_result orr = ESMT_FORWARD_RESULT_INIT;
  ASSERT_OK(esmt_model_forward(m, &oldb.b, &orr, NULL));
  assert_true(orr.loss == ur.loss && orr.real_tokens == real);
  /* a backend without packed rows refuses the batch with a clear message */
  esmtb_ops no_varlen = *m->ops;
  no_varlen.caps &= ~(uint32_t)ESMTB_CAP_VARLEN;
  const esmtb_ops *saved = m->ops;
  m->ops = &no_varlen;
  assert_int_equal(esmt_model_forward(m, &pb, &pr, NULL), ESMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(esmt_last_error(), "packed rows"));
  m->ops = saved;
  /* bad segments are refused before anything runs */
  start[1] = start[0] + 3; /* overlaps segment 0 */
  assert_int_equal(esmt_model_forward(m, &pb, &pr, NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "segment 1"));
  start[1] = start[0] + len[0];
  ptok[PT - 1] = 5; /* a residue in a gap */
  assert_int_equal(esmt_model_forward(m, &pb, &pr, NULL), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "no segment"));
  free(ug); free(pg); free(ul); free(pl);
  esmt_model_destroy(m);
}

/* ------------------------------------------------------------------ */
/* (b) the packing loader                                              */
/* ------------------------------------------------------------------ */

enum { NREC = 300, MAXLEN = 64 };
static char g_dir[4096];
static int32_t *g_rec[NREC]; /* residue tokens of record i */
static int g_len[NREC];

/* A FASTA of NREC proteins of 1..140 residues (some longer than a row),
 * ingested once into g_dir (no validation split). */
static int data_setup(void **state) {
  if (fixture_setup(state)) return -1;
  const char *tmp = test_mkdtemp();
  char fa[4200];
  snprintf(fa, sizeof fa, "%s/p.fa", tmp);
  snprintf(g_dir, sizeof g_dir, "%s/data", tmp);
  FILE *f = fopen(fa, "w");
  if (!f) return -1;
  static const char AA[] = "ACDEFGHIKLMNPQRSTVWY";
  for (int i = 0; i < NREC; i++) {
    g_len[i] = 1 + (int)(rnd() % (i % 10 == 0 ? 140 : 60));
    g_rec[i] = malloc((size_t)g_len[i] * sizeof(int32_t));
    fprintf(f, ">r%d\n", i);
    for (int k = 0; k < g_len[i]; k++) {
      const char c = AA[rnd() % 20];
      g_rec[i][k] = esmt_token_id(c);
      fputc(c, f);
    }
    fputc('\n', f);
  }
  fclose(f);
  const char *inputs[1] = {fa};
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  o.inputs = inputs;
  o.n_inputs = 1;
  o.output_dir = g_dir;
  o.valid_fraction = 0;
  esmt_ingest_stats s = ESMT_INGEST_STATS_INIT;
  if (esmt_ingest(&o, &s) != ESMT_OK || s.train_records != NREC) return -1;
  return 0;
}
static int data_teardown(void **state) {
  for (int i = 0; i < NREC; i++) free(g_rec[i]);
  return fixture_teardown(state);
}

static esmt_loader_options pack_opts(int pack, int prefetch) {
  esmt_loader_options o = ESMT_LOADER_OPTIONS_INIT;
  o.dir = g_dir;
  o.seed = 11;
  o.max_len = MAXLEN;
  o.batch_rows = 3;
  o.epochs = 1;
  o.prefetch = prefetch;
  o.pack = pack;
  return o;
}

/* The record a segment shows (original tokens: labels where masked), or
 * -1: its tokens must be a window of cls + residues + eos. */
static int find_record(const int32_t *tok, const int32_t *lab, int n, const int *used) {
  for (int i = 0; i < NREC; i++) {
    if (used[i]) continue;
    const int full = g_len[i] + 2;
    if (n != (full < MAXLEN ? full : MAXLEN)) continue;
    for (int st = 0; st + n <= full; st++) {
      int k = 0;
      for (; k < n; k++) {
        const int v = st + k;
        const int32_t want = v == 0 ? ESMT_TOKEN_CLS : v == full - 1 ? ESMT_TOKEN_EOS : g_rec[i][v - 1];
        const int32_t got = lab[k] >= 0 ? lab[k] : tok[k];
        if (got != want) break;
      }
      if (k == n) return i;
    }
  }
  return -1;
}

/* A batch as one comparable blob. */
typedef struct blob { size_t n; int32_t *v; } blob;
static blob snap(const esmt_batch *b) {
  const size_t N = (size_t)b->batch * b->seq_len;
  blob x;
  x.n = 3 + 2 * N + 2 * (size_t)b->num_segments;
  x.v = malloc(x.n * sizeof *x.v);
  assert_non_null(x.v);
  x.v[0] = b->batch; x.v[1] = b->seq_len; x.v[2] = b->num_segments;
  memcpy(x.v + 3, b->tokens, N * sizeof(int32_t));
  memcpy(x.v + 3 + N, b->labels, N * sizeof(int32_t));
  memcpy(x.v + 3 + 2 * N, b->seg_start, (size_t)b->num_segments * sizeof(int32_t));
  memcpy(x.v + 3 + 2 * N + b->num_segments, b->seg_len, (size_t)b->num_segments * sizeof(int32_t));
  return x;
}
static int blob_eq(blob a, blob b) { return a.n == b.n && !memcmp(a.v, b.v, a.n * sizeof *a.v); }

/* All batches of one epoch. */
static int read_epoch(esmt_loader_options o, blob *out, int cap) {
  esmt_loader *L = NULL;
  ASSERT_OK(esmt_loader_create(&o, &L));
  int n = 0;
  esmt_batch b = ESMT_BATCH_INIT;
  while (esmt_loader_next(L, &b) == ESMT_OK) {
    assert_true(n < cap);
    out[n++] = snap(&b);
  }
  esmt_loader_destroy(L);
  return n;
}

static void test_loader_epoch(void **state) {
  (void)state;
  esmt_loader_options o = pack_opts(1, 0);
  esmt_loader *L = NULL;
  ASSERT_OK(esmt_loader_create(&o, &L));
  int used[NREC] = {0}, batches = 0;
  uint64_t real = 0, padded = 0;
  esmt_batch b = ESMT_BATCH_INIT;
  while (esmt_loader_next(L, &b) == ESMT_OK) {
    batches++;
    const int T = b.seq_len;
    assert_true(T >= 1 && T <= MAXLEN);
    assert_true(b.batch >= 1 && b.batch <= o.batch_rows);
    assert_true(b.num_segments >= b.batch);
    int64_t next = 0;
    for (int s = 0; s <= b.num_segments; s++) {
      const int64_t st = s < b.num_segments ? b.seg_start[s] : (int64_t)b.batch * T;
      const int n = s < b.num_segments ? b.seg_len[s] : 0;
      assert_true(st >= next); /* ascending, disjoint */
      for (int64_t k = next; k < st; k++) /* gaps: padding, no label */
        assert_true(b.tokens[k] == ESMT_TOKEN_PAD && b.labels[k] == ESMT_LABEL_IGNORE);
      if (s == b.num_segments) break;
      assert_true(n >= 1 && st / T == (st + n - 1) / T); /* inside one row */
      const int r = find_record(b.tokens + st, b.labels + st, n, used);
      if (r < 0) fail_msg("batch %d segment %d matches no unused record", batches, s);
      used[r]++;
      real += (uint64_t)n;
      next = st + n;
    }
    padded += (uint64_t)b.batch * T;
  }
  for (int i = 0; i < NREC; i++)
    if (used[i] != 1) fail_msg("record %d seen %d times in the epoch", i, used[i]);
  esmt_loader_stats s = {.struct_size = sizeof s};
  ASSERT_OK(esmt_loader_stats_get(L, &s));
  assert_int_equal(s.real_tokens, real);
  assert_int_equal(s.padded_tokens, padded);
  assert_int_equal(s.batches, (uint64_t)batches);
  esmt_loader_destroy(L);
  /* the same records unpacked: more padding */
  esmt_loader_options u = pack_opts(0, 0);
  u.batch_rows = 0;
  u.tokens_per_batch = 3 * MAXLEN;
  ASSERT_OK(esmt_loader_create(&u, &L));
  while (esmt_loader_next(L, &b) == ESMT_OK) assert_int_equal(b.num_segments, 0);
  esmt_loader_stats us = {.struct_size = sizeof us};
  ASSERT_OK(esmt_loader_stats_get(L, &us));
  esmt_loader_destroy(L);
  assert_int_equal(us.real_tokens, real);
  print_message("padding: packed %.1f%% in %d batches, unpacked %.1f%% (same %llu tokens)\n",
                100 * s.padding_fraction, batches, 100 * us.padding_fraction,
                (unsigned long long)real);
  assert_true(s.padding_fraction < us.padding_fraction);
  assert_true(s.padding_fraction < 0.05);
  /* a caller with the esmt_batch from before segments: unpacked batches
   * fill only its fields, packed ones are refused */
  struct { esmt_batch b; int32_t guard[8]; } old;
  memset(&old, 0x5A, sizeof old);
  old.b.struct_size = (uint32_t)offsetof(esmt_batch, num_segments);
  ASSERT_OK(esmt_loader_create(&u, &L));
  ASSERT_OK(esmt_loader_next(L, &old.b));
  assert_int_equal(old.b.struct_size, offsetof(esmt_batch, num_segments));
  assert_true(old.b.batch >= 1 && old.b.tokens != NULL);
  const unsigned char *tail = (const unsigned char *)&old.b + offsetof(esmt_batch, num_segments);
  for (size_t i = 0; i < sizeof old - offsetof(esmt_batch, num_segments); i++)
    assert_int_equal(tail[i], 0x5A);
  esmt_loader_destroy(L);
  ASSERT_OK(esmt_loader_create(&o, &L));
  assert_int_equal(esmt_loader_next(L, &old.b), ESMT_ERR_ABI);
  assert_non_null(strstr(esmt_last_error(), "segment"));
  esmt_loader_destroy(L);
}

/* Deterministic for a seed, with and without prefetch; a cursor saved
 * mid-epoch resumes with the same batches; an unpacked cursor is refused. */
static void test_loader_resume(void **state) {
  (void)state;
  enum { CAP = 256 };
  blob *all = calloc(CAP, sizeof *all), *again = calloc(CAP, sizeof *again);
  const int n = read_epoch(pack_opts(1, 0), all, CAP);
  assert_true(n > 6);
  assert_int_equal(read_epoch(pack_opts(1, 3), again, CAP), n);
  for (int i = 0; i < n; i++) assert_true(blob_eq(all[i], again[i]));
  for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
    esmt_loader_options o = pack_opts(1, prefetch);
    esmt_loader *L = NULL, *R = NULL;
    ASSERT_OK(esmt_loader_create(&o, &L));
    esmt_batch b = ESMT_BATCH_INIT;
    const int k = n / 2;
    for (int i = 0; i < k; i++) ASSERT_OK(esmt_loader_next(L, &b));
    char cur[256];
    ASSERT_OK(esmt_loader_save_cursor(L, cur, sizeof cur));
    assert_non_null(strstr(cur, "\"pack\":1"));
    ASSERT_OK(esmt_loader_create(&o, &R));
    ASSERT_OK(esmt_loader_restore_cursor(R, cur));
    for (int i = k; i < n; i++) {
      ASSERT_OK(esmt_loader_next(R, &b));
      blob x = snap(&b);
      if (!blob_eq(x, all[i])) fail_msg("prefetch %d: batch %d after resume differs", prefetch, i);
      free(x.v);
    }
    assert_int_equal(esmt_loader_next(R, &b), ESMT_ERR_STATE);
    esmt_loader_destroy(R);
    /* an unpacked loader refuses the packed cursor (data.pack changed) */
    esmt_loader_options u = pack_opts(0, prefetch);
    ASSERT_OK(esmt_loader_create(&u, &R));
    assert_int_equal(esmt_loader_restore_cursor(R, cur), ESMT_ERR_FORMAT);
    assert_non_null(strstr(esmt_last_error(), "data.pack"));
    esmt_loader_destroy(R);
    esmt_loader_destroy(L);
  }
  /* two ranks together: the one-process batches (a window's short rounds
   * repeat its first batches), the same count each */
  blob *r0 = calloc(CAP, sizeof *r0), *r1 = calloc(CAP, sizeof *r1);
  esmt_loader_options o0 = pack_opts(1, 0), o1 = pack_opts(1, 0);
  o0.world = o1.world = 2;
  o1.rank = 1;
  const int n0 = read_epoch(o0, r0, CAP), n1 = read_epoch(o1, r1, CAP);
  assert_int_equal(n0, n1);
  assert_true(n0 + n1 >= n && n0 + n1 <= n + 8);
  for (int i = 0; i < n; i++) { /* every one-process batch is served by a rank */
    int found = 0;
    for (int j = 0; j < n0 && !found; j++) found = blob_eq(all[i], r0[j]) || blob_eq(all[i], r1[j]);
    if (!found) fail_msg("batch %d of one process is served by no rank", i);
  }
  for (int j = 0; j < n0; j++) { /* and nothing else */
    int f0 = 0, f1 = 0;
    for (int i = 0; i < n; i++) {
      f0 |= blob_eq(r0[j], all[i]);
      f1 |= blob_eq(r1[j], all[i]);
    }
    assert_true(f0 && f1);
  }
  for (int i = 0; i < CAP; i++) {
    free(all[i].v); free(again[i].v); free(r0[i].v); free(r1[i].v);
  }
  free(all); free(again); free(r0); free(r1);
}

/* ------------------------------------------------------------------ */
/* (c) real tokens in the trainer's metrics                            */
/* ------------------------------------------------------------------ */

static void test_trainer_counts_real_tokens(void **state) {
  (void)state;
  esmt_model *m = fixture_model();
  esmt_loader_options o = pack_opts(1, 0);
  o.epochs = 0;
  esmt_loader *L = NULL, *peek = NULL;
  ASSERT_OK(esmt_loader_create(&o, &L));
  ASSERT_OK(esmt_loader_create(&o, &peek));
  esmt_batch_source src;
  ASSERT_OK(esmt_loader_as_source(L, &src));
  esmt_trainer_options to = ESMT_TRAINER_OPTIONS_INIT;
  esmt_schedule to_sched = ESMT_SCHEDULE_INIT;
  to.schedule = &to_sched;
  to.log_every = 0;
  to_sched.warmup_steps = 1;
  to_sched.total_steps = 10;
  to.max_steps = 10;
  esmt_trainer *t = NULL;
  ASSERT_OK(esmt_trainer_create(m, &to, &src, &t));
  uint64_t expect = 0;
  for (int step = 0; step < 3; step++) {
    esmt_batch b = ESMT_BATCH_INIT;
    ASSERT_OK(esmt_loader_next(peek, &b));
    uint64_t seg = 0, nonpad = 0;
    for (int s = 0; s < b.num_segments; s++) seg += (uint64_t)b.seg_len[s];
    for (int i = 0; i < b.batch * b.seq_len; i++) nonpad += b.tokens[i] != ESMT_TOKEN_PAD;
    assert_int_equal(seg, nonpad);
    assert_true(seg <= (uint64_t)b.batch * b.seq_len);
    expect += seg;
    esmt_train_metrics mt = {.struct_size = sizeof mt};
    ASSERT_OK(esmt_trainer_step(t, &mt));
    assert_int_equal(mt.tokens, expect);
    assert_true(isfinite(mt.loss) && mt.loss > 0);
  }
  esmt_loader_stats s = {.struct_size = sizeof s};
  ASSERT_OK(esmt_loader_stats_get(peek, &s));
  assert_int_equal(s.real_tokens, expect);
  esmt_trainer_destroy(t);
  esmt_loader_destroy(L);
  esmt_loader_destroy(peek);
  esmt_model_destroy(m);
}

/* ------------------------------------------------------------------ */
/* (d) data.pack                                                       */
/* ------------------------------------------------------------------ */

static esmt_config *pack_config(const char *pack, const char *out) {
  esmt_config *c = NULL;
  ASSERT_OK(esmt_config_create(&c));
  const char *kv[][2] = {{"model.num_layers", "1"}, {"model.hidden_size", "32"},
                         {"model.num_heads", "2"}, {"model.ffn_size", "64"},
                         {"model.max_positions", "64"}, {"data.max_len", "64"},
                         {"data.micro_batch", "2"}, {"data.train_dir", g_dir},
                         {"train.max_steps", "2"}, {"train.eval_every", "0"},
                         {"schedule.warmup_steps", "1"}, {"train.out_dir", out},
                         {"data.pack", pack}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) ASSERT_OK(esmt_config_set(c, kv[i][0], kv[i][1]));
  return c;
}

/* Create a trainer from config on `ops` (the context's backend swapped);
 * *packs is whether its loader packs. */
static esmt_status create_on(const esmtb_ops *ops, const char *pack, int *packs) {
  esmt_backend_entry fake = *g_ctx->backend;
  const esmt_backend_entry *real = g_ctx->backend;
  fake.ops = ops;
  g_ctx->backend = &fake;
  esmt_config *c = pack_config(pack, "");
  esmt_trainer *t = NULL;
  esmt_status st = esmt_trainer_create_from_config(g_ctx, c, NULL, &t);
  if (!st) {
    char cur[256];
    ASSERT_OK(esmt_loader_save_cursor(t->owned_train, cur, sizeof cur));
    *packs = strstr(cur, "\"pack\":1") != NULL;
    esmt_train_metrics mt = {.struct_size = sizeof mt};
    ASSERT_OK(esmt_trainer_step(t, &mt)); /* and it trains */
  }
  esmt_trainer_destroy(t);
  esmt_config_destroy(c);
  g_ctx->backend = real;
  return st;
}

static void test_config_pack(void **state) {
  (void)state;
  const esmtb_ops *cpu = g_ctx->backend->ops;
  int packs = -1;
  /* the cpu backend has the cap: auto stays off (host memory), on packs */
  ASSERT_OK(create_on(cpu, "auto", &packs));
  assert_int_equal(packs, 0);
  ASSERT_OK(create_on(cpu, "on", &packs));
  assert_int_equal(packs, 1);
  ASSERT_OK(create_on(cpu, "off", &packs));
  assert_int_equal(packs, 0);
  /* a device-memory backend with the cap: auto packs */
  esmtb_ops dev = *cpu;
  dev.caps &= ~(uint32_t)ESMTB_CAP_HOST_ADDRESSABLE;
  ASSERT_OK(create_on(&dev, "auto", &packs));
  assert_int_equal(packs, 1);
  /* without the cap: auto off, on is an error */
  esmtb_ops old = dev;
  old.caps &= ~(uint32_t)ESMTB_CAP_VARLEN;
  ASSERT_OK(create_on(&old, "auto", &packs));
  assert_int_equal(packs, 0);
  assert_int_equal(create_on(&old, "on", &packs), ESMT_ERR_UNSUPPORTED);
  const char *msg = esmt_last_error();
  if (!strstr(msg, "data.pack") || !strstr(msg, "packed rows") || !strstr(msg, cpu->name))
    fail_msg("unclear message: %s", msg);
  print_message("data.pack on without the cap: %s\n", msg);
  /* the key is an enum */
  esmt_config *c = NULL;
  ASSERT_OK(esmt_config_create(&c));
  assert_int_not_equal(esmt_config_set(c, "data.pack", "maybe"), ESMT_OK);
  esmt_config_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_model_packed_equals_padded),
      cmocka_unit_test(test_loader_epoch),
      cmocka_unit_test(test_loader_resume),
      cmocka_unit_test(test_trainer_counts_real_tokens),
      cmocka_unit_test(test_config_pack),
  };
  return cmocka_run_group_tests(tests, data_setup, data_teardown);
}
