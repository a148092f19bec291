/* SPDX-License-Identifier: MIT */
/* ZeRO-1 (dist.zero 1) on the CPU backend over the real TCP communicator,
 * ranks as fork()ed processes:
 *  - the shard split and the communicator's reduce-scatter / all-gather
 *    halves over uneven shards (one of them empty);
 *  - 2 ranks with ZeRO-1 end bit-identical to 2 ranks without it (a sum
 *    of two values does not depend on the order); 3 ranks (uneven shards)
 *    agree within fp32 rounding (the per-element summation order differs)
 *    and bit for bit between the ranks;
 *  - the same with bf16 compute (half_emu_backend): the shard's half copy
 *    refreshed by AdamW, the others' after the all-gather;
 *  - a loss-scale overflow seen in one shard is skipped by every rank;
 *  - checkpoints: ZeRO-1 4 + resume 2 == 6 bit for bit, and checkpoints
 *    cross between dist.zero 0 and 1 both ways;
 *  - a killed rank makes the other stop with an error naming it;
 *  - ZeRO-1 with optimizer offload is refused with a message. */
#define _GNU_SOURCE
#include "test_util.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint.h"
#include "context.h"
#include "dp_group.h"
#include "half_emu_backend.h"
#include "mem_source.h"
#include "offload.h"
#include "rank_runner.h"
#include "trainer.h"

enum { STEPS = 5 };

static char g_dir[256];
static int g_job;
static double g_clip; /* train.grad_clip of the runs */
static int g_bf16;    /* 1: bf16 compute on half_emu_backend (the cpu ops, bf16 emulated) */
static esmt_backend_entry g_emu;

static char g_zero_line[512]; /* this process's "ZeRO-1: rank ..." log line */

static void on_log(void *user, esmt_log_level level, const char *message) {
  (void)user;
  (void)level;
  if (strncmp(message, "ZeRO-1: rank", 12) == 0)
    snprintf(g_zero_line, sizeof g_zero_line, "%s", message);
}

static esmt_context *make_ctx(void) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 1; /* the same thread count everywhere: same reductions */
  o.log = on_log;
  o.log_level = ESMT_LOG_INFO;
  esmt_context *c = NULL;
  return esmt_context_create(&o, &c) ? NULL : c;
}

static esmt_model *make_model(esmt_context *ctx) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2; c.hidden_size = 32; c.num_heads = 2; c.max_positions = 64;
  if (g_bf16) { /* a half-precision compute copy beside the fp32 master */
    g_emu = *ctx->backend;
    g_emu.ops = half_emu_ops(ctx->backend->ops, ESMTB_CAP_BF16);
    ctx->backend = &g_emu;
    c.precision = ESMT_PRECISION_BF16;
  }
  esmt_model *m = NULL;
  return esmt_model_create(ctx, &c, 7, &m) ? NULL : m;
}

typedef struct run_spec {
  int rank, world;
  int zero;             /* dist.zero */
  int64_t steps;
  const char *run_dir;  /* NULL: no checkpoints */
  int save_every;
  int resume;           /* resume from run_dir's latest first */
  int die_at;           /* > 0: this rank SIGKILLs itself after that update */
  int scaling;          /* dynamic loss scale on, NaN injected at update 3 */
  const char *weights_out, *error_out, *info_out;
} run_spec;


static esmt_status run(const run_spec *s) {
  esmt_context *ctx = make_ctx();
  const esmt_backend_entry *real = ctx ? ctx->backend : NULL;
  esmt_model *m = ctx ? make_model(ctx) : NULL;
  if (!m) return ESMT_ERR_INTERNAL;
  if (g_bf16 && m->dtype != ESMTB_BF16) return ESMT_ERR_INTERNAL;
  mem_source ms = {.rows = 2, .offset = s->rank, .stride = s->world};
  esmt_batch_source src = mem_source_as_source(&ms);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  esmt_schedule o_sched = ESMT_SCHEDULE_INIT;
  o.schedule = &o_sched;
  esmt_loss_scale_config o_ls = ESMT_LOSS_SCALE_CONFIG_INIT;
  o.loss_scale = &o_ls;
  o_sched.peak_lr = 1e-3;
  o_sched.warmup_steps = 2;
  o_sched.total_steps = 20;
  o.log_every = 0;
  o.max_steps = s->steps;
  o.run_dir = s->run_dir;
  o.save_every = s->save_every;
  o.keep_last = 0;
  o.grad_clip = g_clip;
  if (s->scaling) {
    o_ls.enabled = 1;
    o_ls.initial = 1024;
    esmt_test_inject_nan_step = 3;
  }
  esmt_trainer *t = NULL;
  esmt_status st = esmt_trainer_create(m, &o, &src, &t);
  if (!st) {
    char rdv[512];
    snprintf(rdv, sizeof rdv, "%s/rdv-%d", g_dir, g_job);
    esmt_comm_options co = {s->rank, s->world, NULL, 0, rdv, (uint64_t)g_job + 1, 20.0};
    esmt_comm *comm = NULL;
    esmt_dp *dp = NULL;
    st = esmt_comm_create(&comm, &co);
    if (!st) st = esmt_dp_create(comm, 4096, &dp); /* small buckets: many, some across shards */
    if (!st) esmt_dp_set_zero(dp, s->zero);
    if (!st) st = esmt_trainer_set_dp(t, dp);
  }
  if (!st && s->resume) st = esmt_trainer_resume(t, s->run_dir);
  while (!st && esmt_trainer_step_count(t) < s->steps) {
    esmt_train_metrics mt = {.struct_size = sizeof mt};
    st = esmt_trainer_step(t, &mt);
    if (!st && s->die_at && esmt_trainer_step_count(t) == s->die_at) raise(SIGKILL);
    if (!st && s->run_dir && s->save_every && esmt_trainer_step_count(t) % s->save_every == 0)
      st = esmt_trainer_save(t, NULL, 0);
  }
  if (st && s->error_out) write_text(s->error_out, esmt_last_error());
  if (!st && s->info_out) {
    char info[256];
    snprintf(info, sizeof info, "%llu %llu %llu %lld %lld %.9g",
             (unsigned long long)m->mem.opt_lo, (unsigned long long)m->mem.opt_hi,
             (unsigned long long)m->layout.total, (long long)t->scaler.overflows,
             (long long)t->skipped, t->last_finite_norm);
    write_text(s->info_out, info);
    char line_out[600];
    snprintf(line_out, sizeof line_out, "%s.log", s->info_out);
    write_text(line_out, g_zero_line);
  }
  if (!st && s->weights_out) write_weights(m, s->weights_out);
  esmt_trainer_destroy(t);
  esmt_model_destroy(m);
  ctx->backend = real;
  esmt_context_destroy(ctx);
  return st;
}

/* Run each spec in its own process; statuses (or 128 + signal) out. */
static esmt_status run_any(const void *spec) { return run((const run_spec *)spec); }
static void run_ranks(const run_spec *specs, int n, int *status) {
  g_job++;
  run_ranks_forked(run_any, specs, sizeof *specs, n, status);
}


static void path_of(char *buf, size_t cap, const char *what, int a, int b) {
  snprintf(buf, cap, "%s/%s-%d-%d", g_dir, what, a, b);
}

/* world ranks with dist.zero `zero`; every rank's weights must agree bit
 * for bit; returns rank 0's weights (malloc'ed). */
static float *train(int world, int zero, int scaling, size_t *n, const char *tag) {
  run_spec specs[3];
  char w[3][512], info[3][512];
  for (int r = 0; r < world; r++) {
    snprintf(w[r], sizeof w[r], "%s/%s-w%d-z%d-r%d", g_dir, tag, world, zero, r);
    snprintf(info[r], sizeof info[r], "%s/%s-info%d-z%d-r%d", g_dir, tag, world, zero, r);
    run_spec s = {r, world, zero, STEPS, NULL, 0, 0, 0, scaling, w[r], NULL, info[r]};
    specs[r] = s;
  }
  int st[3];
  run_ranks(specs, world, st);
  for (int r = 0; r < world; r++) assert_int_equal(st[r], 0);
  float *w0 = read_weights(w[0], n);
  uint64_t covered = 0;
  for (int r = 0; r < world; r++) {
    size_t nr;
    float *wr = read_weights(w[r], &nr);
    assert_int_equal(nr, *n);
    assert_memory_equal(wr, w0, *n * sizeof *w0);
    free(wr);
    unsigned long long lo, hi, total;
    long long overflows, skipped;
    double norm;
    FILE *f = fopen(info[r], "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%llu %llu %llu %lld %lld %lg", &lo, &hi, &total, &overflows,
                            &skipped, &norm), 6);
    fclose(f);
    if (g_clip > 0 && r == 0) {
      printf("  world %d zero %d: last gradient norm %.9g (clipped to %g)\n", world, zero, norm,
             g_clip);
      assert_true(norm > g_clip); /* clipping was active */
    }
    assert_int_equal(total, *n);
    char line[600], line_path[600], want[64];
    snprintf(line_path, sizeof line_path, "%s.log", info[r]);
    f = fopen(line_path, "r");
    assert_non_null(f);
    line[fread(line, 1, sizeof line - 1, f)] = '\0';
    fclose(f);
    if (zero) { /* this rank's moments: its shard only, and the start-up log says so */
      printf("  world %d rank %d: moments for [%llu, %llu): %llu bytes instead of %llu\n", world,
             r, lo, hi, 8 * (hi - lo), 8 * total);
      snprintf(want, sizeof want, "AdamW moments %llu bytes", 8 * (hi - lo));
      assert_non_null(strstr(line, want));
      if (r == 0 && world == 3) printf("  log: %s\n", line);
      assert_true(hi - lo <= total / (uint64_t)world + ESMT_ZERO_ALIGN);
      assert_int_equal(lo, covered);
      covered = hi;
    } else {
      assert_int_equal(lo, 0);
      assert_int_equal(hi, total);
      assert_int_equal(line[0], '\0'); /* no ZeRO-1 line without it */
    }
    if (scaling) { /* the overflow in one shard was skipped by every rank */
      assert_int_equal(overflows, 1);
      assert_int_equal(skipped, 1);
    }
  }
  if (zero) assert_int_equal(covered, *n);
  return w0;
}

static double rel_diff(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)b[i] * b[i];
  }
  return sqrt(num / den);
}

static void test_split(void **state) {
  (void)state;
  uint64_t off[9];
  const uint64_t totals[] = {0, 1, 63, 64, 65, 1000, 100003, 12345678};
  for (size_t t = 0; t < sizeof totals / sizeof totals[0]; t++)
    for (int w = 1; w <= 8; w++) {
      esmt_zero_split(totals[t], w, off);
      assert_int_equal(off[0], 0);
      assert_int_equal(off[w], totals[t]);
      uint64_t units = (totals[t] + ESMT_ZERO_ALIGN - 1) / ESMT_ZERO_ALIGN, mx = 0, mn = ~0ull;
      for (int r = 0; r < w; r++) {
        assert_true(off[r] <= off[r + 1]);
        if (off[r + 1] < totals[t]) assert_int_equal(off[r + 1] % ESMT_ZERO_ALIGN, 0);
        uint64_t u = (off[r + 1] - off[r] + ESMT_ZERO_ALIGN - 1) / ESMT_ZERO_ALIGN;
        if (u > mx) mx = u;
        if (u < mn) mn = u;
      }
      assert_true(mx <= (units + (uint64_t)w - 1) / (uint64_t)w);
      assert_true(mx - mn <= 1);
    }
}

/* The communicator halves directly: 3 ranks, shards of 5, 0 and 7. */
static int rs_rank(int rank) {
  char rdv[512];
  snprintf(rdv, sizeof rdv, "%s/rdv-rs-%d", g_dir, g_job);
  esmt_comm_options co = {rank, 3, NULL, 0, rdv, (uint64_t)g_job + 1000, 20.0};
  esmt_comm *c = NULL;
  if (esmt_comm_create(&c, &co)) return 1;
  const uint64_t off[4] = {0, 5, 5, 12};
  float x[12];
  double y[12];
  for (int i = 0; i < 12; i++) {
    x[i] = (float)((rank + 1) * 100 + i);
    y[i] = (double)(rank + 1) * 0.1 + i;
  }
  int bad = 0;
  if (esmt_comm_reduce_scatter_sum(c, x, 12, off, ESMT_COMM_F32)) bad |= 2;
  if (esmt_comm_reduce_scatter_sum(c, y, 12, off, ESMT_COMM_F64)) bad |= 2;
  for (uint64_t i = off[rank]; i < off[rank + 1]; i++) {
    if (x[i] != (float)(600 + 3 * (int)i)) bad |= 4;
    if (fabs(y[i] - (0.6 + 3.0 * (double)i)) > 1e-12) bad |= 4;
  }
  for (int i = 0; i < 12; i++) x[i] = (i >= (int)off[rank] && i < (int)off[rank + 1]) ? (float)i : -1;
  if (esmt_comm_allgather_shards(c, x, 12, off, sizeof(float))) bad |= 8;
  for (int i = 0; i < 12; i++) if (x[i] != (float)i) bad |= 16;
  /* a bad offset table is refused before any traffic */
  const uint64_t worse[4] = {0, 6, 5, 12};
  if (esmt_comm_allgather_shards(c, x, 12, worse, sizeof(float)) != ESMT_ERR_INVALID_ARGUMENT)
    bad |= 32;
  esmt_comm_destroy(c);
  return bad;
}

static void test_comm_halves(void **state) {
  (void)state;
  g_job++;
  pid_t pid[3];
  for (int r = 0; r < 3; r++) {
    pid[r] = fork();
    if (pid[r] == 0) _exit(rs_rank(r));
  }
  for (int r = 0; r < 3; r++) {
    int ws;
    waitpid(pid[r], &ws, 0);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
  }
}

static void test_two_ranks_bit_identical(void **state) {
  (void)state;
  size_t n0, n1;
  float *plain = train(2, 0, 0, &n0, "a"), *zero = train(2, 1, 0, &n1, "a");
  assert_int_equal(n0, n1);
  assert_memory_equal(plain, zero, n0 * sizeof *plain);
  printf("2 ranks, %d updates: dist.zero 1 == dist.zero 0 bit for bit\n", STEPS);
  free(plain);
  free(zero);
}

/* With clipping active: the norm is summed per shard, which could change
 * its last bits; measured here (bit-identical on this model). */
static void test_two_ranks_clipped(void **state) {
  (void)state;
  size_t n0, n1;
  g_clip = 0.05;
  float *plain = train(2, 0, 0, &n0, "d"), *zero = train(2, 1, 0, &n1, "d");
  g_clip = 0;
  size_t differ = 0;
  for (size_t i = 0; i < n0; i++) differ += memcmp(&plain[i], &zero[i], sizeof *plain) != 0;
  const double rel = rel_diff(zero, plain, n0);
  printf("2 ranks, clipped at 0.05: dist.zero 1 vs 0: rel diff %.3g, %zu of %zu weights differ "
         "in bits\n", rel, differ, n0);
  assert_true(rel < 1e-6);
  free(plain);
  free(zero);
}

/* bf16 compute: AdamW refreshes the half copy of the shard, the other
 * shards' copies are converted after the all-gather. */
static void test_two_ranks_bf16(void **state) {
  (void)state;
  size_t n0, n1;
  g_bf16 = 1;
  float *plain = train(2, 0, 0, &n0, "e"), *zero = train(2, 1, 0, &n1, "e");
  g_bf16 = 0;
  assert_int_equal(n0, n1);
  assert_memory_equal(plain, zero, n0 * sizeof *plain);
  printf("2 ranks, bf16 compute (emulated): dist.zero 1 == dist.zero 0 bit for bit\n");
  free(plain);
  free(zero);
}

static void test_three_ranks(void **state) {
  (void)state;
  size_t n0, n1;
  float *plain = train(3, 0, 0, &n0, "b"), *zero = train(3, 1, 0, &n1, "b");
  assert_int_equal(n0, n1);
  const double rel = rel_diff(zero, plain, n0);
  size_t differ = 0;
  for (size_t i = 0; i < n0; i++) differ += memcmp(&plain[i], &zero[i], sizeof *plain) != 0;
  printf("3 ranks, %d updates: dist.zero 1 vs 0: rel diff %.3g, %zu of %zu weights differ in "
         "bits (the summation order of three differs)\n", STEPS, rel, differ, n0);
  assert_true(rel < 1e-6);
  free(plain);
  free(zero);
}

static void test_overflow_is_global(void **state) {
  (void)state;
  size_t n0, n1;
  float *plain = train(2, 0, 1, &n0, "c"), *zero = train(2, 1, 1, &n1, "c");
  assert_memory_equal(plain, zero, n0 * sizeof *plain);
  printf("2 ranks, loss scale on, NaN in one shard at update 3: every rank skipped it\n");
  free(plain);
  free(zero);
}

/* 6 updates from scratch vs 4 (dist.zero z1, saved) + resume with
 * dist.zero z2 for 2; 2 ranks: bit for bit. */
static void resume_case(int z1, int z2, const float *full, size_t n) {
  char part[512], w[2][512];
  path_of(part, sizeof part, "part", z1, z2);
  path_of(w[0], sizeof w[0], "wres0", z1, z2);
  path_of(w[1], sizeof w[1], "wres1", z1, z2);
  int st[2];
  run_spec b[2] = {{0, 2, z1, 4, part, 2, 0, 0, 0, NULL, NULL, NULL},
                   {1, 2, z1, 4, part, 2, 0, 0, 0, NULL, NULL, NULL}};
  run_ranks(b, 2, st);
  assert_int_equal(st[0] | st[1], 0);
  run_spec c[2] = {{0, 2, z2, 6, part, 2, 1, 0, 0, w[0], NULL, NULL},
                   {1, 2, z2, 6, part, 2, 1, 0, 0, w[1], NULL, NULL}};
  run_ranks(c, 2, st);
  assert_int_equal(st[0] | st[1], 0);
  size_t n0, n1;
  float *y = read_weights(w[0], &n0), *z = read_weights(w[1], &n1);
  assert_int_equal(n0, n);
  assert_memory_equal(full, y, n * sizeof *y);
  assert_memory_equal(y, z, n * sizeof *y);
  printf("2 ranks: 4 updates (dist.zero %d) + resume (dist.zero %d) + 2 == 6, bit for bit\n", z1,
         z2);
  free(y);
  free(z);
}

static void test_resume(void **state) {
  (void)state;
  char full[512], wf[512];
  snprintf(full, sizeof full, "%s/full", g_dir);
  snprintf(wf, sizeof wf, "%s/w-full", g_dir);
  int st[2];
  run_spec a[2] = {{0, 2, 1, 6, full, 2, 0, 0, 0, wf, NULL, NULL},
                   {1, 2, 1, 6, full, 2, 0, 0, 0, NULL, NULL, NULL}};
  run_ranks(a, 2, st);
  assert_int_equal(st[0] | st[1], 0);
  size_t n;
  float *x = read_weights(wf, &n);
  resume_case(1, 1, x, n);
  resume_case(0, 1, x, n);
  resume_case(1, 0, x, n);
  /* a ZeRO-1 checkpoint holds the whole moments: the same file layout */
  esmt_context *ctx = make_ctx();
  esmt_model *m = make_model(ctx);
  char dir[1024];
  assert_int_equal(esmt_checkpoint_resolve(full, dir, sizeof dir), ESMT_OK);
  assert_int_equal(esmt_checkpoint_load(m, dir, 1, NULL), ESMT_OK);
  float *mv = malloc(n * sizeof *mv);
  assert_int_equal(esmt_flat_download(m, mv, m->mem.moment2), ESMT_OK);
  size_t zeros = 0;
  for (size_t i = 0; i < n; i++) zeros += mv[i] == 0.0f;
  assert_true(zeros < n / 100); /* every shard's second moments are there */
  free(mv);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  free(x);
}

static void test_killed_rank(void **state) {
  (void)state;
  char err[512];
  snprintf(err, sizeof err, "%s/err0", g_dir);
  run_spec s[2] = {{0, 2, 1, 50, NULL, 0, 0, 0, 0, NULL, err, NULL},
                   {1, 2, 1, 50, NULL, 0, 0, 3, 0, NULL, NULL, NULL}};
  int st[2];
  double t0 = esmt_clock_seconds();
  run_ranks(s, 2, st);
  double waited = esmt_clock_seconds() - t0;
  assert_int_equal(st[1], 128 + SIGKILL);
  assert_true(st[0] != 0 && st[0] < 128);
  char msg[2048] = "";
  FILE *f = fopen(err, "r");
  assert_non_null(f);
  size_t n = fread(msg, 1, sizeof msg - 1, f);
  msg[n] = '\0';
  fclose(f);
  printf("ZeRO-1, rank 1 killed after update 3: rank 0 stopped after %.1f s: %s\n", waited, msg);
  assert_non_null(strstr(msg, "rank 1"));
  assert_true(waited < 15);
}

static void test_offload_refused(void **state) {
  (void)state;
  esmt_context *ctx = make_ctx();
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 1; c.hidden_size = 32; c.num_heads = 2; c.max_positions = 64;
  esmt_offload_options oo = {.enabled = 1};
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create_with(ctx, &c, 7, &oo, &m), ESMT_OK);
  mem_source ms = {.rows = 2};
  esmt_batch_source src = mem_source_as_source(&ms);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  esmt_trainer *t = NULL;
  assert_int_equal(esmt_trainer_create(m, &o, &src, &t), ESMT_OK);
  char rdv[512];
  snprintf(rdv, sizeof rdv, "%s/rdv-one", g_dir);
  esmt_comm_options co = {0, 1, NULL, 0, rdv, 77, 5.0};
  esmt_comm *comm = NULL;
  esmt_dp *dp = NULL;
  assert_int_equal(esmt_comm_create(&comm, &co), ESMT_OK);
  assert_int_equal(esmt_dp_create(comm, 0, &dp), ESMT_OK);
  esmt_dp_set_zero(dp, 1);
  assert_int_equal(esmt_trainer_set_dp(t, dp), ESMT_ERR_UNSUPPORTED);
  printf("refused: %s\n", esmt_last_error());
  assert_non_null(strstr(esmt_last_error(), "offload.optimizer"));
  esmt_trainer_destroy(t);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "%s", test_mkdtemp());
  return 0;
}
static int teardown(void **state) {
  (void)state;
  test_rmtree(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_comm_halves),
      cmocka_unit_test(test_two_ranks_bit_identical),
      cmocka_unit_test(test_two_ranks_clipped),
      cmocka_unit_test(test_two_ranks_bf16),
      cmocka_unit_test(test_three_ranks),
      cmocka_unit_test(test_overflow_is_global),
      cmocka_unit_test(test_resume),
      cmocka_unit_test(test_killed_rank),
      cmocka_unit_test(test_offload_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
