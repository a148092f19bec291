/* SPDX-License-Identifier: MIT */
/* ZeRO-1 and ZeRO-2 combined with optimizer offload (dist.zero 1, 2 with
 * offload.optimizer on) on the CPU backend over the real TCP communicator,
 * ranks as fork()ed processes:
 *  - each rank's host holds the fp32 master, the moments and the fp32
 *    gradients of its shard only (the bytes the planner quotes), and the
 *    start-up log says so;
 *  - with one micro-batch per rank the run is bit-identical to the same
 *    stage with the optimizer on the device (2 ranks at stage 1, 3 ranks
 *    at stage 2: the host AdamW is the same op on the same shard), and every
 *    rank's compute copy equals the gathered master;
 *  - with two micro-batches per rank at stage 2 the offloaded ranks sum a
 *    shard's partial sums in another order (whole device gradients, the
 *    other shards cleared between micro-batches): within the data-parallel
 *    bound of the device run;
 *  - ZeRO-3 with offload (2 ranks and 1, fp32): the host holds the shard's
 *    master, moments and gradients, the device the shard's compute
 *    weights (equal to the master shard after each update); bit-identical
 *    to ZeRO-3 on the device (the same reduce-scatter order, the same
 *    AdamW op), with the same bytes all-gathered per update;
 *  - a checkpoint save gathers the master and the moments to rank 0 only:
 *    the other ranks' largest allocation during the save is a shard, not
 *    the whole buffer (3 ranks, ZeRO-3 offloaded; malloc wrapped);
 *  - an offloaded model not created for the shard (ZeRO-2) or for ZeRO-3
 *    is refused with a message naming what to do. */
#define _GNU_SOURCE
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "dp_group.h"
#include "mem_source.h"
#include "offload.h"
#include "param_shard.h"
#include "rank_runner.h"
#include "trainer.h"

enum { STEPS = 4 };
/* N ranks sum micro-batches' gradients in another order (test_zero1's bound) */
#define ACCUMULATION_MAX_ABS_DIFF 1e-6

static char g_dir[256];
static int g_job;
static char g_zero_line[512]; /* this process's "ZeRO-N: rank ..." log line */

/* The largest malloc while g_track is set (linked with --wrap=malloc). */
void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
static int g_track;
static size_t g_largest;
void *__wrap_malloc(size_t n) {
  if (g_track && n > g_largest) g_largest = n;
  return __real_malloc(n);
}

static void on_log(void *user, esmt_log_level level, const char *message) {
  (void)user;
  (void)level;
  if (strncmp(message, "ZeRO-", 5) == 0 && strstr(message, ": rank "))
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

typedef struct run_spec {
  int rank, world, zero, offload;
  int per_update;       /* micro-batches per rank per update */
  int sized_for_shard;  /* 0: the model is created without the ZeRO options */
  char out[256];        /* this rank's files: out.w (master shard), .c (compute), .info */
  int save;             /* 1: save a checkpoint after training, its largest malloc in .info */
} run_spec;

/* A batch has 40..48 real tokens (test_zero1's budget): k per rank. */
static uint64_t budget_of(int world, int k) {
  return k <= 1 ? 0 : (uint64_t)(48 * (world * k - 1) + 1);
}

/* The device's fp32 compute weights: whole, or ZeRO-3's shard at its
 * place (zeros elsewhere). */
static void write_compute(esmt_model *m, const char *path) {
  const uint64_t n = m->layout.total, lo = m->mem.compute_lo;
  const uint64_t held = m->mem.wgather ? m->mem.master_hi - lo : n;
  float *w = calloc(n, sizeof *w);
  const void *src = m->mem.compute32;
  esmtb_status bs = !w || !src ? 1 : m->ops->copy_async(m->dev, w + lo, src, held * sizeof *w,
                                                         ESMTB_COPY_D2H, m->stream);
  if (!bs) bs = m->ops->stream_sync(m->dev, m->stream);
  FILE *f = bs ? NULL : fopen(path, "wb");
  if (f) fwrite(w, sizeof *w, n, f);
  if (f) fclose(f);
  free(w);
}

static esmt_status run(const void *spec) {
  const run_spec *s = spec;
  esmt_context *ctx = make_ctx();
  if (!ctx) return ESMT_ERR_INTERNAL;
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2; c.hidden_size = 32; c.num_heads = 2; c.max_positions = 64;
  esmt_offload_options oo = {.enabled = s->offload};
  if (s->sized_for_shard) { /* as the trainer's configuration creates it */
    oo.zero_level = s->zero;
    oo.zero_rank = s->rank;
    oo.zero_world = s->world;
  }
  esmt_model *m = NULL;
  esmt_status st = esmt_model_create_with(ctx, &c, 7, &oo, &m);
  mem_source ms = {.rows = 2, .offset = s->rank, .stride = s->world};
  esmt_batch_source src = mem_source_as_source(&ms);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  esmt_schedule sched = ESMT_SCHEDULE_INIT;
  o.schedule = &sched;
  sched.peak_lr = 1e-3;
  sched.warmup_steps = 2;
  sched.total_steps = 20;
  o.log_every = 0;
  o.max_steps = STEPS;
  o.tokens_per_update = budget_of(s->world, s->per_update);
  char run_dir[300];
  snprintf(run_dir, sizeof run_dir, "%s/run-%d", g_dir, g_job);
  if (s->save) o.run_dir = run_dir;
  esmt_trainer *t = NULL;
  if (!st) st = esmt_trainer_create(m, &o, &src, &t);
  if (!st) {
    char rdv[512];
    snprintf(rdv, sizeof rdv, "%s/rdv-%d", g_dir, g_job);
    esmt_comm_options co = {s->rank, s->world, NULL, 0, rdv, (uint64_t)g_job + 1, 20.0};
    esmt_comm *comm = NULL;
    esmt_dp *dp = NULL;
    st = esmt_comm_create(&comm, &co);
    if (!st) st = esmt_dp_create(comm, 4096, &dp); /* small buckets: some across shards */
    if (!st) esmt_dp_set_zero(dp, s->zero);
    if (!st) st = esmt_trainer_set_dp(t, dp);
  }
  while (!st && esmt_trainer_step_count(t) < STEPS) {
    esmt_train_metrics mt = {.struct_size = sizeof mt};
    st = esmt_trainer_step(t, &mt);
  }
  g_largest = 0;
  if (!st && s->save) {
    g_track = 1;
    st = esmt_trainer_save(t, NULL, 0);
    g_track = 0;
  }
  char path[300];
  snprintf(path, sizeof path, "%s.err", s->out);
  if (st) write_text(path, esmt_last_error());
  if (!st) {
    const esmt_offload *off = m->mem.offload;
    esmt_zero_volume v; /* the bytes each collective moved */
    esmt_dp_volume(t->dp, &v);
    char info[800];
    snprintf(info, sizeof info, "%llu %llu %llu %llu %llu %llu %llu\n%s",
             (unsigned long long)m->mem.master_lo, (unsigned long long)m->mem.master_hi,
             (unsigned long long)m->layout.total,
             (unsigned long long)(off ? off->pinned_bytes + off->pageable_bytes : 0),
             (unsigned long long)(off ? off->hi - off->lo : 0),
             (unsigned long long)v.allgathered, (unsigned long long)g_largest, g_zero_line);
    snprintf(path, sizeof path, "%s.info", s->out);
    write_text(path, info);
    snprintf(path, sizeof path, "%s.w", s->out);
    write_weights(m, path);
    snprintf(path, sizeof path, "%s.c", s->out);
    write_compute(m, path);
  }
  esmt_trainer_destroy(t);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return st;
}

typedef struct result {
  float *master;  /* the ranks' master shards put together (malloc'ed) */
  size_t n;
  unsigned long long gathered; /* rank 0's all-gathered bytes */
} result;

/* world ranks at `zero`, offload on or off; every rank's compute copy must
 * equal the master the shards make, and an offloaded rank must hold its
 * shard only on the host. With `save`, the ranks save a checkpoint and
 * largest[r] is rank r's largest allocation during the save. */
static result train_saving(int world, int zero, int offload, int per_update, int save,
                           unsigned long long *largest) {
  run_spec specs[3];
  memset(specs, 0, sizeof specs);
  g_job++;
  for (int r = 0; r < world; r++) {
    specs[r] = (run_spec){r, world, zero, offload, per_update, 1, "", save};
    snprintf(specs[r].out, sizeof specs[r].out, "%s/j%d-r%d", g_dir, g_job, r);
  }
  int status[3];
  run_ranks_forked(run, specs, sizeof *specs, world, status);
  for (int r = 0; r < world; r++) {
    if (status[r]) {
      char err[1024], path[300];
      snprintf(path, sizeof path, "%s.err", specs[r].out);
      read_rank_text(path, err, sizeof err);
      fail_msg("rank %d: status %d: %s", r, status[r], err);
    }
  }
  result res = {NULL, 0, 0};
  uint64_t covered = 0;
  for (int r = 0; r < world; r++) {
    char path[300], info[800];
    snprintf(path, sizeof path, "%s.info", specs[r].out);
    read_rank_text(path, info, sizeof info);
    unsigned long long lo, hi, total, host_bytes, host_n, gathered, big;
    assert_int_equal(sscanf(info, "%llu %llu %llu %llu %llu %llu %llu", &lo, &hi, &total,
                            &host_bytes, &host_n, &gathered, &big), 7);
    if (largest) largest[r] = big;
    /* one all-gather of the fp32 compute copy an update (as the planner
     * counts); ZeRO-3's per-layer gathers: compared with the device run */
    esmt_zero_volume vol;
    esmt_zero_comm_volume(zero, total, world, per_update, 4, &vol);
    if (zero < 3) assert_int_equal(gathered, STEPS * vol.allgathered);
    if (r == 0) res.gathered = gathered;
    snprintf(path, sizeof path, "%s.w", specs[r].out);
    size_t n;
    float *w = read_weights(path, &n);
    assert_int_equal(n, total);
    if (!res.master) {
      res.master = calloc(n, sizeof *res.master);
      res.n = n;
    }
    memcpy(res.master + lo, w + lo, (hi - lo) * sizeof *w);
    free(w);
    if (offload) { /* the host holds the shard: master, moments, gradients */
      assert_int_equal(lo, covered);
      covered = hi;
      assert_int_equal(host_n, hi - lo);
      const esmt_offload_shape shape = {hi - lo, 0, 0, ESMT_OPTIMIZER_ADAMW, 4};
      assert_int_equal(host_bytes, esmt_offload_host_bytes(&shape));
      /* rank 0 holds the largest shard: the planner's per-rank figure */
      const esmt_offload_shape whole = {total, 0, 0, ESMT_OPTIMIZER_ADAMW, 4};
      if (r == 0) assert_int_equal(host_bytes, esmt_offload_host_bytes_sharded(&whole, zero, world));
      assert_true(host_bytes * (unsigned long long)world <= esmt_offload_host_bytes(&whole) +
                                                                 (unsigned long long)world * 1024);
      char want[160];
      snprintf(want, sizeof want, "fp32 master weights, moments and gradients %llu bytes",
               16 * (hi - lo));
      assert_non_null(strstr(info, want));
      if (r == 0)
        printf("  %d ranks, ZeRO-%d, offload: rank 0 holds [%llu, %llu) of %llu on its host, "
               "%llu bytes (the whole model's: %llu)\n", world, zero, lo, hi, total, host_bytes,
               (unsigned long long)esmt_offload_host_bytes(&whole));
    }
  }
  if (offload) assert_int_equal(covered, res.n);
  for (int r = 0; r < world && (zero < 3 || offload); r++) {
    /* the all-gather filled every rank's compute copy; ZeRO-3 offloaded:
     * the upload wrote the shard's (ZeRO-3 on the device reads the master) */
    char path[300];
    snprintf(path, sizeof path, "%s.c", specs[r].out);
    size_t n;
    float *cw = read_weights(path, &n);
    assert_int_equal(n, res.n);
    uint64_t lo = 0, hi = n, off[4];
    if (zero >= 3) {
      esmt_zero_split(n, world, off);
      lo = off[r], hi = off[r + 1];
    }
    assert_memory_equal(cw + lo, res.master + lo, (hi - lo) * sizeof *cw);
    free(cw);
  }
  return res;
}

static result train(int world, int zero, int offload, int per_update) {
  return train_saving(world, zero, offload, per_update, 0, NULL);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= worst)) worst = d;
  }
  return worst;
}

static void same_as_device(int world, int zero, int per_update, int bit_identical) {
  result dev = train(world, zero, 0, per_update);
  result off = train(world, zero, 1, per_update);
  assert_int_equal(dev.n, off.n);
  const double diff = max_abs_diff(dev.master, off.master, dev.n);
  printf("  %d ranks, ZeRO-%d, %d micro-batch(es) per rank: offload vs device max |diff| %.3g\n",
         world, zero, per_update, diff);
  if (bit_identical) assert_memory_equal(dev.master, off.master, dev.n * sizeof *dev.master);
  else assert_true(diff <= ACCUMULATION_MAX_ABS_DIFF);
  assert_int_equal(dev.gathered, off.gathered); /* the same collectives */
  free(dev.master);
  free(off.master);
}

static void test_zero1_two_ranks(void **state) {
  (void)state;
  same_as_device(2, 1, 1, 1);
}

static void test_zero2_three_ranks(void **state) {
  (void)state;
  same_as_device(3, 2, 1, 1);
}

static void test_zero2_accumulation(void **state) {
  (void)state;
  same_as_device(2, 2, 2, 0);
}

/* two micro-batches a rank: the shard sums its pieces in the same order
 * as on the device, so still bit-identical; and one rank (dist.force: the
 * gathers of one rank, the model created for them) */
static void test_zero3(void **state) {
  (void)state;
  same_as_device(2, 3, 2, 1);
  same_as_device(1, 3, 1, 1);
}

/* A save gathers the master and the moments to rank 0: the others hold a
 * shard of one buffer at a time (the whole was 4 P bytes a buffer). */
static void test_save_gathers_to_rank0(void **state) {
  (void)state;
  unsigned long long largest[3];
  result res = train_saving(3, 3, 1, 1, 1, largest);
  const unsigned long long whole = res.n * sizeof(float);
  const unsigned long long shard = esmt_zero_shard_max(res.n, 3) * sizeof(float);
  printf("  save, 3 ranks at ZeRO-3 offloaded: largest allocation %llu bytes on rank 0, %llu "
         "and %llu on ranks 1 and 2 (a shard: %llu; the whole: %llu)\n", largest[0], largest[1],
         largest[2], shard, whole);
  assert_true(largest[0] >= whole);
  for (int r = 1; r < 3; r++) assert_true(largest[r] < whole && largest[r] >= shard);
  free(res.master);
}

/* A refused combination: rank 0's message must name `want`. */
static void refused(int zero, int sized_for_shard, const char *want) {
  run_spec specs[2];
  memset(specs, 0, sizeof specs);
  g_job++;
  for (int r = 0; r < 2; r++) {
    specs[r] = (run_spec){r, 2, zero, 1, 1, sized_for_shard, "", 0};
    snprintf(specs[r].out, sizeof specs[r].out, "%s/j%d-r%d", g_dir, g_job, r);
  }
  int status[2];
  run_ranks_forked(run, specs, sizeof *specs, 2, status);
  assert_int_equal(status[0], ESMT_ERR_UNSUPPORTED);
  char err[1024], path[300];
  snprintf(path, sizeof path, "%s.err", specs[0].out);
  read_rank_text(path, err, sizeof err);
  printf("  refused: %s\n", err);
  assert_non_null(strstr(err, want));
}

static void test_refusals(void **state) {
  (void)state;
  refused(3, 0, "not created for ZeRO-3");
  refused(2, 0, "create the model for the shard");
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
      cmocka_unit_test(test_zero1_two_ranks),
      cmocka_unit_test(test_zero2_three_ranks),
      cmocka_unit_test(test_zero2_accumulation),
      cmocka_unit_test(test_zero3),
      cmocka_unit_test(test_save_gathers_to_rank0),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
