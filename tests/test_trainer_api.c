/* SPDX-License-Identifier: MIT */
/* Trainer API defects found by embedders (issue #17), each a test that
 * failed before the fix:
 *  - evaluation over "the whole source" with the defaults (a loader with
 *    epochs = 0, eval_batches = 0) never ended; it is one pass now, and
 *    reports progress as stage "eval";
 *  - a stop request interrupts an evaluation, and it is consumed by what
 *    it stopped (a second call is not cancelled at once);
 *  - a run whose last step is saved by an evaluation's best, by save_every
 *    and by the end of the run writes that checkpoint once;
 *  - the schedule's total_steps defaults to the run's max_steps (the
 *    documented default; ESMT_SCHEDULE_INIT said 500,000), and a warmup as
 *    long as the run is warned about;
 *  - a stop request while an update's micro-batches are gathered ends the
 *    step at once, the data going back to the update's start: a resume
 *    then ends bit-identical to the run that was never stopped (#16);
 *  - esmt_context_options.progress was never called: it now receives the
 *    stages of objects without a callback of their own (train, eval, save,
 *    gemm);
 *  - one learning rate: the schedule's peak (the optimizer has none), and
 *    the options point to the optimizer, schedule and loss-scale structs
 *    instead of holding them (a grown inner struct moved the outer one's
 *    fields); NULL takes their defaults, a short struct is refused by name,
 *    the caller's structs need not outlive esmt_trainer_create;
 *  - a model could not be saved on its own: esmt_model_save/_load keep the
 *    weights, the optimizer state and the step, so that an own loop
 *    stopped and reloaded ends bit-identical to one that never stopped. */
#define _GNU_SOURCE
#include "test_util.h"
#include "cpu_dir_fixture.h"

#include <math.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"

static char g_data[600];

/* 60 short proteins, a fifth of them in the valid split. */
static int setup(void **state) {
  if (cpu_dir_setup(state)) return -1;
  return ingest_random_proteins("r", 60, 30, 17, 7, 0.2, g_data, sizeof g_data);
}

static esmt_model *tiny_model_with(esmt_context *ctx, esmt_optimizer_kind kind) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.optimizer = kind;
  c.num_layers = 1;
  c.hidden_size = 16;
  c.num_heads = 2;
  c.max_positions = 64;
  c.precision = ESMT_PRECISION_FP32;
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create(ctx, &c, 3, &m), ESMT_OK);
  return m;
}

static esmt_model *tiny_model(esmt_context *ctx) { return tiny_model_with(ctx, ESMT_OPTIMIZER_ADAMW); }

/* A loader with the documented defaults but for the split and sizes. */
static esmt_loader *loader(esmt_split split) {
  esmt_loader_options o = ESMT_LOADER_OPTIONS_INIT;
  o.dir = g_data;
  o.split = split;
  o.max_len = 64;
  o.batch_rows = 2;
  o.tokens_per_batch = 128;
  esmt_loader *l = NULL;
  assert_int_equal(esmt_loader_create(&o, &l), ESMT_OK);
  return l;
}

typedef struct seen {
  int eval_calls, train_calls, stop_at_eval;
  uint64_t last_eval_done;
  esmt_trainer *t;
} seen;

static int on_progress(void *user, const esmt_progress *p) {
  seen *s = user;
  if (strcmp(p->stage, "eval") == 0) {
    s->eval_calls++;
    s->last_eval_done = p->done;
    if (s->stop_at_eval && (int)p->done == s->stop_at_eval) esmt_trainer_request_stop(s->t);
  } else if (strcmp(p->stage, "train") == 0) {
    s->train_calls++;
  }
  return 0;
}

static int g_context_progress_only; /* rig_make leaves the trainer's progress NULL */

typedef struct rig {
  esmt_model *m;
  esmt_loader *train, *valid;
  esmt_trainer *t;
  seen s;
} rig;

static void rig_make(rig *r, esmt_trainer_options *o) {
  memset(r, 0, sizeof *r);
  r->m = tiny_model(g_ctx);
  r->train = loader(ESMT_SPLIT_TRAIN);
  r->valid = loader(ESMT_SPLIT_VALID);
  esmt_batch_source tr = ESMT_BATCH_SOURCE_INIT, va = ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_loader_as_source(r->train, &tr), ESMT_OK);
  assert_int_equal(esmt_loader_as_source(r->valid, &va), ESMT_OK);
  if (!g_context_progress_only) {
    o->progress = on_progress;
    o->progress_user = &r->s;
  }
  assert_int_equal(esmt_trainer_create(r->m, o, &tr, &r->t), ESMT_OK);
  assert_int_equal(esmt_trainer_set_eval_source(r->t, &va), ESMT_OK);
  r->s.t = r->t;
}

static void rig_free(rig *r) {
  esmt_trainer_destroy(r->t);
  esmt_loader_destroy(r->train);
  esmt_loader_destroy(r->valid);
  esmt_model_destroy(r->m);
}

/* Batches of one pass over the valid split, counted by hand (epochs = 1). */
static int valid_batches_per_epoch(void) {
  esmt_loader_options o = ESMT_LOADER_OPTIONS_INIT;
  o.dir = g_data;
  o.split = ESMT_SPLIT_VALID;
  o.max_len = 64;
  o.batch_rows = 2;
  o.tokens_per_batch = 128;
  o.epochs = 1;
  esmt_loader *l = NULL;
  assert_int_equal(esmt_loader_create(&o, &l), ESMT_OK);
  int n = 0;
  esmt_batch b = ESMT_BATCH_INIT;
  while (esmt_loader_next(l, &b) == ESMT_OK) n++;
  esmt_loader_destroy(l);
  return n;
}

static void evaluation_of_an_endless_source_is_one_pass(void **state) {
  (void)state;
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT; /* eval_batches = 0: the whole source */
  rig r;
  rig_make(&r, &o);
  const int per_epoch = valid_batches_per_epoch();
  assert_true(per_epoch > 0);
  esmt_eval_metrics em = ESMT_EVAL_METRICS_INIT;
  assert_int_equal(esmt_trainer_evaluate(r.t, &em), ESMT_OK);
  assert_true(em.selected > 0);
  assert_int_equal(r.s.last_eval_done, per_epoch); /* progress before the extra batch */
  assert_true(r.s.eval_calls >= per_epoch);
  /* the same pass again: the same figures */
  esmt_eval_metrics again = ESMT_EVAL_METRICS_INIT;
  assert_int_equal(esmt_trainer_evaluate(r.t, &again), ESMT_OK);
  assert_int_equal(again.selected, em.selected);
  assert_true(again.loss == em.loss);
  rig_free(&r);
}

static void stop_request_interrupts_evaluation_once(void **state) {
  (void)state;
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  rig r;
  rig_make(&r, &o);
  r.s.stop_at_eval = 1;
  esmt_eval_metrics em = ESMT_EVAL_METRICS_INIT;
  assert_int_equal(esmt_trainer_evaluate(r.t, &em), ESMT_ERR_CANCELLED);
  assert_non_null(strstr(esmt_last_error(), "stopped on request"));
  r.s.stop_at_eval = 0;
  /* consumed: the next evaluation and the next step run */
  assert_int_equal(esmt_trainer_evaluate(r.t, &em), ESMT_OK);
  esmt_train_metrics tm = ESMT_TRAIN_METRICS_INIT;
  assert_int_equal(esmt_trainer_step(r.t, &tm), ESMT_OK);
  /* a request before a run stops that run at once, and only that run */
  esmt_trainer_request_stop(r.t);
  assert_int_equal(esmt_trainer_run(r.t), ESMT_ERR_CANCELLED);
  esmt_trainer_destroy(r.t);
  r.t = NULL;
  rig_free(&r);
  (void)tm;
}

typedef struct log_count {
  int saves;
} log_count;

static void count_saves(void *user, esmt_log_level level, const char *msg) {
  (void)level;
  if (strstr(msg, "checkpoint saved")) ((log_count *)user)->saves++;
}

/* A cpu context with the given sinks made the group's g_ctx (the rigs
 * build on it) until use_context(NULL) puts the group's own back. */
static esmt_context *g_group_ctx;

static void use_context(esmt_log_fn log, void *log_user, esmt_progress_fn progress,
                        void *progress_user, int on) {
  if (!on) {
    esmt_context_destroy(g_ctx);
    g_ctx = g_group_ctx;
    return;
  }
  esmt_context_options co = ESMT_CONTEXT_OPTIONS_INIT;
  co.backend_path = test_backend_dir();
  co.backend = "cpu";
  co.log = log;
  co.log_user = log_user;
  co.progress = progress;
  co.progress_user = progress_user;
  esmt_context *ctx = NULL;
  assert_int_equal(esmt_context_create(&co, &ctx), ESMT_OK);
  g_group_ctx = g_ctx;
  g_ctx = ctx;
}

static void last_step_is_saved_once(void **state) {
  (void)state;
  log_count lc = {0};
  use_context(count_saves, &lc, NULL, NULL, 1);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  esmt_schedule o_sched = ESMT_SCHEDULE_INIT;
  o.schedule = &o_sched;
  o.run_dir = path_in("run-once");
  o.max_steps = 4;
  o.eval_every = 2;  /* steps 2 and 4, each the best so far or not */
  o.save_every = 2;  /* steps 2 and 4 */
  o.eval_batches = 2;
  o.keep_last = 0;
  o.log_every = 1;
  o_sched.warmup_steps = 1;
  rig r;
  rig_make(&r, &o);
  assert_int_equal(esmt_trainer_run(r.t), ESMT_OK);
  rig_free(&r);
  use_context(NULL, NULL, NULL, NULL, 0);
  assert_int_equal(lc.saves, 2); /* step 2 and step 4, each once */
  /* a program on the public API gets the metrics files in its run dir
   * (issue #20): metrics.jsonl with the two evaluations, one event file */
  char path[600];
  snprintf(path, sizeof path, "%s/metrics.jsonl", path_in("run-once"));
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[1024];
  int evals = 0, trains = 0;
  while (fgets(line, sizeof line, f)) {
    evals += strstr(line, "\"kind\":\"eval\"") != NULL;
    char want[64]; /* every step from the first (the files open before it) */
    snprintf(want, sizeof want, "\"kind\":\"train\",\"step\":%d,", trains + 1);
    trains += strstr(line, want) != NULL;
  }
  fclose(f);
  assert_int_equal(evals, 2);
  assert_int_equal(trains, 4);
  DIR *d = opendir(path_in("run-once"));
  assert_non_null(d);
  int events = 0;
  for (struct dirent *e; (e = readdir(d));)
    events += strncmp(e->d_name, "events.out.tfevents.", 20) == 0;
  closedir(d);
  assert_int_equal(events, 1);
}

typedef struct lr_seen {
  double last_lr;
  int warnings;
} lr_seen;

static void keep_lr(void *user, const esmt_train_metrics *m, const esmt_eval_metrics *e) {
  (void)e;
  if (m) ((lr_seen *)user)->last_lr = m->lr;
}

static void count_warnings(void *user, esmt_log_level level, const char *msg) {
  if (level == ESMT_LOG_WARN && strstr(msg, "never reaches its peak")) ((lr_seen *)user)->warnings++;
}

static double final_lr(int64_t warmup, lr_seen *out) {
  use_context(count_warnings, out, NULL, NULL, 1);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  esmt_schedule o_sched = ESMT_SCHEDULE_INIT;
  o.schedule = &o_sched;
  o.max_steps = 10;
  o.log_every = 1;
  o.metrics = keep_lr;
  o.metrics_user = out;
  o_sched.warmup_steps = warmup;
  rig r;
  rig_make(&r, &o);
  assert_int_equal(esmt_trainer_run(r.t), ESMT_OK);
  rig_free(&r);
  use_context(NULL, NULL, NULL, NULL, 0);
  return out->last_lr;
}

static void schedule_spans_the_run_by_default(void **state) {
  (void)state;
  lr_seen a = {0, 0};
  /* ESM-2 decay ends at 0.9 of total_steps: step 10 of 10 is at the floor */
  assert_true(fabs(final_lr(1, &a) - 4e-4 * 0.1) < 1e-12);
  assert_int_equal(a.warnings, 0);
  lr_seen b = {0, 0};
  final_lr(2000, &b); /* the default warmup against a 10-update run */
  assert_int_equal(b.warnings, 1);
  assert_true(b.last_lr < 4e-4 * 0.01);
}

/* The options point to their structs: NULL is the defaults (peak 4e-4
 * ends at 4e-5 over 10 updates), the schedule's peak is the rate, what was
 * pointed to is copied at create, and a struct that is too short is
 * refused naming its type. */
typedef struct mfu_seen {
  int updates, with_mfu, gemm_products;
  double first_mfu;
} mfu_seen;

static void keep_mfu(void *user, const esmt_train_metrics *m, const esmt_eval_metrics *e) {
  (void)e;
  mfu_seen *s = user;
  if (!m) return;
  if (s->updates++ == 0) s->first_mfu = m->mfu;
  if (m->mfu > 0) s->with_mfu++;
}

static int count_gemm(void *user, const esmt_progress *p) {
  if (!strcmp(p->stage, "gemm")) ((mfu_seen *)user)->gemm_products++;
  return 0;
}

/* ESMT_GEMM_CEILING_AUTO: the trainer times its own FFN GEMM once, after
 * the first update (one warm-up and five timed products), and every
 * update's metrics carry an MFU from then on; other negative values are
 * refused. */
static void gemm_ceiling_auto_reports_mfu(void **state) {
  (void)state;
  mfu_seen mfu = {0};
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  o.max_steps = 3;
  o.log_every = 1;
  o.metrics = keep_mfu;
  o.metrics_user = &mfu;
  o.gemm_ceiling_gflops = ESMT_GEMM_CEILING_AUTO;
  use_context(NULL, NULL, count_gemm, &mfu, 1); /* the products report to the context */
  rig r;
  rig_make(&r, &o);
  assert_int_equal(esmt_trainer_run(r.t), ESMT_OK);
  rig_free(&r);
  use_context(NULL, NULL, NULL, NULL, 0);
  assert_int_equal(mfu.updates, 3);
  assert_int_equal(mfu.with_mfu, 3);
  assert_true(mfu.first_mfu > 0 && mfu.first_mfu < 1.5);
  assert_int_equal(mfu.gemm_products, 6);

  esmt_model *m = tiny_model(g_ctx);
  esmt_loader *l = loader(ESMT_SPLIT_TRAIN);
  esmt_batch_source tr = ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_loader_as_source(l, &tr), ESMT_OK);
  esmt_trainer *t = NULL;
  o.gemm_ceiling_gflops = -2;
  assert_int_equal(esmt_trainer_create(m, &o, &tr, &t), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "gemm_ceiling_gflops"));
  assert_null(t);
  double g = 0;
  assert_int_equal(esmt_model_gemm_ceiling(NULL, 512, 1, &g), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_model_gemm_ceiling(m, 0, 0, &g), ESMT_ERR_INVALID_ARGUMENT); /* repeats */
  assert_int_equal(esmt_model_gemm_ceiling(m, 1, 1, &g), ESMT_OK); /* rows raised to 256 */
  assert_true(g > 0);
  esmt_loader_destroy(l);
  esmt_model_destroy(m);
}

static void options_point_to_their_structs(void **state) {
  (void)state;
  lr_seen a = {0, 0};
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  assert_null(o.optimizer);
  assert_null(o.schedule);
  assert_null(o.loss_scale);
  o.max_steps = 10;
  o.log_every = 1;
  o.metrics = keep_lr;
  o.metrics_user = &a;
  esmt_schedule *sc = malloc(sizeof *sc);
  *sc = (esmt_schedule)ESMT_SCHEDULE_INIT;
  sc->kind = ESMT_SCHEDULE_CONSTANT;
  sc->peak_lr = 2.5e-3;
  sc->warmup_steps = 1;
  o.schedule = sc;
  rig r;
  rig_make(&r, &o);
  free(sc); /* copied at create */
  o.schedule = NULL;
  assert_int_equal(esmt_trainer_run(r.t), ESMT_OK);
  assert_true(a.last_lr == 2.5e-3);
  rig_free(&r);

  esmt_model *m = tiny_model(g_ctx);
  esmt_loader *l = loader(ESMT_SPLIT_TRAIN);
  esmt_batch_source tr = ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_loader_as_source(l, &tr), ESMT_OK);
  esmt_trainer *t = NULL;
  esmt_schedule old = ESMT_SCHEDULE_INIT;
  old.struct_size = 8;
  o.schedule = &old;
  assert_int_equal(esmt_trainer_create(m, &o, &tr, &t), ESMT_ERR_ABI);
  assert_non_null(strstr(esmt_last_error(), "esmt_schedule.struct_size"));
  o.schedule = NULL;
  esmt_optimizer_config oc = ESMT_OPTIMIZER_CONFIG_INIT;
  oc.kind = (esmt_optimizer_kind)7;
  o.optimizer = &oc;
  assert_int_equal(esmt_trainer_create(m, &o, &tr, &t), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "optimizer kind 7"));
  assert_int_equal(esmt_optimizer_config_init(ESMT_OPTIMIZER_ADAMW, &oc), ESMT_OK);
  assert_true(oc.beta2 == 0.98 && oc.struct_size == sizeof oc);
  oc.beta1 = 1.0;
  assert_int_equal(esmt_model_optimizer_step(m, &oc, 1e-3, 1.0, 1), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "beta1"));
  oc.beta1 = 0.9;
  assert_int_equal(esmt_model_optimizer_step(m, &oc, NAN, 1.0, 1), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(esmt_model_optimizer_step(m, &oc, 1e-3, 1.0, 1), ESMT_OK);
  esmt_loss_scale_config ls = ESMT_LOSS_SCALE_CONFIG_INIT;
  ls.struct_size = 4;
  o.optimizer = NULL;
  o.loss_scale = &ls;
  assert_int_equal(esmt_trainer_create(m, &o, &tr, &t), ESMT_ERR_ABI);
  assert_non_null(strstr(esmt_last_error(), "esmt_loss_scale_config"));
  esmt_loader_destroy(l);
  esmt_model_destroy(m);
}

/* One update of an own loop: batch `k` (deterministic), lr 1e-3. */
static void own_step(esmt_model *m, int k) {
  enum { B = 2, T = 24 };
  int32_t tok[B * T], lab[B * T];
  unsigned x = 1234u + 77u * (unsigned)k;
  for (int i = 0; i < B * T; i++) {
    x = x * 1103515245u + 12345u;
    int t = i % T;
    tok[i] = t == 0 ? ESMT_TOKEN_CLS : t == T - 1 ? ESMT_TOKEN_EOS : 4 + (int)((x >> 16) % 20);
    lab[i] = ESMT_LABEL_IGNORE;
    if (t > 0 && t < T - 1 && (x >> 8) % 5 == 0) {
      lab[i] = tok[i];
      tok[i] = ESMT_TOKEN_MASK;
    }
  }
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tok;
  b.labels = lab;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  assert_int_equal(esmt_model_get_config(m, &mc), ESMT_OK);
  esmt_optimizer_config oc;
  assert_int_equal(esmt_optimizer_config_init(mc.optimizer, &oc), ESMT_OK);
  assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
  assert_int_equal(esmt_model_forward(m, &b, &r, NULL), ESMT_OK);
  assert_int_equal(esmt_model_backward(m), ESMT_OK);
  assert_int_equal(esmt_model_optimizer_step(m, &oc, 1e-3, 1.0, k), ESMT_OK);
}

static float *all_weights(esmt_model *m, uint64_t *n) {
  assert_int_equal(esmt_model_param_count(m, n), ESMT_OK);
  int count = 0;
  assert_int_equal(esmt_model_tensor_count(m, &count), ESMT_OK);
  float *w = malloc(*n * sizeof *w);
  uint64_t off = 0;
  for (int i = 0; i < count; i++) {
    esmt_tensor_info ti = ESMT_TENSOR_INFO_INIT;
    assert_int_equal(esmt_model_tensor_info(m, i, &ti), ESMT_OK);
    assert_int_equal(esmt_model_read_tensor(m, ti.name, ESMT_BUF_PARAMS, w + off, ti.numel),
                     ESMT_OK);
    off += ti.numel;
  }
  assert_true(off == *n);
  return w;
}

static void save_and_load_continue_exactly(esmt_optimizer_kind kind, const char *name) {
  esmt_model *a = tiny_model_with(g_ctx, kind), *b = tiny_model_with(g_ctx, kind);
  for (int k = 1; k <= 4; k++) own_step(a, k);
  for (int k = 1; k <= 2; k++) own_step(b, k);
  char dir[700];
  snprintf(dir, sizeof dir, "%s/%s", g_data, name);
  assert_int_equal(esmt_model_save(b, dir, 2), ESMT_OK);
  esmt_model_destroy(b);
  /* never over anything: a second save into it is refused, files kept */
  assert_int_equal(esmt_model_save(a, dir, 4), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), name));
  esmt_model *c = tiny_model_with(g_ctx, kind);
  int64_t step = -1;
  assert_int_equal(esmt_model_load(c, dir, 1, &step), ESMT_OK);
  assert_int_equal(step, 2);
  for (int k = 3; k <= 4; k++) own_step(c, k);
  uint64_t na = 0, nc = 0;
  float *wa = all_weights(a, &na), *wc = all_weights(c, &nc);
  assert_true(na == nc);
  assert_memory_equal(wa, wc, na * sizeof *wa); /* bit-identical */
  /* the same files a checkpoint has: a model can be made from them */
  esmt_model *d = NULL;
  assert_int_equal(esmt_model_create_from_checkpoint(g_ctx, dir, &d), ESMT_OK);
  /* another shape is refused and leaves the model as it was */
  esmt_model_config w = ESMT_MODEL_CONFIG_INIT;
  w.num_layers = 2;
  w.hidden_size = 16;
  w.num_heads = 2;
  w.max_positions = 64;
  esmt_model *e = NULL;
  assert_int_equal(esmt_model_create(g_ctx, &w, 5, &e), ESMT_OK);
  uint64_t ne = 0;
  float *before = all_weights(e, &ne);
  assert_int_not_equal(esmt_model_load(e, dir, 1, NULL), ESMT_OK);
  float *after = all_weights(e, &ne);
  assert_memory_equal(before, after, ne * sizeof *before);
  free(before);
  free(after);
  free(wa);
  free(wc);
  esmt_model_destroy(a);
  esmt_model_destroy(c);
  esmt_model_destroy(d);
  esmt_model_destroy(e);
}

static void model_save_and_load_continue_exactly(void **state) {
  (void)state;
  save_and_load_continue_exactly(ESMT_OPTIMIZER_ADAMW, "own-save");
}

/* Lion through a save and a load: its one moment is all the state there
 * is, and it is enough for an exact continuation. A Lion save is refused by
 * an AdamW model when it asks for the optimizer state, and loads as weights. */
static void lion_save_and_load_continue_exactly(void **state) {
  (void)state;
  save_and_load_continue_exactly(ESMT_OPTIMIZER_LION, "own-save-lion");
  char dir[700];
  snprintf(dir, sizeof dir, "%s/own-save-lion", g_data);
  esmt_model *w = tiny_model(g_ctx);
  assert_int_equal(esmt_model_load(w, dir, 1, NULL), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "holds lion state"));
  assert_int_equal(esmt_model_load(w, dir, 0, NULL), ESMT_OK);
  esmt_model_destroy(w);
}

typedef struct stages {
  int train, eval, save_begin, save_end, gemm;
} stages;

static int note_stage(void *user, const esmt_progress *p) {
  stages *s = user;
  assert_int_equal(p->struct_size, sizeof *p);
  if (!strcmp(p->stage, "train")) s->train++;
  if (!strcmp(p->stage, "eval")) s->eval++;
  if (!strcmp(p->stage, "save")) *(p->done ? &s->save_end : &s->save_begin) += 1;
  if (!strcmp(p->stage, "gemm")) s->gemm++;
  return 0;
}

static void context_progress_receives_every_stage(void **state) {
  (void)state;
  stages got = {0};
  use_context(NULL, NULL, note_stage, &got, 1);
  g_context_progress_only = 1;
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  esmt_schedule o_sched = ESMT_SCHEDULE_INIT;
  o.schedule = &o_sched;
  o.run_dir = path_in("run-progress");
  o.max_steps = 2;
  o.eval_every = 2;
  o.eval_batches = 1;
  o_sched.warmup_steps = 1;
  rig r;
  rig_make(&r, &o);
  assert_int_equal(esmt_trainer_run(r.t), ESMT_OK);
  rig_free(&r);
  g_context_progress_only = 0;
  double gflops = 0;
  assert_int_equal(esmt_context_gemm_ceiling(g_ctx, 32, 32, 32, 2, &gflops), ESMT_OK);
  use_context(NULL, NULL, NULL, NULL, 0);
  assert_int_equal(got.train, 2);
  assert_true(got.eval >= 1);
  assert_int_equal(got.save_begin, 1); /* the best at step 2 is the final checkpoint */
  assert_int_equal(got.save_end, 1);
  assert_int_equal(got.gemm, 3);       /* a warm-up product and two timed ones */
}

/* A loader source that asks the trainer to stop when it hands out the
 * `stop_after`-th micro-batch of update 2. */
typedef struct stopping_source {
  esmt_batch_source inner;
  esmt_trainer *t;
  int served, stop_after;
} stopping_source;

static esmt_status stopping_next(void *u, esmt_batch *b) {
  stopping_source *s = u;
  if (s->stop_after > 0 && esmt_trainer_step_count(s->t) == 1 && ++s->served == s->stop_after)
    esmt_trainer_request_stop(s->t);
  return s->inner.next(s->inner.user, b);
}
static esmt_status stopping_save(void *u, char *buf, size_t cap) {
  stopping_source *s = u;
  return s->inner.save_cursor(s->inner.user, buf, cap);
}
static esmt_status stopping_restore(void *u, const char *json) {
  stopping_source *s = u;
  return s->inner.restore_cursor(s->inner.user, json);
}

/* Weights after `updates` updates of 4 micro-batches, in run_dir; with
 * stop_after > 0 the run is stopped inside an update and resumed. */
static float *train_updates(const char *run_dir, int updates, int stop_after) {
  float *w = NULL;
  for (int leg = 0; leg < (stop_after > 0 ? 2 : 1); leg++) {
    esmt_model *m = tiny_model(g_ctx);
    esmt_loader *l = loader(ESMT_SPLIT_TRAIN);
    stopping_source ss = {ESMT_BATCH_SOURCE_INIT, NULL, 0, leg == 0 ? stop_after : 0};
    assert_int_equal(esmt_loader_as_source(l, &ss.inner), ESMT_OK);
    esmt_batch_source src = ESMT_BATCH_SOURCE_INIT;
    src.user = &ss;
    src.next = stopping_next;
    src.save_cursor = stopping_save;
    src.restore_cursor = stopping_restore;
    esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
    esmt_schedule o_sched = ESMT_SCHEDULE_INIT;
    o.schedule = &o_sched;
    o.run_dir = run_dir;
    o.max_steps = updates;
    o.tokens_per_update = 4 * 96; /* 2 rows of <= 64 per micro-batch: ~4 per update */
    o_sched.warmup_steps = 1;
    esmt_trainer *t = NULL;
    assert_int_equal(esmt_trainer_create(m, &o, &src, &t), ESMT_OK);
    ss.t = t;
    if (leg == 1) assert_int_equal(esmt_trainer_resume(t, run_dir), ESMT_OK);
    esmt_status st = esmt_trainer_run(t);
    if (leg == 0 && stop_after > 0) {
      assert_int_equal(st, ESMT_ERR_CANCELLED);
      assert_int_equal(esmt_trainer_step_count(t), 1); /* the update in progress was set aside */
    } else {
      assert_int_equal(st, ESMT_OK);
      assert_int_equal(esmt_trainer_step_count(t), updates);
      uint64_t n = 0;
      assert_int_equal(esmt_model_param_count(m, &n), ESMT_OK);
      int count = 0;
      assert_int_equal(esmt_model_tensor_count(m, &count), ESMT_OK);
      w = calloc(n, sizeof *w);
      uint64_t off = 0;
      for (int i = 0; i < count; i++) {
        esmt_tensor_info ti = ESMT_TENSOR_INFO_INIT;
        assert_int_equal(esmt_model_tensor_info(m, i, &ti), ESMT_OK);
        assert_int_equal(esmt_model_read_tensor(m, ti.name, ESMT_BUF_PARAMS, w + off, ti.numel),
                         ESMT_OK);
        off += ti.numel;
      }
    }
    esmt_trainer_destroy(t);
    esmt_loader_destroy(l);
    esmt_model_destroy(m);
  }
  return w;
}

static void stop_inside_an_update_resumes_exactly(void **state) {
  (void)state;
  float *straight = train_updates(path_in("run-straight"), 3, 0);
  /* stopped while update 2 gathers its third micro-batch */
  float *stopped = train_updates(path_in("run-stopped"), 3, 3);
  uint64_t n = 0;
  esmt_model *m = tiny_model(g_ctx);
  assert_int_equal(esmt_model_param_count(m, &n), ESMT_OK);
  esmt_model_destroy(m);
  assert_memory_equal(straight, stopped, n * sizeof *straight);
  free(straight);
  free(stopped);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(evaluation_of_an_endless_source_is_one_pass),
      cmocka_unit_test(stop_request_interrupts_evaluation_once),
      cmocka_unit_test(last_step_is_saved_once),
      cmocka_unit_test(schedule_spans_the_run_by_default),
      cmocka_unit_test(options_point_to_their_structs),
      cmocka_unit_test(gemm_ceiling_auto_reports_mfu),
      cmocka_unit_test(model_save_and_load_continue_exactly),
      cmocka_unit_test(lion_save_and_load_continue_exactly),
      cmocka_unit_test(context_progress_receives_every_stage),
      cmocka_unit_test(stop_inside_an_update_resumes_exactly),
  };
  return cmocka_run_group_tests(tests, setup, cpu_dir_teardown);
}
