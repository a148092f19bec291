/* SPDX-License-Identifier: MIT */
/* The ranks test_zero1 and test_zero3 run: a small model trained on the
 * CPU backend by fork()ed ranks over the real TCP communicator, each rank
 * writing its weights, shard bounds, log line and collective volumes to
 * small files the checks read back (zero_rank_fixture.h). */
#define _GNU_SOURCE
#include "zero_rank_fixture.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "context.h"
#include "dp_group.h"
#include "grad_shard.h"
#include "half_emu_backend.h"
#include "mem_source.h"
#include "rank_runner.h"
#include "trainer.h"

int g_job;
double g_clip;
int g_bf16;
int g_layers = 2;
int g_per_update = 1;
static esmt_backend_entry g_emu;  /* the cpu ops with bf16 emulated (g_bf16) */
static char g_zero_line[512]; /* this process's "ZeRO-N: rank ..." log line */

static void on_log(void *user, esmt_log_level level, const char *message) {
  (void)user;
  (void)level;
  if (strncmp(message, "ZeRO-", 5) == 0 && strstr(message, ": rank "))
    snprintf(g_zero_line, sizeof g_zero_line, "%s", message);
}

esmt_context *make_ctx(void) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 1; /* the same thread count everywhere: same reductions */
  o.log = on_log;
  o.log_level = ESMT_LOG_INFO;
  esmt_context *c = NULL;
  return esmt_context_create(&o, &c) ? NULL : c;
}

esmt_model *make_model(esmt_context *ctx) {
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

int g_eval_batches;

int g_kill_rank, g_kill_op;
uint64_t g_kill_nth;

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
    snprintf(rdv, sizeof rdv, "%s/rdv-%d", test_tmpdir, g_job);
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

static esmt_status run_any(const void *spec) { return run((const run_spec *)spec); }
void run_ranks(const run_spec *specs, int n, int *status) {
  g_job++;
  run_ranks_forked(run_any, specs, sizeof *specs, n, status);
}


/* world ranks with dist.zero `zero`; every rank's weights must agree bit
 * for bit; returns rank 0's weights (malloc'ed). */
float *train(int world, int zero, int scaling, size_t *n, const char *tag) {
  run_spec specs[3];
  memset(specs, 0, sizeof specs); /* GCC under ASan cannot see every rank filled */
  char w[3][512], info[3][512];
  for (int r = 0; r < world; r++) {
    snprintf(w[r], sizeof w[r], "%s/%s-w%d-z%d-r%d", test_tmpdir, tag, world, zero, r);
    snprintf(info[r], sizeof info[r], "%s/%s-info%d-z%d-r%d", test_tmpdir, tag, world, zero, r);
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

double max_abs_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = fabs((double)a[i] - b[i]);
    m = d > m ? d : m;
  }
  return m;
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
void same_checkpoint_files(const char *a, const char *b, const char *what) {
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

esmt_plan plan_of_runs(int world, int zero, int bf16) {
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  mc.num_layers = 2; mc.hidden_size = 32; mc.num_heads = 2; mc.max_positions = 64;
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  r.model = &mc;
  r.micro_batch = 2;
  r.seq_len = MEM_T;
  r.world_size = world;
  r.zero = zero;
  if (bf16) r.precision = ESMT_PRECISION_BF16;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  return p;
}

/* The planner's master bytes for `world` ranks at `zero` in bf16 against
 * the largest shard the ranks of run `tag` held (4 bytes each). */
void check_plan_master(const char *tag, int world, int zero, size_t n) {
  const esmt_plan p = plan_of_runs(world, zero, 1);
  uint64_t most = 0;
  for (int rk = 0; rk < world; rk++) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s-info%d-z%d-r%d", test_tmpdir, tag, world, zero, rk);
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

/* Rank 0's bytes per collective over `steps` updates (run's .vol file)
 * against esmt_zero_comm_volume's per-update figures. */
void check_volume(const char *tag, int world, int zero, int k, size_t n) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s-info%d-z%d-r0.vol", test_tmpdir, tag, world, zero);
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
