/* SPDX-License-Identifier: MIT */
/* The MPI communicator plugin (plugins/comm_mpi) under mpirun: every rank
 * runs this cmocka suite against the plugin dlopen()ed from
 * $ESMT_MPI_COMM_PLUGIN - no esmtrain library is linked, only the plugin's
 * table (comm_plugin.h) and the ring's summation order (comm_ring.h).
 *
 * Sums must be bitwise the TCP ring's: each rank computes them locally in
 * comm_ring.h's order from data mixing 1e8 and 1e-8 (so the order shows in
 * the bits) and compares. Checks that can fail on one rank only are
 * collected and agreed on at the end of each test (an allgather on the
 * shared communicator), so all ranks fail the same test together and stay in
 * step instead of waiting on each other's skipped collectives. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "esmtrain/comm_plugin.h"
#include "esmtrain/comm_ring.h"

enum { F32 = 1, F64 = 2, I64 = 3 };

static const esmt_comm_plugin *P;
static void *g_comm; /* the healthy communicator every test shares */
static int R, W;
static char g_fail[512]; /* this rank's first failed check in the current test */

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond) && !g_fail[0]) {                                      \
      int n_ = snprintf(g_fail, sizeof g_fail, "%s:%d: ", __FILE__, __LINE__); \
      snprintf(g_fail + n_, sizeof g_fail - (size_t)n_, __VA_ARGS__); \
    }                                                                 \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Every rank learns whether any rank failed a check; all fail together. */
static void agree(void) {
  int mine = g_fail[0] != 0, all[64] = {0};
  assert_true(W <= 64);
  int st = P->allgather(g_comm, &mine, sizeof mine, all);
  if (st != 0) fail_msg("rank %d: agreeing on the verdict failed: %s", R, P->last_error(g_comm));
  int bad = -1;
  for (int k = 0; k < W; k++)
    if (all[k] && bad < 0) bad = k;
  if (mine) {
    char msg[sizeof g_fail];
    memcpy(msg, g_fail, sizeof msg);
    g_fail[0] = '\0';
    fail_msg("rank %d: %s", R, msg);
  }
  if (bad >= 0) fail_msg("rank %d failed a check (see its output)", bad);
}

/* ---- data ------------------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Rank r's value of element i: magnitudes 1e8 .. 1e-8 mixed, signs mixed. */
static double val(int r, size_t i, unsigned salt) {
  static const double mags[] = {1e8, 1.0, 1e-8, 3e3, 1e8, 0.1, 1e-8};
  uint64_t h = mix(((uint64_t)r << 48) ^ ((uint64_t)salt << 40) ^ (uint64_t)i);
  double frac = 1.0 + (double)((h >> 8) & 0xfffff) / 1048576.0;
  return ((h >> 40) & 1 ? -1.0 : 1.0) * mags[h % 7] * frac;
}

static void fill(void *buf, size_t lo, size_t hi, int dtype, int r, unsigned salt) {
  for (size_t i = lo; i < hi; i++) {
    if (dtype == F32) ((float *)buf)[i] = (float)val(r, i, salt);
    else if (dtype == F64) ((double *)buf)[i] = val(r, i, salt);
    else ((uint64_t *)buf)[i] = mix(((uint64_t)r << 48) ^ ((uint64_t)salt << 40) ^ (uint64_t)i);
  }
}

/* The ring's sum of element i: x_first, then x_next + acc, ... (comm_ring.h). */
static void ring_sum(void *out, size_t i, int dtype, int first, unsigned salt) {
  if (dtype == F32) {
    float acc = (float)val(first, i, salt);
    for (int j = 1; j < W; j++) acc = (float)val((first + j) % W, i, salt) + acc;
    ((float *)out)[i] = acc;
  } else if (dtype == F64) {
    double acc = val(first, i, salt);
    for (int j = 1; j < W; j++) acc = val((first + j) % W, i, salt) + acc;
    ((double *)out)[i] = acc;
  } else {
    uint64_t acc = 0;
    for (int q = 0; q < W; q++)
      acc += mix(((uint64_t)q << 48) ^ ((uint64_t)salt << 40) ^ (uint64_t)i);
    ((uint64_t *)out)[i] = acc;
  }
}

/* The same f32 sum in the opposite rank order. */
static float reverse_sum_f32(size_t i, int first, unsigned salt) {
  float acc = (float)val(first, i, salt);
  for (int j = 1; j < W; j++) acc = (float)val((first - j + W) % W, i, salt) + acc;
  return acc;
}

static size_t esize(int dtype) { return dtype == F32 ? 4 : 8; }

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* The same bytes on every rank (the plugin's allgather of a hash). */
static void check_same_everywhere(void *comm, const void *buf, size_t n, const char *what) {
  uint64_t h = fnv(buf, n), all[64];
  int st = P->allgather(comm, &h, sizeof h, all);
  CHECK(st == 0, "%s: allgather of the hash failed: %s", what, P->last_error(comm));
  for (int k = 0; st == 0 && k < W; k++)
    CHECK(all[k] == h, "%s: rank %d's result differs from rank %d's", what, k, R);
}

/* ---- setup ------------------------------------------------------------------ */

static void *open_comm(double timeout_s) {
  char err[1024] = "";
  void *c = P->create(timeout_s, err, sizeof err);
  if (!c) fail_msg("create failed: %s", err);
  return c;
}

static int setup(void **state) {
  (void)state;
  g_comm = open_comm(60.0);
  R = P->rank(g_comm);
  W = P->world_size(g_comm);
  return W >= 1 && W <= 64 && R >= 0 && R < W ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  P->destroy(g_comm);
  return 0;
}

/* ---- tests -------------------------------------------------------------------- */

static void test_describe(void **state) {
  (void)state;
  const char *d = P->describe();
  assert_non_null(d);
  assert_non_null(strstr(d, "MPI"));
  assert_null(strchr(d, '\n'));
  assert_int_equal(P->abi_version, ESMT_COMM_PLUGIN_ABI);
  assert_string_equal(P->name, "mpi");
  void *c = open_comm(10.0);
  char buf[160];
  P->describe_last(c, buf, sizeof buf);
  assert_string_equal(buf, "no operation yet");
  assert_string_equal(P->last_error(c), "");
  CHECK(P->barrier(c) == 0, "barrier: %s", P->last_error(c));
  P->describe_last(c, buf, sizeof buf);
  CHECK(strcmp(buf, "barrier #1, 0 bytes, done") == 0, "describe_last: '%s'", buf);
  P->set_step(c, 12);
  double x = 1.0;
  CHECK(P->allreduce_sum(c, &x, 1, F64) == 0, "allreduce: %s", P->last_error(c));
  CHECK(x == (double)W, "1.0 summed over %d ranks is %g", W, x);
  P->describe_last(c, buf, sizeof buf);
  CHECK(strcmp(buf, "allreduce #2 (step 12), 8 bytes, done") == 0, "describe_last: '%s'", buf);
  CHECK(P->check_peers(c) == 0, "check_peers on a healthy communicator: %s", P->last_error(c));
  P->destroy(c);
  char err[256] = "";
  assert_null(P->create(0.0, err, sizeof err));
  assert_non_null(strstr(err, "timeout"));
  agree();
}

static void allreduce_case(void *comm, int dtype, size_t count, unsigned salt) {
  size_t es = esize(dtype);
  unsigned char *buf = malloc(count * es + 8), *want = malloc(count * es + 8);
  assert_true(buf && want);
  fill(buf, 0, count, dtype, R, salt);
  for (int k = 0; k < W; k++) {
    size_t lo, hi;
    esmt_comm_block(NULL, count, W, k, &lo, &hi);
    for (size_t i = lo; i < hi; i++) ring_sum(want, i, dtype, esmt_comm_block_first(W, k, 0), salt);
  }
  int st = P->allreduce_sum(comm, buf, count, dtype);
  CHECK(st == 0, "allreduce dtype %d count %zu failed: %s", dtype, count, P->last_error(comm));
  if (st == 0) {
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < count; i++)
      if (memcmp(buf + i * es, want + i * es, es) != 0 && bad++ == 0) first_bad = i;
    CHECK(bad == 0, "allreduce dtype %d count %zu: %zu elements differ from the ring's sum "
          "(first: %zu)", dtype, count, bad, first_bad);
    check_same_everywhere(g_comm, buf, count * es, "allreduce");
  }
  /* The data must make the order visible, or the test proves nothing. */
  if (dtype == F32 && W >= 3 && count >= 1000) {
    size_t differ = 0, lo, hi;
    esmt_comm_block(NULL, count, W, 0, &lo, &hi);
    for (size_t i = lo; i < hi && i < lo + 1000; i++) {
      float alt = reverse_sum_f32(i, esmt_comm_block_first(W, 0, 0), salt);
      differ += memcmp(&alt, want + i * 4, 4) != 0;
    }
    CHECK(differ > 0, "the test data sums to the same bits in any order");
  }
  free(buf);
  free(want);
}

static void allreduce_all_counts(void *comm, int dtype) {
  const size_t counts[] = {0, 1, 2, (size_t)(W - 1), 1000, 3000001};
  for (size_t j = 0; j < sizeof counts / sizeof *counts; j++)
    allreduce_case(comm, dtype, counts[j], (unsigned)(j + 1));
}

static void test_allreduce_f32(void **state) {
  (void)state;
  allreduce_all_counts(g_comm, F32);
  agree();
}
static void test_allreduce_f64(void **state) {
  (void)state;
  allreduce_all_counts(g_comm, F64);
  agree();
}
static void test_allreduce_i64(void **state) {
  (void)state;
  allreduce_all_counts(g_comm, I64);
  agree();
}

/* Shard offsets: 0 = uneven with an empty shard, 1 = all empty, 2 = one rank
 * owns all, 3 = large and uneven. */
static uint64_t *shards(int kind, size_t *count) {
  uint64_t *off = calloc((size_t)W + 1, sizeof *off);
  assert_non_null(off);
  for (int k = 0; k < W; k++) {
    uint64_t n = kind == 0   ? (k == 1 % W ? 0 : 1000u * (uint64_t)k + 7)
                 : kind == 1 ? 0
                 : kind == 2 ? (k == W - 1 ? 250001 : 0)
                             : 700003u + 333331u * (uint64_t)k;
    off[k + 1] = off[k] + n;
  }
  *count = (size_t)off[W];
  return off;
}

static void reduce_scatter_cases(void *comm) {
  for (int kind = 0; kind < 4; kind++)
    for (int dtype = F32; dtype <= F64; dtype++) {
      size_t count, es = esize(dtype);
      uint64_t *off = shards(kind, &count);
      unsigned salt = (unsigned)(10 + kind * 3 + dtype);
      unsigned char *buf = malloc(count * es + 8), *want = malloc(count * es + 8);
      assert_true(buf && want);
      fill(buf, 0, count, dtype, R, salt);
      size_t lo = (size_t)off[R], hi = (size_t)off[R + 1];
      int first = esmt_comm_block_first(W, R, 1);
      for (size_t i = lo; i < hi; i++) ring_sum(want, i, dtype, first, salt);
      int st = P->reduce_scatter_sum(comm, buf, count, off, dtype);
      CHECK(st == 0, "reduce_scatter kind %d dtype %d: %s", kind, dtype, P->last_error(comm));
      if (st == 0 && hi > lo)
        CHECK(memcmp(buf + lo * es, want + lo * es, (hi - lo) * es) == 0,
              "reduce_scatter kind %d dtype %d: rank %d's shard differs from the ring's sum",
              kind, dtype, R);
      free(buf);
      free(want);
      free(off);
    }
}

static void test_reduce_scatter(void **state) {
  (void)state;
  reduce_scatter_cases(g_comm);
  agree();
}

static unsigned char pattern(size_t j, unsigned salt) {
  return (unsigned char)mix(j * 131u + salt);
}

static void allgather_shards_cases(void *comm) {
  const size_t sizes[] = {1, 2, 4, 8, 12};
  for (int kind = 0; kind < 4; kind++)
    for (size_t e = 0; e < sizeof sizes / sizeof *sizes; e++) {
      size_t count, es = sizes[e];
      uint64_t *off = shards(kind, &count);
      unsigned salt = (unsigned)(kind * 10 + e);
      unsigned char *buf = malloc(count * es + 1);
      assert_non_null(buf);
      memset(buf, 0xEE, count * es);
      for (size_t j = (size_t)off[R] * es; j < (size_t)off[R + 1] * es; j++)
        buf[j] = pattern(j, salt);
      int st = P->allgather_shards(comm, buf, count, off, es);
      CHECK(st == 0, "allgather_shards kind %d elem %zu: %s", kind, es, P->last_error(comm));
      size_t bad = 0;
      for (size_t j = 0; st == 0 && j < count * es; j++) bad += buf[j] != pattern(j, salt);
      CHECK(bad == 0, "allgather_shards kind %d elem %zu: %zu bytes wrong", kind, es, bad);
      free(buf);
      free(off);
    }
}

static void test_allgather_shards(void **state) {
  (void)state;
  allgather_shards_cases(g_comm);
  agree();
}

static void broadcast_cases(void *comm) {
  const size_t sizes[] = {0, 1, ((size_t)5 << 20) + 3};
  for (int root = 0; root < W; root++)
    for (size_t s = 0; s < 3; s++) {
      size_t n = sizes[s];
      unsigned salt = (unsigned)(root * 7 + (int)s);
      unsigned char *buf = malloc(n + 1);
      assert_non_null(buf);
      for (size_t j = 0; j < n; j++) buf[j] = R == root ? pattern(j, salt) : 0xAB;
      int st = P->broadcast(comm, buf, n, root);
      CHECK(st == 0, "broadcast %zu bytes from %d: %s", n, root, P->last_error(comm));
      size_t bad = 0;
      for (size_t j = 0; st == 0 && j < n; j++) bad += buf[j] != pattern(j, salt);
      CHECK(bad == 0, "broadcast %zu bytes from %d: %zu bytes wrong", n, root, bad);
      free(buf);
    }
}

static void test_broadcast(void **state) {
  (void)state;
  broadcast_cases(g_comm);
  agree();
}

static void allgather_cases(void *comm) {
  const size_t sizes[] = {0, 1, 1000, ((size_t)3 << 20) + 1};
  for (size_t s = 0; s < 4; s++)
    for (int in_place = 0; in_place < 2; in_place++) {
      size_t n = sizes[s];
      unsigned salt = (unsigned)(s * 2 + (size_t)in_place);
      unsigned char *recv = malloc(n * (size_t)W + 1), *send = malloc(n + 1);
      assert_true(recv && send);
      memset(recv, 0xCD, n * (size_t)W);
      unsigned char *src = in_place ? recv + (size_t)R * n : send;
      for (size_t j = 0; j < n; j++) src[j] = pattern((size_t)R * n + j, salt);
      int st = P->allgather(comm, src, n, recv);
      CHECK(st == 0, "allgather %zu bytes: %s", n, P->last_error(comm));
      size_t bad = 0;
      for (size_t j = 0; st == 0 && j < n * (size_t)W; j++) bad += recv[j] != pattern(j, salt);
      CHECK(bad == 0, "allgather %zu bytes (in place %d): %zu bytes wrong", n, in_place, bad);
      free(recv);
      free(send);
    }
}

static void test_allgather_barrier(void **state) {
  (void)state;
  allgather_cases(g_comm);
  for (int i = 0; i < 5; i++) CHECK(P->barrier(g_comm) == 0, "barrier: %s", P->last_error(g_comm));
  agree();
}

/* Small pieces: many rounds, both pipeline stages, pieces ending mid-block;
 * the bits must not change with the cut. */
static void test_small_pieces(void **state) {
  (void)state;
  setenv("ESMTRAIN_MPI_PIECE_BYTES", "4096", 1);
  void *c = open_comm(60.0);
  unsetenv("ESMTRAIN_MPI_PIECE_BYTES");
  allreduce_case(c, F32, 100003, 41);
  allreduce_case(c, F64, 3000001, 42);
  allreduce_case(c, I64, 5000, 43);
  reduce_scatter_cases(c);
  allgather_shards_cases(c);
  allgather_cases(c);
  broadcast_cases(c);
  P->destroy(c);
  agree();
}

/* ---- failures ------------------------------------------------------------------- */

static void expect_dead(void *c, int st, const char *needle, const char *what) {
  const char *e = P->last_error(c);
  CHECK(st != 0, "%s: succeeded on a failing communicator", what);
  CHECK(strstr(e, needle) != NULL, "%s: error '%s' lacks '%s'", what, e, needle);
}

/* After a failure every call fails with the same message. */
static void expect_stays_dead(void *c) {
  char first[1100];
  snprintf(first, sizeof first, "%s", P->last_error(c));
  float x = 1.0f;
  CHECK(P->barrier(c) != 0, "barrier after a failure succeeded");
  CHECK(strcmp(P->last_error(c), first) == 0, "'%s' then '%s'", first, P->last_error(c));
  CHECK(P->allreduce_sum(c, &x, 1, F32) != 0, "allreduce after a failure succeeded");
  CHECK(P->check_peers(c) != 0, "check_peers after a failure succeeded");
  CHECK(strcmp(P->last_error(c), first) == 0, "'%s' then '%s'", first, P->last_error(c));
}

static void test_abort(void **state) {
  (void)state;
  if (W < 2) skip();
  int K = W - 1;
  void *c = open_comm(2.0);
  P->set_step(c, 12);
  if (R == K) {
    CHECK(P->abort(c, "injected failure") == 0, "abort returned an error");
    expect_dead(c, 1, "this rank aborted the communicator: injected failure", "after abort");
    expect_stays_dead(c);
  } else {
    float buf[1000];
    fill(buf, 0, 1000, F32, R, 3);
    double t0 = now_s();
    int st = P->allreduce_sum(c, buf, 1000, F32);
    double dt = now_s() - t0;
    char needle[64];
    snprintf(needle, sizeof needle, "allreduce #1 (step 12): rank %d failed: injected failure", K);
    expect_dead(c, st, needle, "allreduce beside an aborting rank");
    CHECK(dt < 5.0, "the abort took %.2f s to end the allreduce", dt);
    char buf2[160];
    P->describe_last(c, buf2, sizeof buf2);
    CHECK(strstr(buf2, "failed") != NULL, "describe_last: '%s'", buf2);
    expect_stays_dead(c);
  }
  CHECK(P->barrier(g_comm) == 0, "the shared communicator: %s", P->last_error(g_comm));
  P->destroy(c);
  agree();
}

static void test_mismatch(void **state) {
  (void)state;
  if (W < 2) skip();
  void *c = open_comm(2.0);
  float buf[1000] = {0};
  double t0 = now_s();
  int st = R == 0 ? P->allreduce_sum(c, buf, 1000, F32) : P->broadcast(c, buf, 64, 0);
  double dt = now_s() - t0;
  expect_dead(c, st, "collective mismatch", "mismatched collectives");
  CHECK(dt < 5.0, "the mismatch took %.2f s to fail", dt);
  if (R == 0)
    CHECK(strstr(P->last_error(c), "rank 0 called allreduce #1 (4000 bytes") != NULL,
          "mismatch message: '%s'", P->last_error(c));
  expect_stays_dead(c);
  CHECK(P->barrier(g_comm) == 0, "the shared communicator: %s", P->last_error(g_comm));
  P->destroy(c);
  agree();
}

static void test_no_progress(void **state) {
  (void)state;
  if (W < 2) skip();
  int absent = W - 1;
  void *c = open_comm(2.0);
  if (R != absent) {
    float buf[1000] = {0};
    double t0 = now_s();
    int st = P->allreduce_sum(c, buf, 1000, F32);
    double dt = now_s() - t0;
    expect_dead(c, st, "no progress in 2 s: a peer died, hangs or cannot be reached",
                "allreduce without the last rank");
    CHECK(dt > 1.5 && dt < 6.0, "gave up after %.2f s with a 2 s timeout", dt);
    expect_stays_dead(c);
  }
  CHECK(P->barrier(g_comm) == 0, "the shared communicator: %s", P->last_error(g_comm));
  if (R == absent) {
    /* The others told it why they gave up. */
    int st = 0;
    for (double t0 = now_s(); (st = P->check_peers(c)) == 0 && now_s() - t0 < 5.0;) {
      struct timespec ts = {0, 10000000};
      nanosleep(&ts, NULL);
    }
    expect_dead(c, st, "failed: no progress", "check_peers on the absent rank");
  }
  P->destroy(c);
  agree();
}

/* A failure leaves messages in flight (here every rank's abort notice to
 * every other): a communicator created right after must not see them. */
static void test_fresh_after_failure(void **state) {
  (void)state;
  if (W < 2) skip();
  for (int it = 0; it < 5; it++) {
    void *c = open_comm(5.0);
    float buf[64] = {0};
    int st = R == 0 ? P->allreduce_sum(c, buf, 64, F32) : P->broadcast(c, buf, 64, 0);
    CHECK(st != 0, "round %d: the mismatch went unnoticed", it);
    P->destroy(c); /* at once: the other ranks' notices may still be on the way */
    c = open_comm(5.0);
    double x = 1.0;
    st = P->allreduce_sum(c, &x, 1, F64);
    CHECK(st == 0 && x == (double)W, "round %d: a fresh communicator failed: %s", it,
          P->last_error(c));
    P->destroy(c);
  }
  agree();
}

int main(void) {
  const char *path = getenv("ESMT_MPI_COMM_PLUGIN");
  if (!path || !*path) {
    printf("skipped: ESMT_MPI_COMM_PLUGIN (the plugin's path) is not set\n");
    return 77;
  }
  /* As the core loads it: local symbols, everything resolved now. */
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return 1;
  }
  const esmt_comm_plugin *(*get)(void) = (const esmt_comm_plugin *(*)(void))dlsym(
      dl, ESMT_COMM_PLUGIN_SYMBOL);
  if (!get || !(P = get()) || P->struct_size < sizeof *P) {
    fprintf(stderr, "%s: no usable %s\n", path, ESMT_COMM_PLUGIN_SYMBOL);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_describe),          cmocka_unit_test(test_allreduce_f32),
      cmocka_unit_test(test_allreduce_f64),     cmocka_unit_test(test_allreduce_i64),
      cmocka_unit_test(test_reduce_scatter),    cmocka_unit_test(test_allgather_shards),
      cmocka_unit_test(test_broadcast),         cmocka_unit_test(test_allgather_barrier),
      cmocka_unit_test(test_small_pieces),      cmocka_unit_test(test_abort),
      cmocka_unit_test(test_mismatch),          cmocka_unit_test(test_fresh_after_failure),
      cmocka_unit_test(test_no_progress),
  };
  /* The plugin stays loaded, as in the core: it finalises MPI at exit. */
  return cmocka_run_group_tests(tests, setup, teardown);
}
