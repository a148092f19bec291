/* SPDX-License-Identifier: MIT */
/* The TCP communicator with real processes: fork() W ranks on 127.0.0.1,
 * each reports through a pipe (a line of text) and its exit status; the
 * parent asserts. Covers the collectives for W = 1..4, determinism, a 16M
 * float allreduce (MB/s printed), file rendezvous, a killed rank, abort,
 * timeouts, a taken port and mismatched calls. */
#define _XOPEN_SOURCE 700 /* setitimer */
#include "test_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tcp_comm.h"

#define MAXP 8
#define MSG 2048

typedef struct {
  int world, nproc;
  int ranks[MAXP];      /* rank of each process */
  int worlds[MAXP];     /* world size each process claims (0 = world) */
  double timeout_s;
  const char *rv_file;  /* file rendezvous instead of MASTER_ADDR/PORT */
  int from_env;         /* children set torchrun variables and detect them */
  int rv_hostname;      /* with rv_file: rank 0 publishes gethostname() */
  void *arg;
} group;

typedef struct {
  int status;     /* exit code, or 128 + signal */
  char msg[MSG];  /* what the child wrote */
} result;

/* In a child: returns 0 on success, else writes a message into msg. */
typedef int (*child_fn)(esmt_comm *c, const group *g, char *msg);

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    fail_msg("cannot find a free port");
  close(fd);
  return ntohs(a.sin_port);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static group make_group(int world, double timeout_s) {
  group g;
  memset(&g, 0, sizeof g);
  g.world = g.nproc = world;
  for (int i = 0; i < world; i++) g.ranks[i] = i;
  g.timeout_s = timeout_s;
  return g;
}

/* Fork the group's processes; a child creates its communicator (a create
 * failure is reported with status 3) and runs fn. */
static void run_group(const group *g, child_fn fn, result *res) {
  int port = free_port();
  pid_t pids[MAXP];
  int fds[MAXP];
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < g->nproc; i++) {
    int p[2];
    if (pipe(p) != 0) fail_msg("pipe failed");
    pid_t pid = fork();
    if (pid < 0) fail_msg("fork failed");
    if (pid == 0) {
      close(p[0]);
      char msg[MSG] = "";
      esmt_comm_options o = {g->ranks[i], g->worlds[i] ? g->worlds[i] : g->world,
                             g->rv_file ? NULL : "127.0.0.1", g->rv_file ? 0 : port,
                             g->rv_file, 0x1234, g->timeout_s};
      if (g->rv_file && !g->rv_hostname) o.master_addr = "127.0.0.1"; /* what rank 0 publishes */
      esmt_comm *c = NULL;
      int code = 0;
      esmt_status st;
      if (g->from_env) {
        char v[32];
        snprintf(v, sizeof v, "%d", o.rank);
        setenv("RANK", v, 1);
        snprintf(v, sizeof v, "%d", o.world_size);
        setenv("WORLD_SIZE", v, 1);
        snprintf(v, sizeof v, "%d", port);
        setenv("MASTER_PORT", v, 1);
        setenv("MASTER_ADDR", "localhost", 1);
        setenv("ESMTRAIN_COMM_TIMEOUT", "10", 1);
        esmt_dist_env env;
        st = esmt_dist_env_detect(&env);
        if (st == ESMT_OK) st = esmt_comm_create_from_env(&c, &env, ESMT_COMM_TCP);
      } else {
        st = esmt_comm_create(&c, &o);
      }
      if (st != ESMT_OK) {
        snprintf(msg, sizeof msg, "%s", esmt_last_error());
        code = 3;
      } else {
        code = fn(c, g, msg);
        esmt_comm_destroy(c);
      }
      ssize_t w = write(p[1], msg, strlen(msg));
      (void)w;
      close(p[1]);
      exit(code);
    }
    close(p[1]);
    pids[i] = pid;
    fds[i] = p[0];
  }
  double t0 = now_s();
  for (int i = 0; i < g->nproc; i++) {
    int status = 0;
    for (;;) {
      pid_t r = waitpid(pids[i], &status, WNOHANG);
      if (r == pids[i]) break;
      if (now_s() - t0 > 50) { /* never hang the suite */
        for (int j = 0; j < g->nproc; j++) kill(pids[j], SIGKILL);
      }
      struct timespec ts = {0, 5000000};
      nanosleep(&ts, NULL);
    }
    res[i].status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    ssize_t n = read(fds[i], res[i].msg, MSG - 1);
    res[i].msg[n > 0 ? n : 0] = '\0';
    close(fds[i]);
  }
}

static void expect_all_ok(const group *g, const result *res) {
  for (int i = 0; i < g->nproc; i++)
    if (res[i].status != 0)
      fail_msg("rank %d (world %d) exited %d: %s", g->ranks[i], g->world, res[i].status,
               res[i].msg);
}

/* ---- collectives ---------------------------------------------------------- */

static int child_exact(esmt_comm *c, const group *g, char *msg) {
  int r = esmt_comm_rank(c), W = esmt_comm_world_size(c);
  static const size_t sizes[] = {0, 1, 3, 7, 1000, 100003};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    float *f = malloc(n * sizeof *f + 1);
    double *d = malloc(n * sizeof *d + 1);
    int64_t *q = malloc(n * sizeof *q + 1);
    for (size_t i = 0; i < n; i++) {
      f[i] = (float)((r + 1) * (int)(i % 7)) - 3.0f;
      d[i] = (double)(r + 1) * 0.5 * (double)(i % 11);
      q[i] = ((int64_t)(r + 1) << 40) - (int64_t)i;
    }
    esmt_comm_set_step(c, (int64_t)k);
    int bad = esmt_comm_allreduce_sum(c, f, n, ESMT_COMM_F32) != ESMT_OK ||
              esmt_comm_allreduce_sum(c, d, n, ESMT_COMM_F64) != ESMT_OK ||
              esmt_comm_allreduce_sum(c, q, n, ESMT_COMM_I64) != ESMT_OK;
    if (bad) snprintf(msg, MSG, "n=%zu: %s", n, esmt_last_error());
    int tri = W * (W + 1) / 2;
    for (size_t i = 0; i < n && !bad; i++) {
      if (f[i] != (float)(tri * (int)(i % 7)) - 3.0f * (float)W ||
          d[i] != (double)tri * 0.5 * (double)(i % 11) ||
          q[i] != ((int64_t)tri << 40) - (int64_t)W * (int64_t)i) {
        snprintf(msg, MSG, "n=%zu: wrong sum at %zu: %g %g %lld", n, i, (double)f[i], d[i],
                 (long long)q[i]);
        bad = 1;
      }
    }
    free(f);
    free(d);
    free(q);
    if (bad) return 1;
  }
  char desc[200];
  esmt_comm_describe_last(c, desc, sizeof desc);
  if (!strstr(desc, "allreduce #18 (step 5), 800024 bytes, done")) {
    snprintf(msg, MSG, "describe_last: '%s'", desc);
    return 1;
  }
  (void)g;
  return 0;
}

static void test_allreduce_exact(void **state) {
  (void)state;
  for (int W = 1; W <= 4; W++) {
    group g = make_group(W, 20);
    result res[MAXP];
    run_group(&g, child_exact, res);
    expect_all_ok(&g, res);
  }
}

static uint64_t fnv(const void *p, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
  return h;
}

/* Random floats; reports the hash of the result. */
static int child_random(esmt_comm *c, const group *g, char *msg) {
  size_t n = 300007;
  float *f = malloc(n * sizeof *f);
  uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(esmt_comm_rank(c) + 1);
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    f[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 1e3f;
  }
  int rc = 0;
  if (esmt_comm_allreduce_sum(c, f, n, ESMT_COMM_F32) != ESMT_OK) {
    snprintf(msg, MSG, "%s", esmt_last_error());
    rc = 1;
  } else {
    snprintf(msg, MSG, "%016llx", (unsigned long long)fnv(f, n * sizeof *f));
  }
  free(f);
  (void)g;
  return rc;
}

static void test_allreduce_deterministic(void **state) {
  (void)state;
  for (int W = 2; W <= 4; W++) {
    char first[MSG] = "";
    for (int run = 0; run < 2; run++) {
      group g = make_group(W, 20);
      result res[MAXP];
      run_group(&g, child_random, res);
      expect_all_ok(&g, res);
      for (int i = 1; i < W; i++) assert_string_equal(res[i].msg, res[0].msg);
      if (run == 0) snprintf(first, sizeof first, "%s", res[0].msg);
      else assert_string_equal(res[0].msg, first);
    }
  }
}

static int child_big(esmt_comm *c, const group *g, char *msg) {
  size_t n = (size_t)16 << 20;
  int W = esmt_comm_world_size(c), r = esmt_comm_rank(c);
  float *f = malloc(n * sizeof *f);
  if (!f) return snprintf(msg, MSG, "no memory"), 1;
  for (size_t i = 0; i < n; i++) f[i] = (float)(r + (int)(i & 1023));
  esmt_comm_barrier(c);
  double t0 = now_s();
  esmt_status st = esmt_comm_allreduce_sum(c, f, n, ESMT_COMM_F32);
  double dt = now_s() - t0;
  int rc = 0;
  if (st != ESMT_OK) {
    snprintf(msg, MSG, "%s", esmt_last_error());
    rc = 1;
  }
  for (size_t i = 0; i < n && !rc; i++)
    if (f[i] != (float)(W * (W - 1) / 2 + W * (int)(i & 1023))) {
      snprintf(msg, MSG, "wrong sum at %zu: %g", i, (double)f[i]);
      rc = 1;
    }
  /* Algorithm bandwidth (buffer bytes / time) and bus bandwidth (what each
   * link carried: 2(W-1)/W of the buffer). */
  if (!rc)
    snprintf(msg, MSG, "%.3f s, %.0f MB/s algbw, %.0f MB/s busbw", dt, n * 4.0 / dt / 1e6,
             n * 4.0 / dt / 1e6 * 2.0 * (W - 1) / W);
  free(f);
  (void)g;
  return rc;
}

static void test_allreduce_16m(void **state) {
  (void)state;
  for (int W = 2; W <= 4; W += 2) {
    group g = make_group(W, 30);
    result res[MAXP];
    run_group(&g, child_big, res);
    expect_all_ok(&g, res);
    printf("allreduce 16M floats (64 MB), %d ranks on 127.0.0.1: %s\n", W, res[0].msg);
  }
}

static int child_misc(esmt_comm *c, const group *g, char *msg) {
  int r = esmt_comm_rank(c), W = esmt_comm_world_size(c);
  unsigned char id[128];
  for (int i = 0; i < 128; i++) id[i] = r == W - 1 ? (unsigned char)(i * 3) : 0;
  if (esmt_comm_broadcast(c, id, sizeof id, W - 1) != ESMT_OK)
    return snprintf(msg, MSG, "bcast: %s", esmt_last_error()), 1;
  for (int i = 0; i < 128; i++)
    if (id[i] != (unsigned char)(i * 3)) return snprintf(msg, MSG, "bcast byte %d wrong", i), 1;
  size_t big = 3u << 20 | 5; /* several chunks and a tail */
  unsigned char *b = malloc(big);
  for (size_t i = 0; i < big; i++) b[i] = r == 0 ? (unsigned char)(i * 7 + 1) : 0;
  if (esmt_comm_broadcast(c, b, big, 0) != ESMT_OK)
    return free(b), snprintf(msg, MSG, "bcast big: %s", esmt_last_error()), 1;
  for (size_t i = 0; i < big; i++)
    if (b[i] != (unsigned char)(i * 7 + 1))
      return free(b), snprintf(msg, MSG, "bcast big byte %zu wrong", i), 1;
  free(b);
  const size_t sizes[] = {5, 100000};
  for (int k = 0; k < 2; k++) {
    size_t n = sizes[k];
    unsigned char *s = malloc(n), *all = malloc(n * (size_t)W);
    for (size_t i = 0; i < n; i++) s[i] = (unsigned char)(r * 31 + (int)i);
    int bad = esmt_comm_allgather(c, s, n, all) != ESMT_OK;
    if (bad) snprintf(msg, MSG, "allgather: %s", esmt_last_error());
    for (int q = 0; q < W && !bad; q++)
      for (size_t i = 0; i < n && !bad; i++)
        if (all[(size_t)q * n + i] != (unsigned char)(q * 31 + (int)i)) {
          snprintf(msg, MSG, "allgather: block %d byte %zu wrong", q, i);
          bad = 1;
        }
    free(s);
    free(all);
    if (bad) return 1;
  }
  for (int i = 0; i < 3; i++)
    if (esmt_comm_barrier(c) != ESMT_OK)
      return snprintf(msg, MSG, "barrier: %s", esmt_last_error()), 1;
  char desc[200];
  esmt_comm_describe_last(c, desc, sizeof desc);
  if (!g->arg && strcmp(desc, "barrier #7, 0 bytes, done") != 0) /* arg: ops ran before */
    return snprintf(msg, MSG, "describe_last: '%s'", desc), 1;
  (void)g;
  return 0;
}

static void test_broadcast_allgather_barrier(void **state) {
  (void)state;
  for (int W = 1; W <= 4; W++) {
    group g = make_group(W, 20);
    result res[MAXP];
    run_group(&g, child_misc, res);
    expect_all_ok(&g, res);
  }
}

static void test_from_env(void **state) {
  (void)state;
  group g = make_group(3, 20);
  g.from_env = 1;
  result res[MAXP];
  run_group(&g, child_exact, res);
  expect_all_ok(&g, res);
}

static void test_file_rendezvous(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  char path[512];
  snprintf(path, sizeof path, "%s/rendezvous", dir);
  /* A stale file from another job: ignored, then replaced by rank 0. */
  FILE *f = fopen(path, "w");
  fprintf(f, "esmtrain-rendezvous 1 127.0.0.1 1 00000000deadbeef\n");
  fclose(f);
  group g = make_group(3, 20);
  g.rv_file = path;
  result res[MAXP];
  run_group(&g, child_misc, res);
  expect_all_ok(&g, res);
  assert_int_not_equal(access(path, F_OK), 0); /* removed once everyone connected */
  /* Without MASTER_ADDR rank 0 publishes its host name (if it resolves here). */
  char host[256] = "";
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  if (gethostname(host, sizeof host - 1) == 0 && getaddrinfo(host, NULL, &hints, &ai) == 0) {
    freeaddrinfo(ai);
    g.rv_hostname = 1;
    run_group(&g, child_misc, res);
    expect_all_ok(&g, res);
  } else {
    printf("skipped: host name '%s' does not resolve to IPv4\n", host);
  }
  test_rmtree(dir);
}

/* ---- failures ---------------------------------------------------------------- */

typedef struct {
  int victim;
  double max_s; /* others must fail within this */
} fail_arg;

static int child_killed(esmt_comm *c, const group *g, char *msg) {
  const fail_arg *a = g->arg;
  size_t n = 1u << 20;
  float *f = calloc(n, sizeof *f);
  esmt_comm_set_step(c, 12);
  esmt_comm_allreduce_sum(c, f, n, ESMT_COMM_F32); /* one good round */
  if (esmt_comm_rank(c) == a->victim) {
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
    raise(SIGKILL);
  }
  double t0 = now_s();
  esmt_status st = esmt_comm_allreduce_sum(c, f, n, ESMT_COMM_F32);
  double dt = now_s() - t0;
  free(f);
  snprintf(msg, MSG, "%s", st == ESMT_OK ? "succeeded" : esmt_last_error());
  if (st == ESMT_OK || dt > a->max_s) return 1;
  /* Later calls keep failing with the same error. */
  return esmt_comm_barrier(c) == ESMT_OK ? 1 : 2;
}

static void test_rank_killed(void **state) {
  (void)state;
  for (int W = 2; W <= 4; W++) {
    for (int victim = 0; victim < W; victim += W - 1) {
      group g = make_group(W, 20);
      fail_arg a = {victim, 5.0};
      g.arg = &a;
      result res[MAXP];
      run_group(&g, child_killed, res);
      char needle[32];
      snprintf(needle, sizeof needle, "rank %d failed", victim);
      for (int i = 0; i < W; i++) {
        if (i == victim) {
          assert_int_equal(res[i].status, 128 + SIGKILL);
          continue;
        }
        if (res[i].status != 2 || !strstr(res[i].msg, needle) ||
            !strstr(res[i].msg, "allreduce #2 (step 12)"))
          fail_msg("W=%d victim %d: rank %d status %d: %s", W, victim, i, res[i].status,
                   res[i].msg);
      }
      if (W == 4 && victim == 0) printf("rank 0 killed, rank 2 says: %s\n", res[2].msg);
    }
  }
}

/* The victim is SIGKILLed by a helper process ~10 ms into a 64 MB
 * allreduce, while data is in flight in both directions. */
static int child_killed_mid(esmt_comm *c, const group *g, char *msg) {
  const fail_arg *a = g->arg;
  size_t n = (size_t)16 << 20;
  float *f = calloc(n, sizeof *f);
  if (!f) return snprintf(msg, MSG, "no memory"), 1;
  esmt_comm_set_step(c, 3);
  if (esmt_comm_barrier(c) != ESMT_OK) return free(f), snprintf(msg, MSG, "barrier failed"), 1;
  if (esmt_comm_rank(c) == a->victim) {
    pid_t me = getpid();
    if (fork() == 0) {
      struct timespec ts = {0, 10000000};
      nanosleep(&ts, NULL);
      kill(me, SIGKILL);
      _exit(0);
    }
  }
  double t0 = now_s();
  esmt_status st = esmt_comm_allreduce_sum(c, f, n, ESMT_COMM_F32);
  double dt = now_s() - t0;
  free(f);
  snprintf(msg, MSG, "%s", st == ESMT_OK ? "succeeded" : esmt_last_error());
  return st == ESMT_OK || dt > a->max_s;
}

static void test_rank_killed_mid_transfer(void **state) {
  (void)state;
  group g = make_group(3, 20);
  fail_arg a = {1, 5.0};
  g.arg = &a;
  result res[MAXP];
  run_group(&g, child_killed_mid, res);
  assert_int_equal(res[1].status, 128 + SIGKILL);
  for (int i = 0; i < 3; i += 2)
    if (res[i].status != 0 || !strstr(res[i].msg, "allreduce #2 (step 3): rank 1 failed"))
      fail_msg("rank %d status %d: %s", i, res[i].status, res[i].msg);
  printf("rank 1 killed mid-transfer, rank 2 says: %s\n", res[2].msg);
}

static int child_abort(esmt_comm *c, const group *g, char *msg) {
  const int *victim = g->arg;
  esmt_comm_set_step(c, 12);
  esmt_status bst = esmt_comm_barrier(c);
  if (esmt_comm_rank(c) == *victim) {
    if (bst != ESMT_OK) return snprintf(msg, MSG, "%s", esmt_last_error()), 1;
    if (esmt_comm_abort(c, "CUDA out of memory in layer 7") != ESMT_OK) return 1;
    double x = 1;
    /* Its own later calls fail too. */
    if (esmt_comm_allreduce_sum(c, &x, 1, ESMT_COMM_F64) == ESMT_OK) return 1;
    snprintf(msg, MSG, "%s", esmt_last_error());
    return 0;
  }
  /* The abort may already fail the barrier here (the "current" collective:
   * the control channel is read before the data), else the allreduce. */
  double x[4] = {1, 2, 3, 4};
  esmt_status st = bst != ESMT_OK ? bst : esmt_comm_allreduce_sum(c, x, 4, ESMT_COMM_F64);
  snprintf(msg, MSG, "%s", st == ESMT_OK ? "succeeded" : esmt_last_error());
  return st == ESMT_OK ? 1 : 0;
}

static void test_abort(void **state) {
  (void)state;
  for (int W = 2; W <= 4; W++) {
    for (int victim = 0; victim < W; victim += W - 1) { /* rank 0 relays; others go via it */
      group g = make_group(W, 20);
      g.arg = &victim;
      result res[MAXP];
      run_group(&g, child_abort, res);
      expect_all_ok(&g, res);
      assert_non_null(strstr(res[victim].msg, "aborted the communicator: CUDA out of memory"));
      char needle[96];
      snprintf(needle, sizeof needle, "(step 12): rank %d failed: CUDA out of memory in layer 7",
               victim);
      for (int i = 0; i < W; i++) {
        if (i == victim) continue;
        if (!strstr(res[i].msg, needle) ||
            !(strstr(res[i].msg, "allreduce #2") || strstr(res[i].msg, "barrier #1")))
          fail_msg("W=%d victim %d rank %d: %s", W, victim, i, res[i].msg);
      }
    }
  }
}

/* Rank 2 skips the collective and destroys its communicator (a clean
 * goodbye): the others still fail, naming it. */
static int child_leaves(esmt_comm *c, const group *g, char *msg) {
  if (esmt_comm_rank(c) == 2) return 0;
  float x[1000] = {0};
  double t0 = now_s();
  esmt_status st = esmt_comm_allreduce_sum(c, x, 1000, ESMT_COMM_F32);
  snprintf(msg, MSG, "%s", st == ESMT_OK ? "succeeded" : esmt_last_error());
  (void)g;
  return st == ESMT_OK || now_s() - t0 > 5.0;
}

static void test_rank_leaves_early(void **state) {
  (void)state;
  group g = make_group(3, 20);
  result res[MAXP];
  run_group(&g, child_leaves, res);
  expect_all_ok(&g, res);
  for (int i = 0; i < 2; i++)
    if (!strstr(res[i].msg, "allreduce #1: rank 2 failed: "))
      fail_msg("rank %d: %s", i, res[i].msg);
  printf("rank 2 left early, rank 0 says: %s\n", res[0].msg);
}

/* esmt_comm_check_peers: quiet while all live, then (without a collective)
 * names a rank that died; a peer that leaves cleanly is no failure. */
static int child_check_peers(esmt_comm *c, const group *g, char *msg) {
  const int r = esmt_comm_rank(c), victim = g->world - 1;
  if (esmt_comm_barrier(c) != ESMT_OK || esmt_comm_check_peers(c) != ESMT_OK) {
    snprintf(msg, MSG, "before: %s", esmt_last_error());
    return 1;
  }
  if (r == victim) { /* after the others' first check */
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    raise(SIGKILL);
  }
  const double t0 = now_s();
  esmt_status st = ESMT_OK;
  while (st == ESMT_OK && now_s() - t0 < 5) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    st = esmt_comm_check_peers(c);
  }
  snprintf(msg, MSG, "%s", st == ESMT_OK ? "never noticed" : esmt_last_error());
  return st == ESMT_OK;
}

static void test_check_peers(void **state) {
  (void)state;
  for (int W = 2; W <= 3; W++) {
    group g = make_group(W, 20);
    result res[MAXP];
    run_group(&g, child_check_peers, res);
    char needle[32];
    snprintf(needle, sizeof needle, "rank %d failed", W - 1);
    assert_int_equal(res[W - 1].status, 128 + SIGKILL);
    for (int i = 0; i < W - 1; i++)
      if (res[i].status != 0 || !strstr(res[i].msg, needle))
        fail_msg("W=%d rank %d status %d: %s", W, i, res[i].status, res[i].msg);
    printf("W=%d: rank %d died outside a collective; rank 0 noticed: %s\n", W, W - 1, res[0].msg);
  }
}

/* SIGALRM every millisecond (no SA_RESTART) during collectives: every
 * poll/send/recv sees EINTR now and then. */
static void on_alarm(int sig) { (void)sig; }

static int child_eintr(esmt_comm *c, const group *g, char *msg) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 1000}, {0, 1000}};
  setitimer(ITIMER_REAL, &it, NULL);
  int rc = child_exact(c, g, msg);
  esmt_comm_set_step(c, -1);
  if (rc == 0) rc = child_misc(c, g, msg) ? 2 : 0;
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  return rc;
}

static void test_eintr(void **state) {
  (void)state;
  group g = make_group(3, 20);
  g.arg = &g; /* child_misc: skip its operation-count check */
  result res[MAXP];
  run_group(&g, child_eintr, res);
  expect_all_ok(&g, res);
}

static int child_noop(esmt_comm *c, const group *g, char *msg) {
  (void)c, (void)g, (void)msg;
  return 0;
}

static void test_rank_never_arrives(void **state) {
  (void)state;
  group g = make_group(3, 2.0);
  g.nproc = 2; /* rank 2 never starts */
  result res[MAXP];
  double t0 = now_s();
  run_group(&g, child_noop, res);
  double dt = now_s() - t0;
  assert_int_equal(res[0].status, 3);
  assert_int_equal(res[1].status, 3);
  assert_non_null(strstr(res[0].msg, "timed out after 2.0 s waiting for rank(s) 2"));
  assert_non_null(strstr(res[1].msg, "rank 0 refused this rank"));
  assert_non_null(strstr(res[1].msg, "waiting for rank(s) 2"));
  assert_true(dt < 6);
}

static int child_sleepy(esmt_comm *c, const group *g, char *msg) {
  if (esmt_comm_rank(c) == 2) { /* never calls the collective */
    struct timespec ts = {3, 0};
    nanosleep(&ts, NULL);
    return 0;
  }
  float x[10] = {0};
  double t0 = now_s();
  esmt_status st = esmt_comm_allreduce_sum(c, x, 10, ESMT_COMM_F32);
  double dt = now_s() - t0;
  snprintf(msg, MSG, "%s", st == ESMT_OK ? "succeeded" : esmt_last_error());
  (void)g;
  return st == ESMT_OK || dt > 4.0 ? 1 : 0;
}

static void test_collective_timeout(void **state) {
  (void)state;
  group g = make_group(3, 1.5);
  result res[MAXP];
  run_group(&g, child_sleepy, res);
  expect_all_ok(&g, res);
  for (int i = 0; i < 2; i++)
    if (!strstr(res[i].msg, "allreduce #1") || !strstr(res[i].msg, "timed out after 1.5 s"))
      fail_msg("rank %d: %s", i, res[i].msg);
  printf("timeout message: %s\n", res[0].msg);
}

static void test_port_in_use(void **state) {
  (void)state;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(fd, 4), 0);
  getsockname(fd, (struct sockaddr *)&a, &len);
  int port = ntohs(a.sin_port);
  esmt_comm_options o = {0, 2, "127.0.0.1", port, NULL, 1, 5.0};
  esmt_comm *c = NULL;
  assert_int_equal(esmt_comm_create(&c, &o), ESMT_ERR_IO);
  assert_null(c);
  char needle[64];
  snprintf(needle, sizeof needle, "cannot listen on port %d: address already in use", port);
  assert_non_null(strstr(esmt_last_error(), needle));
  assert_non_null(strstr(esmt_last_error(), "MASTER_PORT"));
  close(fd);
}

static int child_mismatch(esmt_comm *c, const group *g, char *msg) {
  unsigned char b[64] = {0};
  esmt_status st = esmt_comm_rank(c) == 0 ? esmt_comm_allreduce_sum(c, b, 16, ESMT_COMM_F32)
                                          : esmt_comm_broadcast(c, b, 64, 0);
  snprintf(msg, MSG, "%s", st == ESMT_OK ? "succeeded" : esmt_last_error());
  (void)g;
  return st == ESMT_OK;
}

static void test_mismatch(void **state) {
  (void)state;
  group g = make_group(2, 5);
  result res[MAXP];
  run_group(&g, child_mismatch, res);
  expect_all_ok(&g, res);
  /* Either rank may notice first; the other gets its notice. */
  for (int i = 0; i < 2; i++) {
    assert_non_null(strstr(res[i].msg, "collective mismatch"));
    assert_non_null(strstr(res[i].msg, "rank 1 called broadcast #1 (64 bytes"));
    assert_non_null(strstr(res[i].msg, "rank 0 called allreduce #1 (64 bytes"));
  }
}

static void test_bad_rendezvous(void **state) {
  (void)state;
  /* Two processes claim rank 1. */
  group g = make_group(3, 5);
  g.ranks[2] = 1;
  result res[MAXP];
  run_group(&g, child_noop, res);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(res[i].status, 3);
    assert_non_null(strstr(res[i].msg, "duplicate rank 1"));
  }
  /* A rank that thinks the world is bigger. */
  group h = make_group(2, 5);
  h.worlds[1] = 3;
  run_group(&h, child_noop, res);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(res[i].status, 3);
    assert_non_null(strstr(res[i].msg, "rank 1 (127.0.0.1) has world size 3 but rank 0 has 2"));
  }
}

static void test_args(void **state) {
  (void)state;
  esmt_comm *c = NULL;
  esmt_comm_options o = {0, 1, NULL, 0, NULL, 0, 1.0};
  assert_int_equal(esmt_comm_create(&c, &o), ESMT_OK);
  float x = 2;
  assert_int_equal(esmt_comm_allreduce_sum(c, &x, 1, ESMT_COMM_F32), ESMT_OK);
  assert_true(x == 2);
  assert_int_equal(esmt_comm_broadcast(c, &x, 4, 1), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_comm_allreduce_sum(c, (char *)&x + 1, 1, ESMT_COMM_F32),
                   ESMT_ERR_INVALID_ARGUMENT);
  esmt_comm_destroy(c);
  esmt_comm_options bad = {2, 2, "h", 1, NULL, 0, 1.0};
  assert_int_equal(esmt_comm_create(&c, &bad), ESMT_ERR_INVALID_ARGUMENT);
  esmt_comm_options noaddr = {0, 2, NULL, 0, NULL, 0, 1.0};
  assert_int_equal(esmt_comm_create(&c, &noaddr), ESMT_ERR_CONFIG);
}

int main(void) {
  signal(SIGPIPE, SIG_DFL); /* the library must not need SIGPIPE ignored */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_args),
      cmocka_unit_test(test_allreduce_exact),
      cmocka_unit_test(test_check_peers),
      cmocka_unit_test(test_allreduce_deterministic),
      cmocka_unit_test(test_allreduce_16m),
      cmocka_unit_test(test_broadcast_allgather_barrier),
      cmocka_unit_test(test_from_env),
      cmocka_unit_test(test_file_rendezvous),
      cmocka_unit_test(test_rank_killed),
      cmocka_unit_test(test_rank_killed_mid_transfer),
      cmocka_unit_test(test_abort),
      cmocka_unit_test(test_eintr),
      cmocka_unit_test(test_rank_leaves_early),
      cmocka_unit_test(test_rank_never_arrives),
      cmocka_unit_test(test_collective_timeout),
      cmocka_unit_test(test_port_in_use),
      cmocka_unit_test(test_mismatch),
      cmocka_unit_test(test_bad_rendezvous),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
