/* SPDX-License-Identifier: MIT */
/* ZeRO-1 and ZeRO-2 (dist.zero 1, 2) on the CPU backend over the real TCP
 * communicator, ranks as fork()ed processes (zero_rank_fixture.c; ZeRO-3:
 * test_zero3.c):
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
 *  - ZeRO-1 with optimizer offload is refused with a message;
 *  - ZeRO-2 (each part reduce-scattered as backward finishes it, the
 *    shard accumulated, fp32 gradients held for the shard only):
 *    with one micro-batch per rank bit-identical to ZeRO-1 (2 and 3 ranks);
 *    with two, 2 ranks equal one process accumulating the same four
 *    micro-batches within the data-parallel bound, and 3 ranks equal
 *    ZeRO-0 within it; the bytes each collective moved per update equal
 *    esmt_zero_comm_volume's; checkpoints of stages 0, 1 and 2 are the
 *    same files, and resume crosses stages bit for bit;
 *  - the planner's per-rank moments and gradients equal what the ranks
 *    allocated. */
#define _GNU_SOURCE
#include "zero_rank_fixture.h"

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
#include "grad_shard.h"
#include "mem_source.h"
#include "offload.h"
#include "rank_runner.h"
#include "trainer.h"

static void path_of(char *buf, size_t cap, const char *what, int a, int b) {
  snprintf(buf, cap, "%s/%s-%d-%d", test_tmpdir, what, a, b);
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
  snprintf(rdv, sizeof rdv, "%s/rdv-rs-%d", test_tmpdir, g_job);
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

/* bf16 compute at ZeRO-2: each rank keeps the fp32 master of its shard
 * only and the ranks all-gather the bf16 copy; one micro-batch per rank
 * reduces in ZeRO-1's order, so the master is ZeRO-1's bit for bit, 2 and
 * 3 ranks; and the checkpoint (the master gathered) is ZeRO-1's bytes. */
static void test_zero2_sharded_master_bf16(void **state) {
  (void)state;
  g_bf16 = 1;
  for (int world = 2; world <= 3; world++) {
    size_t n1, n2;
    float *z1 = train(world, 1, 0, &n1, "m"), *z2 = train(world, 2, 0, &n2, "m");
    assert_int_equal(n1, n2);
    assert_memory_equal(z1, z2, n1 * sizeof *z1);
    printf("%d ranks, bf16 compute (emulated): dist.zero 2 with the fp32 master sharded == "
           "dist.zero 1 bit for bit\n", world);
    check_volume("m", world, 1, 1, n1); /* the fp32 master all-gathered */
    check_volume("m", world, 2, 1, n2); /* the bf16 copy all-gathered: half the bytes */
    check_plan_master("m", world, 1, n1);
    check_plan_master("m", world, 2, n2);
    free(z1);
    free(z2);
  }
  char dirs[2][512], ck[2][1024];
  for (int z = 1; z <= 2; z++) {
    snprintf(dirs[z - 1], sizeof dirs[z - 1], "%s/ck-bf16-z%d", test_tmpdir, z);
    run_spec s[2] = {{0, 2, z, 3, dirs[z - 1], 3, 0, 0, 0, NULL, NULL, NULL},
                     {1, 2, z, 3, dirs[z - 1], 3, 0, 0, 0, NULL, NULL, NULL}};
    int st[2];
    run_ranks(s, 2, st);
    assert_int_equal(st[0] | st[1], 0);
    assert_int_equal(esmt_checkpoint_resolve(dirs[z - 1], ck[z - 1], sizeof ck[z - 1]), ESMT_OK);
  }
  same_checkpoint_files(ck[0], ck[1], "bf16 checkpoint, dist.zero 1 and 2:");
  /* resume both (ZeRO-2's master sharded again from the checkpoint) for
   * two more updates: the same files again */
  for (int z = 1; z <= 2; z++) {
    run_spec s[2] = {{0, 2, z, 5, dirs[z - 1], 5, 1, 0, 0, NULL, NULL, NULL},
                     {1, 2, z, 5, dirs[z - 1], 5, 1, 0, 0, NULL, NULL, NULL}};
    int st[2];
    run_ranks(s, 2, st);
    assert_int_equal(st[0] | st[1], 0);
    assert_int_equal(esmt_checkpoint_resolve(dirs[z - 1], ck[z - 1], sizeof ck[z - 1]), ESMT_OK);
  }
  assert_non_null(strstr(ck[1], "step-00000005"));
  same_checkpoint_files(ck[0], ck[1], "bf16 checkpoint after resuming, dist.zero 1 and 2:");
  g_bf16 = 0;
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
  snprintf(full, sizeof full, "%s/full", test_tmpdir);
  snprintf(wf, sizeof wf, "%s/w-full", test_tmpdir);
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
  resume_case(2, 0, x, n); /* ZeRO-2 (one micro-batch per rank: ZeRO-1's bits) */
  resume_case(1, 2, x, n);
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
  snprintf(err, sizeof err, "%s/err0", test_tmpdir);
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

/* Rank 1 of 2 killed on entering its nth collective of one kind, while
 * rank 0 is inside that collective: rank 0 stops within seconds (the
 * ring's closed connection, not the 20 s timeout) with an error naming
 * rank 1, and when that happens inside a save the run directory keeps its
 * last good checkpoint, `latest` naming it, and nothing half-written. */
static void killed_mid_collective(int zero, esmt_comm_op op, uint64_t nth, const char *what) {
  char err[512], run_dir[512];
  path_of(err, sizeof err, "kill-err", zero, (int)op);
  path_of(run_dir, sizeof run_dir, "kill-run", zero, (int)op);
  run_spec s[2] = {{0, 2, zero, 6, run_dir, 2, 0, 0, 0, NULL, err, NULL},
                   {1, 2, zero, 6, run_dir, 2, 0, 0, 0, NULL, NULL, NULL}};
  int st[2];
  g_kill_rank = 1;
  g_kill_op = (int)op;
  g_kill_nth = nth;
  double t0 = esmt_clock_seconds();
  run_ranks(s, 2, st);
  double waited = esmt_clock_seconds() - t0;
  g_kill_nth = 0;
  assert_int_equal(st[1], 128 + SIGKILL);
  assert_true(st[0] != 0 && st[0] < 128);
  char msg[2048];
  read_rank_text(err, msg, sizeof msg);
  printf("ZeRO-%d, rank 1 killed entering %s: rank 0 stopped after %.2f s: %s\n", zero, what,
         waited, msg);
  assert_non_null(strstr(msg, "rank 1"));
  assert_true(strstr(msg, "connection") || strstr(msg, "closed") || strstr(msg, "died"));
  assert_true(waited < 10);
  esmt_context *ctx = make_ctx();
  esmt_model *m = make_model(ctx);
  assert_last_good_checkpoint(run_dir, "step-00000002", m);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

static void test_killed_mid_collective(void **state) {
  (void)state;
  /* stage 0: gradient buckets all-reduced in update 3 */
  killed_mid_collective(0, ESMT_COMM_OP_ALLREDUCE, 80, "an all-reduce of update 3");
  /* stage 2: a part's gradients reduce-scattered in update 3 */
  killed_mid_collective(2, ESMT_COMM_OP_REDUCE_SCATTER, 10, "a reduce-scatter of update 3");
  /* stage 1: a save sends rank 1's first, then second moments to rank 0
   * (one broadcast each); 4 is the second moment's of the save at update
   * 4, after the first's */
  killed_mid_collective(1, ESMT_COMM_OP_BROADCAST, 4, "the save's moment broadcast");
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
  snprintf(rdv, sizeof rdv, "%s/rdv-one", test_tmpdir);
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

/* One micro-batch per rank: ZeRO-2 reduces once per update, as ZeRO-1,
 * in the same order: the same bits, 2 and 3 ranks. */
static void test_zero2_one_micro_batch(void **state) {
  (void)state;
  for (int world = 2; world <= 3; world++) {
    size_t n1, n2;
    float *z1 = train(world, 1, 0, &n1, "f"), *z2 = train(world, 2, 0, &n2, "f");
    assert_int_equal(n1, n2);
    assert_memory_equal(z1, z2, n1 * sizeof *z1);
    printf("%d ranks x 1 micro-batch, %d updates: dist.zero 2 == dist.zero 1 bit for bit\n",
           world, STEPS);
    check_volume("f", world, 2, 1, n2);
    free(z1);
    free(z2);
  }
}

/* Two micro-batches per rank: ZeRO-2 reduce-scatters each and keeps only
 * the shard's sums between them. 2 ranks against one process accumulating
 * the same four micro-batches, 3 ranks against ZeRO-0 (six micro-batches
 * do not fit one process's token budget exactly: budget_of). */
static void test_zero2_accumulation(void **state) {
  (void)state;
  size_t n, n0, n1, n2;
  g_per_update = 4;
  float *one = train(1, 0, 0, &n, "g");
  g_per_update = 2;
  float *z0 = train(2, 0, 0, &n0, "g"), *z1 = train(2, 1, 0, &n1, "g"),
        *z2 = train(2, 2, 0, &n2, "g");
  assert_int_equal(n, n2);
  const double d_one = max_abs_diff(z2, one, n), d_z1 = max_abs_diff(z2, z1, n);
  printf("2 ranks x 2 micro-batches, %d updates: dist.zero 2 vs one process x 4: max abs diff "
         "%.3g (rel %.3g); vs dist.zero 1: %.3g (0 would mean the same order)\n", STEPS, d_one,
         rel_diff(z2, one, n), d_z1);
  assert_true(d_one < ACCUMULATION_MAX_ABS_DIFF);
  assert_true(max_abs_diff(z0, one, n) < ACCUMULATION_MAX_ABS_DIFF);
  assert_true(d_z1 < ACCUMULATION_MAX_ABS_DIFF);
  assert_true(max_abs_diff(z2, z0, n) > 0); /* it trained and the micro-batches were reduced apart */
  check_volume("g", 2, 0, 2, n0);
  check_volume("g", 2, 1, 2, n1);
  check_volume("g", 2, 2, 2, n2);
  free(z0);
  free(z1);
  free(z2);
  z0 = train(3, 0, 0, &n0, "h");
  z2 = train(3, 2, 0, &n2, "h");
  const double d3 = max_abs_diff(z2, z0, n);
  printf("3 ranks x 2 micro-batches: dist.zero 2 vs 0: max abs diff %.3g (rel %.3g); vs one "
         "process x 4 (other batches): %.3g\n", d3, rel_diff(z2, z0, n), max_abs_diff(z2, one, n));
  assert_true(d3 < ACCUMULATION_MAX_ABS_DIFF);
  assert_true(d3 > 0);
  check_volume("h", 3, 2, 2, n2);
  g_per_update = 1;
  free(z0);
  free(z2);
  free(one);
}

/* The checkpoint's files are the same bytes whatever the stage (one
 * micro-batch per rank, where the stages train the same bits). */
static void test_zero2_checkpoint_files(void **state) {
  (void)state;
  g_per_update = 1;
  char dirs[3][512], ck[3][1024];
  for (int z = 0; z <= 2; z++) {
    snprintf(dirs[z], sizeof dirs[z], "%s/ck-z%d", test_tmpdir, z);
    run_spec s[2] = {{0, 2, z, 4, dirs[z], 4, 0, 0, 0, NULL, NULL, NULL},
                     {1, 2, z, 4, dirs[z], 4, 0, 0, 0, NULL, NULL, NULL}};
    int st[2];
    run_ranks(s, 2, st);
    assert_int_equal(st[0] | st[1], 0);
    assert_int_equal(esmt_checkpoint_resolve(dirs[z], ck[z], sizeof ck[z]), ESMT_OK);
  }
  same_checkpoint_files(ck[0], ck[1], "checkpoint, dist.zero 0 and 1:");
  same_checkpoint_files(ck[0], ck[2], "checkpoint, dist.zero 0 and 2:");
}

/* The planner's per-rank figures are what the ranks allocated. */
static void test_zero2_plan_matches_ranks(void **state) {
  (void)state;
  g_per_update = 1;
  for (int world = 2; world <= 3; world++) {
    size_t n;
    free(train(world, 2, 0, &n, "p"));
    esmt_plan p = plan_of_runs(world, 2, 0);
    assert_int_equal(p.parameters, n);
    uint64_t most = 0, most_g = 0; /* the largest shard's: the rank the plan is for */
    for (int rk = 0; rk < world; rk++) {
      char path[600];
      snprintf(path, sizeof path, "%s/p-info%d-z2-r%d", test_tmpdir, world, rk);
      unsigned long long lo, hi, total, glo, ghi, gbytes;
      long long o, sk;
      double nm;
      FILE *f = fopen(path, "r");
      assert_non_null(f);
      assert_int_equal(fscanf(f, "%llu %llu %llu %lld %lld %lg %llu %llu %llu", &lo, &hi, &total,
                              &o, &sk, &nm, &glo, &ghi, &gbytes), 9);
      fclose(f);
      if (8 * (hi - lo) > most) most = 8 * (hi - lo);
      if (gbytes > most_g) most_g = gbytes;
    }
    printf("plan --world %d --zero 2: moments %llu bytes per rank (ranks hold at most %llu), "
           "gradients %llu (ranks hold at most %llu; whole: %zu), ring traffic %llu bytes per "
           "update per rank\n", world, (unsigned long long)p.device[ESMT_MEM_MOMENTS],
           (unsigned long long)most, (unsigned long long)p.device[ESMT_MEM_GRADIENTS],
           (unsigned long long)most_g, 4 * n, (unsigned long long)p.comm_bytes);
    assert_int_equal(p.device[ESMT_MEM_MOMENTS], most);
    assert_int_equal(p.device[ESMT_MEM_GRADIENTS], most_g);
    esmt_zero_volume v;
    esmt_zero_comm_volume(2, n, world, 1, 4, &v);
    assert_int_equal(p.comm_bytes, v.sent_per_rank);
    p = plan_of_runs(world, 0, 0); /* one process's moments whole */
    assert_int_equal(p.device[ESMT_MEM_MOMENTS], 8 * n);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_comm_halves),
      cmocka_unit_test(test_two_ranks_bit_identical),
      cmocka_unit_test(test_two_ranks_clipped),
      cmocka_unit_test(test_two_ranks_bf16),
      cmocka_unit_test(test_zero2_sharded_master_bf16),
      cmocka_unit_test(test_three_ranks),
      cmocka_unit_test(test_overflow_is_global),
      cmocka_unit_test(test_resume),
      cmocka_unit_test(test_killed_rank),
      cmocka_unit_test(test_killed_mid_collective),
      cmocka_unit_test(test_offload_refused),
      cmocka_unit_test(test_zero2_one_micro_batch),
      cmocka_unit_test(test_zero2_accumulation),
      cmocka_unit_test(test_zero2_checkpoint_files),
      cmocka_unit_test(test_zero2_plan_matches_ranks),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
