/* SPDX-License-Identifier: MIT */
/* ZeRO-1 and ZeRO-2 (dist.zero 1, 2) on the CPU backend over the real TCP
 * communicator, ranks as fork()ed processes:
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
#include "grad_shard.h"
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
static int g_layers = 2; /* the test model's depth */
static esmt_backend_entry g_emu;

static char g_zero_line[512]; /* this process's "ZeRO-N: rank ..." log line */
static int g_per_update = 1;  /* micro-batches per rank per update */
/* N ranks sum N micro-batches' gradients in another order than one process
 * accumulating them (test_data_parallel's bound) */
#define ACCUMULATION_MAX_ABS_DIFF 1e-6

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

static esmt_model *make_model(esmt_context *ctx) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = g_layers; c.hidden_size = 32; c.num_heads = 2; c.max_positions = 64;
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
/* > 0: each rank evaluates after training on g_eval_batches - rank batches
 * (uneven shares) and writes the loss to weights_out + ".eval" */
static int g_eval_batches;

/* With g_kill_nth > 0, rank g_kill_rank SIGKILLs itself on entering its
 * g_kill_nth collective of kind g_kill_op (set before the ranks fork). */
static int g_kill_rank, g_kill_op;
static uint64_t g_kill_nth;
static void kill_here(const esmt_comm *c, esmt_comm_op op, uint64_t nth) {
  (void)c;
  if ((int)op == g_kill_op && nth == g_kill_nth) raise(SIGKILL);
}

/* A batch has 40..48 real tokens (rows of 24, two per batch): this global
 * budget takes exactly k micro-batches per rank when k * world <= 5, and
 * for 3 ranks x 2 (any three batches < 145 <= any six). */
static uint64_t budget_of(int world, int k) {
  if (k <= 1 && world > 1) return 0;
  return world * k <= 5 ? (uint64_t)(48 * (world * k - 1) + 1) : (uint64_t)(48 * world + 1);
}


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
  o.tokens_per_update = budget_of(s->world, g_per_update);
  if (s->scaling) {
    o_ls.enabled = 1;
    o_ls.initial = 1024;
    esmt_test_inject_nan_step = 3;
  }
  esmt_trainer *t = NULL;
  esmt_status st = esmt_trainer_create(m, &o, &src, &t);
  if (!st && (s->world > 1 || s->zero >= 3)) { /* one process: no group, but ZeRO-3's gathers */
    char rdv[512];
    snprintf(rdv, sizeof rdv, "%s/rdv-%d", g_dir, g_job);
    esmt_comm_options co = {s->rank, s->world, NULL, 0, rdv, (uint64_t)g_job + 1, 20.0};
    esmt_comm *comm = NULL;
    esmt_dp *dp = NULL;
    if (g_kill_nth && s->rank == g_kill_rank) esmt_comm_test_fault = kill_here;
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
  if (!st && s->zero >= 2 && s->world > 1) { /* the embedding's gradients: rank 0's shard */
    const char *emb = "esm.embeddings.word_embeddings.weight";
    int idx = 0;
    st = esmt_model_find_tensor(m, emb, &idx);
    const uint64_t n = st ? 0 : m->layout.tensors[idx].numel;
    float *g = st ? NULL : malloc(n * sizeof *g);
    const esmt_status rs = g ? esmt_model_read_tensor(m, emb, ESMT_BUF_GRADS, g, n) : ESMT_OK;
    if (!st && rs != (s->rank == 0 ? ESMT_OK : ESMT_ERR_STATE))
      st = esmt_fail(ESMT_ERR_INTERNAL, "rank %d reading %s's gradients: status %d (%s)", s->rank,
                     emb, (int)rs, esmt_last_error());
    free(g);
  }
  if (st && s->error_out) write_text(s->error_out, esmt_last_error());
  if (!st && s->info_out) {
    char info[256];
    snprintf(info, sizeof info, "%llu %llu %llu %lld %lld %.9g %llu %llu",
             (unsigned long long)m->mem.opt_lo, (unsigned long long)m->mem.opt_hi,
             (unsigned long long)m->layout.total, (long long)t->scaler.overflows,
             (long long)t->skipped, t->last_finite_norm, (unsigned long long)m->mem.grads_lo,
             (unsigned long long)m->mem.grads_hi);
    /* the gradient bytes this rank allocated: the whole buffer, or ZeRO-2's
     * end parts, two slots and the shard */
    const esmt_grad_shard *g = m->mem.gshard;
    const unsigned long long gbytes =
        g ? 4 * (g->first_n + g->last_n + 2 * g->slot_n + (g->hi - g->lo))
          : 4 * (unsigned long long)m->layout.total;
    const size_t used = strlen(info);
    snprintf(info + used, sizeof info - used, " %llu", gbytes);
    write_text(s->info_out, info);
    char line_out[600];
    snprintf(line_out, sizeof line_out, "%s.log", s->info_out);
    write_text(line_out, g_zero_line);
    esmt_zero_volume v; /* the bytes each collective moved, per update */
    esmt_dp_volume(t->dp, &v);
    char vol[256];
    snprintf(vol, sizeof vol, "%llu %llu %llu %llu %lld", (unsigned long long)v.allreduced,
             (unsigned long long)v.reduce_scattered, (unsigned long long)v.allgathered,
             (unsigned long long)v.sent_per_rank, (long long)esmt_trainer_step_count(t));
    snprintf(line_out, sizeof line_out, "%s.vol", s->info_out);
    write_text(line_out, vol);
  }
  mem_source es = {.rows = 2, .offset = 1000 + s->rank, .stride = s->world,
                   .limit = g_eval_batches - s->rank};
  esmt_batch_source eval_src = mem_source_as_source(&es);
  if (!st && g_eval_batches > 0) st = esmt_trainer_set_eval_source(t, &eval_src);
  if (!st && g_eval_batches > 0) {
    esmt_eval_metrics em = {.struct_size = sizeof em};
    st = esmt_trainer_evaluate(t, &em);
    char path[600], text[64];
    snprintf(path, sizeof path, "%s.eval", s->weights_out);
    snprintf(text, sizeof text, "%.17g %llu", em.loss, (unsigned long long)em.selected);
    if (!st) write_text(path, text);
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
  memset(specs, 0, sizeof specs); /* GCC under ASan cannot see every rank filled */
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
  /* ZeRO-2 with a half compute copy: each rank keeps the fp32 master of
   * its shard only (write_weights: zeros elsewhere); the shards make w0 */
  const int sharded_master = (zero >= 3 || (g_bf16 && zero >= 2)) && world > 1;
  for (int r = 0; r < world; r++) {
    unsigned long long lo, hi, total, glo, ghi;
    long long overflows, skipped;
    double norm;
    FILE *f = fopen(info[r], "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%llu %llu %llu %lld %lld %lg %llu %llu", &lo, &hi, &total,
                            &overflows, &skipped, &norm, &glo, &ghi), 8);
    fclose(f);
    size_t nr;
    float *wr = read_weights(w[r], &nr);
    assert_int_equal(nr, *n);
    if (sharded_master) {
      size_t outside = 0;
      for (size_t i = 0; i < nr; i++) outside += (i < lo || i >= hi) && wr[i] != 0.0f;
      assert_int_equal(outside, 0);
      memcpy(w0 + lo, wr + lo, (hi - lo) * sizeof *w0);
    } else {
      assert_memory_equal(wr, w0, *n * sizeof *w0);
    }
    free(wr);
    /* ZeRO-2 keeps fp32 gradients for the shard only (per-part slots besides) */
    if (zero >= 2 && world > 1) {
      assert_int_equal(glo, lo);
      assert_int_equal(ghi, hi);
    } else {
      assert_int_equal(glo, 0);
      assert_int_equal(ghi, total);
    }
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
      snprintf(want, sizeof want, "fp32 master weights %llu bytes", 4 * (hi - lo));
      assert_true(!strstr(line, want) == !(sharded_master && zero < 3));
      snprintf(want, sizeof want, "(fp32 master %llu bytes), each layer's all-gathered",
               4 * (hi - lo));
      assert_true(!strstr(line, want) == !(zero >= 3));
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

static char *file_bytes(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *bytes = malloc(*len + 1);
  assert_non_null(bytes);
  assert_int_equal(fread(bytes, 1, *len, f), *len);
  fclose(f);
  return bytes;
}

/* Two checkpoints' model and optimizer files are the same bytes. */
static void same_checkpoint_files(const char *a, const char *b, const char *what) {
  static const char *const files[] = {"model.safetensors", "optimizer.safetensors"};
  for (size_t i = 0; i < 2; i++) {
    char pa[1200], pb[1200];
    snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
    snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
    size_t la, lb;
    char *ba = file_bytes(pa, &la), *bb = file_bytes(pb, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(ba, bb, la);
    printf("%s %s: the same %zu bytes\n", what, files[i], la);
    free(ba);
    free(bb);
  }
}

static void check_volume(const char *tag, int world, int zero, int k, size_t n);

/* The planner's master bytes for `world` ranks at `zero` in bf16 against
 * the largest shard the ranks of run `tag` held (4 bytes each). */
static void check_plan_master(const char *tag, int world, int zero, size_t n) {
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  mc.num_layers = 2; mc.hidden_size = 32; mc.num_heads = 2; mc.max_positions = 64;
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  r.model = &mc;
  r.micro_batch = 2;
  r.seq_len = MEM_T;
  r.world_size = world;
  r.zero = zero;
  r.precision = ESMT_PRECISION_BF16;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  uint64_t most = 0;
  for (int rk = 0; rk < world; rk++) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s-info%d-z%d-r%d", g_dir, tag, world, zero, rk);
    unsigned long long lo, hi;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%llu %llu", &lo, &hi), 2);
    fclose(f);
    if (4 * (hi - lo) > most) most = 4 * (hi - lo);
  }
  const uint64_t want = zero >= 2 ? most : 4 * (uint64_t)n;
  printf("  plan --world %d --zero %d --precision bf16: fp32 master %llu bytes per rank (ranks "
         "hold %llu)\n", world, zero, (unsigned long long)p.device[ESMT_MEM_MASTER_WEIGHTS],
         (unsigned long long)want);
  assert_int_equal(p.device[ESMT_MEM_MASTER_WEIGHTS], want);
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
    snprintf(dirs[z - 1], sizeof dirs[z - 1], "%s/ck-bf16-z%d", g_dir, z);
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
  /* stage 1: all-gathers 1, 2 update the weights, 3, 4 gather the moments
   * for the save at update 2, 5, 6 the weights again; 8 is the second
   * moment's gather of the save at update 4, after the first's */
  killed_mid_collective(1, ESMT_COMM_OP_ALLGATHER_SHARDS, 8, "the save's moment all-gather");
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

/* Rank 0's bytes per collective over `steps` updates (run's .vol file)
 * against esmt_zero_comm_volume's per-update figures. */
static void check_volume(const char *tag, int world, int zero, int k, size_t n) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s-info%d-z%d-r0.vol", g_dir, tag, world, zero);
  unsigned long long ar, rs, ag, sent;
  long long steps;
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%llu %llu %llu %llu %lld", &ar, &rs, &ag, &sent, &steps), 5);
  fclose(f);
  esmt_zero_volume want;
  if (zero >= 3) { /* per part: the model's parts */
    esmt_context *ctx = make_ctx();
    esmt_model *m = ctx ? make_model(ctx) : NULL;
    assert_non_null(m);
    esmt_zero3_comm_volume(m->layout.part_bounds, m->layout.n_parts, world, k, g_bf16 ? 2 : 4,
                           &want);
    esmt_model_destroy(m);
    esmt_context_destroy(ctx);
  } else {
    esmt_zero_comm_volume(zero, n, world, k, esmt_zero_gathered_bytes(zero, world, g_bf16 ? 2 : 4),
                          &want);
  }
  printf("  ZeRO-%d, %d ranks x %d micro-batches, P = %zu: per update all-reduced %llu, "
         "reduce-scattered %llu, all-gathered %llu bytes; sent per rank %llu "
         "(formula %llu)\n", zero, world, k, n, ar / (unsigned long long)steps,
         rs / (unsigned long long)steps, ag / (unsigned long long)steps,
         sent / (unsigned long long)steps, (unsigned long long)want.sent_per_rank);
  assert_int_equal(steps, STEPS);
  assert_int_equal(ar, want.allreduced * STEPS);
  assert_int_equal(rs, want.reduce_scattered * STEPS);
  assert_int_equal(ag, want.allgathered * STEPS);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = fabs((double)a[i] - b[i]);
    m = d > m ? d : m;
  }
  return m;
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
    snprintf(dirs[z], sizeof dirs[z], "%s/ck-z%d", g_dir, z);
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
    esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
    mc.num_layers = 2; mc.hidden_size = 32; mc.num_heads = 2; mc.max_positions = 64;
    esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
    r.model = &mc;
    r.micro_batch = 2;
    r.seq_len = MEM_T;
    r.world_size = world;
    r.zero = 2;
    esmt_plan p = ESMT_PLAN_INIT;
    assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
    assert_int_equal(p.parameters, n);
    uint64_t most = 0, most_g = 0; /* the largest shard's: the rank the plan is for */
    for (int rk = 0; rk < world; rk++) {
      char path[600];
      snprintf(path, sizeof path, "%s/p-info%d-z2-r%d", g_dir, world, rk);
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
    r.zero = 0; /* one process's moments whole */
    assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
    assert_int_equal(p.device[ESMT_MEM_MOMENTS], 8 * n);
  }
}

/* ZeRO-3: each rank keeps the weights of its shard and all-gathers each
 * part before it runs. The gradients are reduced as at stage 2 and the
 * gathered weights are the same bits, so one micro-batch per rank gives
 * stage 2's weights bit for bit (fp32 and bf16, 2 and 3 ranks); one rank
 * (the path a single GPU takes) gives stage 0's; 2 ranks x 2 micro-batches
 * stay within the data-parallel bound of one process taking all four. */
static void test_zero3(void **state) {
  (void)state;
  g_per_update = 1;
  for (int bf = 0; bf <= 1; bf++) {
    g_bf16 = bf;
    for (int world = 2; world <= 3; world++) {
      size_t n2, n3;
      float *z2 = train(world, 2, 0, &n2, "z3"), *z3 = train(world, 3, 0, &n3, "z3");
      assert_int_equal(n2, n3);
      assert_memory_equal(z2, z3, n2 * sizeof *z2);
      printf("%d ranks x 1 micro-batch, %s: dist.zero 3 == dist.zero 2 bit for bit\n", world,
             bf ? "bf16 (emulated)" : "fp32");
      check_volume("z3", world, 3, 1, n3);
      if (bf) check_plan_master("z3", world, 3, n3);
      free(z2);
      free(z3);
    }
  }
  g_bf16 = 0;
  size_t n0, n1, n;
  float *z0 = train(1, 0, 0, &n0, "z3one"), *z3 = train(1, 3, 0, &n1, "z3one");
  assert_int_equal(n0, n1);
  assert_memory_equal(z0, z3, n0 * sizeof *z0);
  printf("1 rank: dist.zero 3 (every layer gathered from the one shard) == dist.zero 0 bit for "
         "bit\n");
  free(z0);
  free(z3);
  g_per_update = 4;
  float *one = train(1, 0, 0, &n, "z3acc");
  g_per_update = 2;
  float *z2 = train(2, 2, 0, &n0, "z3acc");
  z3 = train(2, 3, 0, &n1, "z3acc");
  const double d_one = max_abs_diff(z3, one, n), d_z2 = max_abs_diff(z3, z2, n);
  printf("2 ranks x 2 micro-batches: dist.zero 3 vs one process x 4: max abs diff %.3g; vs "
         "dist.zero 2: %.3g\n", d_one, d_z2);
  assert_true(d_one < ACCUMULATION_MAX_ABS_DIFF);
  assert_int_equal(d_z2, 0); /* the same reductions, the same weights read */
  check_volume("z3acc", 2, 3, 2, n1);
  free(one);
  free(z2);
  free(z3);
  /* 4 layers, more than the two slots: each later pass gathers L - 2 */
  g_layers = 4;
  z2 = train(2, 2, 0, &n0, "z3deep");
  z3 = train(2, 3, 0, &n1, "z3deep");
  assert_memory_equal(z2, z3, n0 * sizeof *z2);
  printf("4 layers, 2 ranks x 2 micro-batches: dist.zero 3 == dist.zero 2 bit for bit\n");
  check_volume("z3deep", 2, 3, 2, n1);
  g_layers = 2;
  g_per_update = 1;
  free(z2);
  free(z3);
}

/* ZeRO-3's forwards gather the layers together: an evaluation where the
 * ranks hold 2 and 1 batches of a 4-layer model (rank 1 runs a stand-in
 * forward while rank 0 takes its second) ends, with stage 2's loss. */
static void test_zero3_uneven_eval(void **state) {
  (void)state;
  g_per_update = 1;
  char text[2][128];
  for (int i = 0; i < 2; i++) {
    const int z = i ? 3 : 2;
    char w[2][512], ev[512];
    run_spec s[2];
    memset(s, 0, sizeof s);
    for (int r = 0; r < 2; r++) {
      snprintf(w[r], sizeof w[r], "%s/ev-z%d-r%d", g_dir, z, r);
      run_spec one = {r, 2, z, 2, NULL, 0, 0, 0, 0, w[r], NULL, NULL};
      s[r] = one;
    }
    int st[2];
    g_eval_batches = 2;
    g_layers = 4; /* more layers than the two slots: every forward gathers */
    run_ranks(s, 2, st);
    g_eval_batches = 0;
    g_layers = 2;
    assert_int_equal(st[0] | st[1], 0);
    snprintf(ev, sizeof ev, "%s.eval", w[0]);
    FILE *f = fopen(ev, "r");
    assert_non_null(f);
    text[i][fread(text[i], 1, sizeof text[i] - 1, f)] = '\0';
    fclose(f);
  }
  printf("evaluation over 2 + 1 batches: dist.zero 2 loss %s, dist.zero 3 %s\n", text[0],
         text[1]);
  assert_string_equal(text[0], text[1]);
}

/* ZeRO-3's checkpoints are the other stages' files; a resume gathers the
 * end parts from the file and the layers on demand again. */
static void test_zero3_checkpoint_resume(void **state) {
  (void)state;
  g_per_update = 1;
  char dirs[2][512], ck[2][1024];
  const int levels[2] = {1, 3};
  for (int i = 0; i < 2; i++) {
    snprintf(dirs[i], sizeof dirs[i], "%s/ck3-z%d", g_dir, levels[i]);
    run_spec s[2] = {{0, 2, levels[i], 3, dirs[i], 3, 0, 0, 0, NULL, NULL, NULL},
                     {1, 2, levels[i], 3, dirs[i], 3, 0, 0, 0, NULL, NULL, NULL}};
    int st[2];
    run_ranks(s, 2, st);
    assert_int_equal(st[0] | st[1], 0);
    assert_int_equal(esmt_checkpoint_resolve(dirs[i], ck[i], sizeof ck[i]), ESMT_OK);
  }
  same_checkpoint_files(ck[0], ck[1], "checkpoint, dist.zero 1 and 3:");
  for (int i = 0; i < 2; i++) {
    run_spec s[2] = {{0, 2, levels[i], 5, dirs[i], 5, 1, 0, 0, NULL, NULL, NULL},
                     {1, 2, levels[i], 5, dirs[i], 5, 1, 0, 0, NULL, NULL, NULL}};
    int st[2];
    run_ranks(s, 2, st);
    assert_int_equal(st[0] | st[1], 0);
    assert_int_equal(esmt_checkpoint_resolve(dirs[i], ck[i], sizeof ck[i]), ESMT_OK);
  }
  assert_non_null(strstr(ck[1], "step-00000005"));
  same_checkpoint_files(ck[0], ck[1], "checkpoint after resuming, dist.zero 1 and 3:");
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
      cmocka_unit_test(test_zero3),
      cmocka_unit_test(test_zero3_checkpoint_resume),
      cmocka_unit_test(test_zero3_uneven_eval),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
