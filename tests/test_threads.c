/* SPDX-License-Identifier: MIT */
/* The thread rules of esmtrain.h, two threads per rule (issue #37); run
 * under ThreadSanitizer too (ctest label tsan, scripts/test.sh):
 *  - model: two threads calling esmt_model_infer on one model get, each
 *    time, either the right embedding or ESMT_ERR_STATE naming the other
 *    call; never a wrong answer with ESMT_OK (before the check: 28, 5 and 1
 *    wrong results of 60 in three runs);
 *  - context: two threads each creating their own model on one context and
 *    inferring at once get the single-threaded answer;
 *  - trainer: a step and an evaluation of one trainer from two threads:
 *    each is done or refused, and esmt_trainer_request_stop from another
 *    thread stops a run;
 *  - loader and reader: two handles over one dataset or file, one per
 *    thread, read what one thread alone reads. */
#define _GNU_SOURCE
#include "test_util.h"
#include "cpu_dir_fixture.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"

enum { B = 2, T = 24, D = 16, ROUNDS = 40 };

static char g_data[600], g_fasta[600];
static int32_t g_tokens[B * T];

static int setup(void **state) {
  if (cpu_dir_setup(state)) return -1;
  snprintf(g_fasta, sizeof g_fasta, "%s", path_in("prot.fa"));
  if (ingest_random_proteins("p", 40, 20, 11, 5, 0.25, g_data, sizeof g_data)) return -1;
  /* two proteins, the second shorter: <cls> residues <eos> <pad>... */
  for (int b = 0; b < B; b++) {
    const int n = b ? 12 : 20;
    for (int t = 0; t < T; t++)
      g_tokens[b * T + t] = t == 0 ? ESMT_TOKEN_CLS : t <= n ? 4 + (b * 7 + t * 3) % 20
                           : t == n + 1 ? ESMT_TOKEN_EOS : ESMT_TOKEN_PAD;
  }
  return 0;
}

static esmt_model *tiny_model(esmt_context *ctx) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2;
  c.hidden_size = D;
  c.num_heads = 2;
  c.max_positions = 64;
  c.precision = ESMT_PRECISION_FP32;
  esmt_model *m = NULL;
  if (esmt_model_create(ctx, &c, 9, &m) != ESMT_OK) return NULL;
  return m;
}

/* Mean embeddings [B, D] of the fixed batch. */
static esmt_status infer(esmt_model *m, float *mean) {
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = g_tokens;
  esmt_infer_request r = ESMT_INFER_REQUEST_INIT;
  r.mean = mean;
  return esmt_model_infer(m, &b, &r);
}

typedef struct infer_job {
  esmt_model *m;        /* shared, or NULL: make one on ctx */
  esmt_context *ctx;
  const float *want;
  int ok, refused, wrong, other;
  char refusal[512];
} infer_job;

static void *infer_loop(void *arg) {
  infer_job *j = arg;
  esmt_model *m = j->m ? j->m : tiny_model(j->ctx);
  if (!m) {
    j->other++;
    return NULL;
  }
  for (int i = 0; i < ROUNDS; i++) {
    float mean[B * D];
    esmt_status st = infer(m, mean);
    if (st == ESMT_ERR_STATE) {
      j->refused++;
      snprintf(j->refusal, sizeof j->refusal, "%s", esmt_last_error());
    } else if (st) {
      j->other++;
    } else if (memcmp(mean, j->want, sizeof mean) != 0) {
      j->wrong++;
    } else {
      j->ok++;
    }
  }
  if (!j->m) esmt_model_destroy(m);
  return NULL;
}

static void run_two(infer_job *a, infer_job *b) {
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, infer_loop, a), 0);
  assert_int_equal(pthread_create(&tb, NULL, infer_loop, b), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
}

static void test_one_model_two_threads(void **state) {
  (void)state;
  esmt_model *m = tiny_model(g_ctx);
  assert_non_null(m);
  float want[B * D];
  assert_int_equal(infer(m, want), ESMT_OK);
  infer_job a = {.m = m, .want = want}, b = {.m = m, .want = want};
  run_two(&a, &b);
  print_message("one model, two threads: %d right, %d refused, %d wrong\n", a.ok + b.ok,
                a.refused + b.refused, a.wrong + b.wrong);
  assert_int_equal(a.wrong + b.wrong, 0);
  assert_int_equal(a.other + b.other, 0);
  assert_int_equal(a.ok + a.refused, ROUNDS);
  assert_true(a.ok + b.ok > 0);
  const char *refusal = a.refused ? a.refusal : b.refused ? b.refusal : NULL;
  if (refusal) { /* names the call in progress */
    assert_non_null(strstr(refusal, "esmt_model_infer: the model is in use by another thread ("));
  }
  esmt_model_destroy(m);
}

static void test_model_per_thread_one_context(void **state) {
  (void)state;
  esmt_model *m = tiny_model(g_ctx); /* same seed: the same weights in every thread */
  assert_non_null(m);
  float want[B * D];
  assert_int_equal(infer(m, want), ESMT_OK);
  esmt_model_destroy(m);
  infer_job a = {.ctx = g_ctx, .want = want}, b = {.ctx = g_ctx, .want = want};
  run_two(&a, &b);
  assert_int_equal(a.ok, ROUNDS);
  assert_int_equal(b.ok, ROUNDS);
}

/* ---- trainer ---- */
typedef struct trainer_job {
  esmt_trainer *t;
  int evaluate; /* 1: evaluate, 0: step */
  int done, refused, other;
} trainer_job;

static void *trainer_loop(void *arg) {
  trainer_job *j = arg;
  for (int i = 0; i < 6; i++) {
    esmt_status st;
    if (j->evaluate) {
      esmt_eval_metrics em = ESMT_EVAL_METRICS_INIT;
      st = esmt_trainer_evaluate(j->t, &em);
    } else {
      esmt_train_metrics tm = ESMT_TRAIN_METRICS_INIT;
      st = esmt_trainer_step(j->t, &tm);
    }
    if (!st) j->done++;
    else if (st == ESMT_ERR_STATE && strstr(esmt_last_error(), "in use by another thread")) j->refused++;
    else j->other++;
  }
  return NULL;
}

static void *stop_soon(void *arg) {
  esmt_trainer_request_stop(arg);
  return NULL;
}

static void test_trainer_two_threads(void **state) {
  (void)state;
  esmt_model *m = tiny_model(g_ctx);
  assert_non_null(m);
  esmt_loader_options lo = ESMT_LOADER_OPTIONS_INIT;
  lo.dir = g_data;
  lo.max_len = 32;
  lo.batch_rows = 2;
  lo.tokens_per_batch = 64;
  esmt_loader *train = NULL, *valid = NULL;
  assert_int_equal(esmt_loader_create(&lo, &train), ESMT_OK);
  lo.split = ESMT_SPLIT_VALID;
  lo.epochs = 1;
  lo.shuffle = 0;
  assert_int_equal(esmt_loader_create(&lo, &valid), ESMT_OK);
  esmt_batch_source ts = ESMT_BATCH_SOURCE_INIT, vs = ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_loader_as_source(train, &ts), ESMT_OK);
  assert_int_equal(esmt_loader_as_source(valid, &vs), ESMT_OK);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  o.log_every = 0;
  esmt_trainer *t = NULL;
  assert_int_equal(esmt_trainer_create(m, &o, &ts, &t), ESMT_OK);
  assert_int_equal(esmt_trainer_set_eval_source(t, &vs), ESMT_OK);
  trainer_job a = {.t = t, .evaluate = 0}, b = {.t = t, .evaluate = 1};
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, trainer_loop, &a), 0);
  assert_int_equal(pthread_create(&tb, NULL, trainer_loop, &b), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  assert_int_equal(a.other + b.other, 0);
  assert_int_equal(a.done + a.refused, 6);
  assert_int_equal(esmt_trainer_step_count(t), a.done);
  /* a stop from another thread ends an endless run */
  pthread_t ts_;
  assert_int_equal(pthread_create(&ts_, NULL, stop_soon, t), 0);
  pthread_join(ts_, NULL);
  assert_int_equal(esmt_trainer_run(t), ESMT_ERR_CANCELLED);
  esmt_trainer_destroy(t);
  esmt_loader_destroy(valid);
  esmt_loader_destroy(train);
  esmt_model_destroy(m);
}

/* ---- loader and reader: one handle per thread ---- */
typedef struct read_job {
  int loader; /* 1: a loader over the dataset, 0: a reader over the FASTA */
  uint64_t sum, count;
  int failed;
} read_job;

static void *read_all(void *arg) {
  read_job *j = arg;
  if (j->loader) {
    esmt_loader_options lo = ESMT_LOADER_OPTIONS_INIT;
    lo.dir = g_data;
    lo.max_len = 32;
    lo.batch_rows = 2;
    lo.tokens_per_batch = 64;
    lo.epochs = 1;
    lo.shuffle = 0;
    lo.fixed_masking = 1;
    esmt_loader *l = NULL;
    if (esmt_loader_create(&lo, &l)) { j->failed = 1; return NULL; }
    esmt_batch b = ESMT_BATCH_INIT;
    for (;;) {
      esmt_status st = esmt_loader_next(l, &b);
      if (st == ESMT_ERR_STATE) break; /* the epoch is done */
      if (st) { j->failed = 1; break; }
      for (int i = 0; i < b.batch * b.seq_len; i++)
        j->sum = j->sum * 31 + (uint64_t)b.tokens[i] * 7 + (uint64_t)(b.labels[i] + 2);
      j->count++;
    }
    esmt_loader_destroy(l);
    return NULL;
  }
  esmt_sequence_reader *r = NULL;
  if (esmt_sequence_reader_open(g_fasta, NULL, &r)) { j->failed = 1; return NULL; }
  esmt_sequence s = ESMT_SEQUENCE_INIT;
  int got = 0;
  while (!esmt_sequence_reader_next(r, &s, &got) && got) {
    for (uint64_t i = 0; i < s.length; i++) j->sum = j->sum * 31 + (uint64_t)s.tokens[i];
    j->count++;
  }
  esmt_sequence_reader_close(r);
  return NULL;
}

static void test_handle_per_thread(void **state) {
  (void)state;
  for (int loader = 0; loader <= 1; loader++) {
    read_job alone = {.loader = loader}, a = {.loader = loader}, b = {.loader = loader};
    read_all(&alone);
    assert_false(alone.failed);
    assert_true(alone.count > 0);
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, read_all, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, read_all, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_false(a.failed || b.failed);
    assert_int_equal(a.count, alone.count);
    assert_int_equal(b.count, alone.count);
    assert_true(a.sum == alone.sum && b.sum == alone.sum);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_model_two_threads),
      cmocka_unit_test(test_model_per_thread_one_context),
      cmocka_unit_test(test_trainer_two_threads),
      cmocka_unit_test(test_handle_per_thread),
  };
  return cmocka_run_group_tests(tests, setup, cpu_dir_teardown);
}
