/* SPDX-License-Identifier: MIT */
/* Fine-tuning through the trainer: a labelled table's splits as batch
 * sources, a tiny model with a sequence-class head that learns a task it
 * can only learn from the residues (is K+R more than D+E?) to validation
 * accuracy well above chance in seconds, the task metrics in metrics.jsonl,
 * the best checkpoint by a named metric, early stopping and a head warm-up
 * with the encoder held. */
#define _POSIX_C_SOURCE 200809L
#include "esmtrain/esmtrain.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static esmt_context *g_ctx;

static int setup(void **state) {
  if (test_tmpdir_setup(state)) return -1;
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 2;
  o.log_level = ESMT_LOG_WARN;
  return esmt_context_create(&o, &g_ctx) == ESMT_OK ? 0 : -1;
}

static int teardown(void **state) {
  esmt_context_destroy(g_ctx);
  return test_tmpdir_teardown(state);
}

/* 800 proteins of 10-20 residues over A G S K R D E; label "more" when K+R
 * outnumber D+E, else "fewer" (ties redrawn), about half each. */
static const char *write_task(void) {
  static char path[512];
  snprintf(path, sizeof path, "%s/charge.csv", test_tmpdir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("id,sequence,label\n", f);
  uint64_t s = 12345;
  for (int i = 0; i < 800;) {
    char seq[24];
    int n = 10, charge = 0;
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    n += (int)((s >> 33) % 11);
    for (int k = 0; k < n; k++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      seq[k] = "AGSKRDE"[(s >> 33) % 7];
      charge += (seq[k] == 'K' || seq[k] == 'R') - (seq[k] == 'D' || seq[k] == 'E');
    }
    seq[n] = 0;
    if (!charge) continue;
    fprintf(f, "p%d,%s,%s\n", i++, seq, charge > 0 ? "more" : "fewer");
  }
  fclose(f);
  return path;
}

typedef struct setup_t {
  esmt_labelled *data;
  esmt_labelled_loader *train, *valid;
  esmt_batch_source train_src, valid_src;
  esmt_model *model;
} setup_t;

static void make_model(setup_t *s, int frozen_layers, float lora_dropout);

static void make(setup_t *s) { make_model(s, 0, 0.0f); }
static void make_frozen(setup_t *s, int frozen_layers) { make_model(s, frozen_layers, 0.0f); }

/* lora_dropout > 0: rank-4 LoRA on every target, that dropout */
static void make_model(setup_t *s, int frozen_layers, float lora_dropout) {
  esmt_labelled_options lo = ESMT_LABELLED_OPTIONS_INIT;
  lo.path = write_task();
  lo.valid_fraction = 0.25;
  lo.max_len = 32;
  assert_int_equal(esmt_labelled_read(&lo, &s->data), ESMT_OK);
  assert_int_equal(esmt_labelled_num_labels(s->data), 2);
  assert_int_equal(esmt_labelled_loader_create(s->data, ESMT_LABELLED_TRAIN, 16, 1, 0, 3,
                                               &s->train), ESMT_OK);
  assert_int_equal(esmt_labelled_loader_create(s->data, ESMT_LABELLED_VALID, 64, 0, 0, 0,
                                               &s->valid), ESMT_OK);
  s->train_src = (esmt_batch_source)ESMT_BATCH_SOURCE_INIT;
  s->valid_src = (esmt_batch_source)ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_labelled_loader_as_source(s->train, &s->train_src), ESMT_OK);
  assert_int_equal(esmt_labelled_loader_as_source(s->valid, &s->valid_src), ESMT_OK);
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.num_heads = 4;
  c.max_positions = 32;
  c.precision = ESMT_PRECISION_FP32;
  c.head = ESMT_HEAD_SEQ_CLASS;
  c.num_labels = 2;
  c.pooling = ESMT_POOL_MEAN;
  c.frozen_layers = frozen_layers;
  if (lora_dropout > 0.0f) {
    c.lora_rank = 4;
    c.lora_alpha = 8.0f;
    c.lora_targets = ESMT_LORA_QUERY | ESMT_LORA_VALUE | ESMT_LORA_FFN_DOWN;
    c.lora_dropout = lora_dropout;
  }
  assert_int_equal(esmt_model_create(g_ctx, &c, 7, &s->model), ESMT_OK);
}

static void unmake(setup_t *s) {
  esmt_model_destroy(s->model);
  esmt_labelled_loader_destroy(s->train);
  esmt_labelled_loader_destroy(s->valid);
  esmt_labelled_free(s->data);
}

typedef struct seen {
  int evals;
  double first_accuracy, last_accuracy, best_accuracy, last_f1;
} seen;

static void on_metrics(void *user, const esmt_train_metrics *tm, const esmt_eval_metrics *em) {
  seen *s = user;
  (void)tm;
  if (!em) return;
  assert_non_null(em->task);
  if (!s->evals++) s->first_accuracy = em->task->accuracy;
  s->last_accuracy = em->task->accuracy;
  s->last_f1 = em->task->macro_f1;
  if (em->task->accuracy > s->best_accuracy) s->best_accuracy = em->task->accuracy;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[1 << 16];
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static void test_learns_charge(void **state) {
  (void)state;
  setup_t s;
  make(&s);
  char run[600];
  snprintf(run, sizeof run, "%s/run", test_tmpdir);
  esmt_schedule sc = ESMT_SCHEDULE_INIT;
  sc.kind = ESMT_SCHEDULE_CONSTANT;
  sc.peak_lr = 3e-3;
  sc.warmup_steps = 10;
  seen got = {0};
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  o.run_dir = run;
  o.max_steps = 300;
  o.schedule = &sc;
  o.eval_every = 50;
  o.log_every = 0;
  o.metrics = on_metrics;
  o.metrics_user = &got;
  o.best_metric = "accuracy";
  esmt_trainer *t = NULL;
  assert_int_equal(esmt_trainer_create(s.model, &o, &s.train_src, &t), ESMT_OK);
  assert_int_equal(esmt_trainer_set_eval_source(t, &s.valid_src), ESMT_OK);
  esmt_eval_metrics before = ESMT_EVAL_METRICS_INIT;
  assert_int_equal(esmt_trainer_evaluate(t, &before), ESMT_OK);
  assert_non_null(before.task);
  assert_int_equal(before.selected, esmt_labelled_count(s.data, ESMT_LABELLED_VALID));
  const double chance = before.task->accuracy;
  const esmt_status st = esmt_trainer_run(t);
  if (st) fail_msg("%s", esmt_last_error());
  print_message("validation accuracy %.3f before, %.3f best, %.3f last (macro-F1 %.3f)\n",
                chance, got.best_accuracy, got.last_accuracy, got.last_f1);
  /* chance is about 0.5; the task is learnt well above it */
  assert_true(got.best_accuracy >= 0.85);
  assert_true(got.last_f1 >= 0.75);
  char path[700];
  snprintf(path, sizeof path, "%s/metrics.jsonl", run);
  const char *text = slurp(path);
  assert_non_null(text);
  assert_non_null(strstr(text, "\"macro_f1\":"));
  snprintf(path, sizeof path, "%s/checkpoints/best", run);
  assert_non_null(slurp(path) ? path : NULL);
  esmt_trainer_destroy(t);
  unmake(&s);
}

/* With no learning (lr 0) the metric never improves: patience 2 ends the
 * run at the third evaluation, long before max_steps. */
static void test_early_stop(void **state) {
  (void)state;
  setup_t s;
  make(&s);
  esmt_schedule sc = ESMT_SCHEDULE_INIT;
  sc.kind = ESMT_SCHEDULE_CONSTANT;
  sc.peak_lr = 0;
  sc.warmup_steps = 0;
  seen got = {0};
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  o.max_steps = 1000;
  o.schedule = &sc;
  o.eval_every = 5;
  o.log_every = 0;
  o.metrics = on_metrics;
  o.metrics_user = &got;
  o.best_metric = "macro_f1";
  o.patience = 2;
  esmt_trainer *t = NULL;
  assert_int_equal(esmt_trainer_create(s.model, &o, &s.train_src, &t), ESMT_OK);
  assert_int_equal(esmt_trainer_set_eval_source(t, &s.valid_src), ESMT_OK);
  assert_int_equal(esmt_trainer_run(t), ESMT_OK);
  assert_int_equal(got.evals, 3);
  assert_int_equal(esmt_trainer_step_count(t), 15);
  esmt_trainer_destroy(t);
  /* a metric that is none, and one the model has no head for */
  o.best_metric = "f1";
  assert_int_equal(esmt_trainer_create(s.model, &o, &s.train_src, &t), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "best_metric: esmt_task_metric_value: \"f1\" is no "
                                            "metric"));
  unmake(&s);
}

/* --init-from a pre-trained (masked-LM) checkpoint: the task model takes
 * every encoder tensor of it, and its classifier keeps its own start. */
static void test_init_from_pretrained(void **state) {
  (void)state;
  setup_t s;
  make(&s);
  esmt_model_config pc = ESMT_MODEL_CONFIG_INIT;
  esmt_model_get_config(s.model, &pc);
  pc.head = ESMT_HEAD_NONE;
  pc.num_labels = 0;
  esmt_model *pre = NULL;
  assert_int_equal(esmt_model_create(g_ctx, &pc, 3, &pre), ESMT_OK);
  char dir[600];
  snprintf(dir, sizeof dir, "%s/pretrained", test_tmpdir);
  assert_int_equal(esmt_model_save(pre, dir, 0), ESMT_OK);
  float head_before[64], head_after[64];
  assert_int_equal(esmt_model_read_tensor(s.model, "classifier.out_proj.weight", ESMT_BUF_PARAMS,
                                          head_before, 64), ESMT_OK);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  esmt_trainer *t = NULL;
  assert_int_equal(esmt_trainer_create(s.model, &o, &s.train_src, &t), ESMT_OK);
  const esmt_status st = esmt_trainer_init_from(t, dir);
  if (st) fail_msg("%s", esmt_last_error());
  int n = 0;
  assert_int_equal(esmt_model_tensor_count(pre, &n), ESMT_OK);
  for (int i = 0; i < n; i++) {
    esmt_tensor_info info = ESMT_TENSOR_INFO_INIT;
    assert_int_equal(esmt_model_tensor_info(pre, i, &info), ESMT_OK);
    float *a = malloc(info.numel * sizeof *a), *b = malloc(info.numel * sizeof *b);
    assert_int_equal(esmt_model_read_tensor(pre, info.name, ESMT_BUF_PARAMS, a, info.numel), ESMT_OK);
    assert_int_equal(esmt_model_read_tensor(s.model, info.name, ESMT_BUF_PARAMS, b, info.numel),
                     ESMT_OK);
    assert_memory_equal(a, b, info.numel * sizeof *a);
    free(a);
    free(b);
  }
  assert_int_equal(esmt_model_read_tensor(s.model, "classifier.out_proj.weight", ESMT_BUF_PARAMS,
                                          head_after, 64), ESMT_OK);
  assert_memory_equal(head_before, head_after, sizeof head_before);
  esmt_trainer_destroy(t);
  esmt_model_destroy(pre);
  unmake(&s);
}

/* Class weights reach the head's loss as transformers' CrossEntropyLoss(
 * weight=w) has it: sum_i w[y_i] nll_i / sum_i w[y_i] over the batch; the
 * "balanced" weights are scikit-learn's n / (classes * count). */
static void test_class_weights(void **state) {
  (void)state;
  char path[600];
  snprintf(path, sizeof path, "%s/imbalanced.csv", test_tmpdir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("sequence,label,split\nMKVLA,a,train\nKKRAG,a,train\nDEDGS,a,train\nAGSKR,b,train\n"
        "MDDEK,b,train\nWWKRA,c,train\nMKV,a,valid\n", f);
  fclose(f);
  esmt_labelled_options lo = ESMT_LABELLED_OPTIONS_INIT;
  lo.path = path;
  lo.split_column = "split";
  lo.max_len = 32;
  esmt_labelled *d = NULL;
  assert_int_equal(esmt_labelled_read(&lo, &d), ESMT_OK);
  float w[3];
  assert_int_equal(esmt_labelled_balanced_weights(d, w, 3), ESMT_OK);
  assert_true(fabsf(w[0] - 6.0f / 9.0f) < 1e-6f && w[1] == 1.0f && w[2] == 2.0f);
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 1;
  c.hidden_size = 32;
  c.num_heads = 4;
  c.max_positions = 32;
  c.precision = ESMT_PRECISION_FP32;
  c.head = ESMT_HEAD_SEQ_CLASS;
  c.num_labels = 3;
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create(g_ctx, &c, 5, &m), ESMT_OK);
  /* the expected loss from the head's outputs on the whole training split */
  esmt_labelled_loader *probe = NULL, *train = NULL;
  esmt_batch_source ps = ESMT_BATCH_SOURCE_INIT, ts = ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_labelled_loader_create(d, ESMT_LABELLED_TRAIN, 8, 0, 0, 1, &probe), 0);
  assert_int_equal(esmt_labelled_loader_as_source(probe, &ps), ESMT_OK);
  esmt_batch b = ESMT_BATCH_INIT;
  assert_int_equal(ps.next(ps.user, &b), ESMT_OK);
  assert_int_equal(b.batch, 6);
  float y[6 * 3];
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_HEAD;
  q.head = y;
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_OK);
  double num = 0, den = 0, plain = 0;
  for (int r = 0; r < 6; r++) {
    const int k = (int)b.targets[r];
    const float *z = y + r * 3;
    const double mx = fmax(z[0], fmax(z[1], z[2]));
    const double nll = mx + log(exp(z[0] - mx) + exp(z[1] - mx) + exp(z[2] - mx)) - z[k];
    num += w[k] * nll;
    den += w[k];
    plain += nll / 6;
  }
  /* the trainer's first update (lr 0) on the same rows, weights on its loader */
  assert_int_equal(esmt_labelled_loader_create(d, ESMT_LABELLED_TRAIN, 8, 1, 0, 1, &train), 0);
  assert_int_equal(esmt_labelled_loader_set_class_weights(train, w, 3), ESMT_OK);
  assert_int_equal(esmt_labelled_loader_as_source(train, &ts), ESMT_OK);
  esmt_schedule sc = ESMT_SCHEDULE_INIT;
  sc.kind = ESMT_SCHEDULE_CONSTANT;
  sc.peak_lr = 0.0;
  char run[700];
  snprintf(run, sizeof run, "%s/weighted", test_tmpdir);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  o.run_dir = run;
  o.max_steps = 1;
  o.schedule = &sc;
  o.log_every = 0;
  esmt_trainer *t = NULL;
  assert_int_equal(esmt_trainer_create(m, &o, &ts, &t), ESMT_OK);
  esmt_train_metrics tm = ESMT_TRAIN_METRICS_INIT;
  if (esmt_trainer_step(t, &tm)) fail_msg("%s", esmt_last_error());
  print_message("weighted loss %.6f (expected %.6f; unweighted %.6f)\n", tm.loss, num / den,
                plain);
  assert_true(fabs(tm.loss - num / den) < 1e-5);
  assert_true(fabs(plain - num / den) > 1e-3); /* the weights matter here */
  float bad[3] = {1, -1, 1};
  assert_int_not_equal(esmt_labelled_loader_set_class_weights(train, bad, 3), ESMT_OK);
  assert_int_not_equal(esmt_labelled_loader_set_class_weights(train, w, 2), ESMT_OK);
  esmt_trainer_destroy(t);
  esmt_labelled_loader_destroy(train);
  esmt_labelled_loader_destroy(probe);
  esmt_model_destroy(m);
  esmt_labelled_free(d);
}

/* Every parameter of `m` in the head ("classifier.*") or out of it (the
 * encoder and the masked-LM head), concatenated; *n receives the count. */
static float *params_of(esmt_model *m, int head, size_t *n) {
  int count = 0;
  assert_int_equal(esmt_model_tensor_count(m, &count), ESMT_OK);
  float *all = NULL;
  *n = 0;
  for (int i = 0; i < count; i++) {
    esmt_tensor_info info = ESMT_TENSOR_INFO_INIT;
    assert_int_equal(esmt_model_tensor_info(m, i, &info), ESMT_OK);
    if ((strncmp(info.name, "classifier.", 11) == 0) != head) continue;
    all = realloc(all, (*n + info.numel) * sizeof *all);
    assert_non_null(all);
    assert_int_equal(esmt_model_read_tensor(m, info.name, ESMT_BUF_PARAMS, all + *n, info.numel),
                     ESMT_OK);
    *n += info.numel;
  }
  return all;
}

static esmt_trainer *trainer_of(setup_t *s, const char *run, esmt_optimizer_config *oc,
                                esmt_schedule *sc, int head_only_steps) {
  *sc = (esmt_schedule)ESMT_SCHEDULE_INIT;
  sc->kind = ESMT_SCHEDULE_CONSTANT;
  sc->peak_lr = 1e-2;
  sc->warmup_steps = 0;
  *oc = (esmt_optimizer_config)ESMT_OPTIMIZER_CONFIG_INIT;
  oc->head_only_steps = head_only_steps;
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  o.run_dir = run;
  o.max_steps = 6;
  o.schedule = sc;
  o.optimizer = oc;
  o.grad_clip = 1e-3; /* always clipped: the norm decides every update's size */
  o.log_every = 0;
  esmt_trainer *t = NULL;
  assert_int_equal(esmt_trainer_create(s->model, &o, &s->train_src, &t), ESMT_OK);
  return t;
}

static void step_to(esmt_trainer *t, int64_t step) {
  esmt_train_metrics tm = ESMT_TRAIN_METRICS_INIT;
  while (esmt_trainer_step_count(t) < step)
    if (esmt_trainer_step(t, &tm)) fail_msg("%s", esmt_last_error());
}

/* finetune.freeze_encoder_steps (esmt_optimizer_config.head_only_steps 3):
 * updates 1-3 move the head alone, the encoder bit for bit as it was, and
 * the head exactly as with the encoder frozen (--freeze encoder: no
 * encoder gradient, in the norm or anywhere); from update 4 the encoder
 * trains too. A run resumed from its checkpoint at
 * update 2, inside the warm-up, continues the schedule: at update 6 its
 * weights are those of the run that never stopped, bit for bit. */
static void test_head_warmup(void **state) {
  (void)state;
  setup_t s, r;
  make(&s);
  char run[600], ckpt[1024];
  snprintf(run, sizeof run, "%s/warmup", test_tmpdir);
  esmt_optimizer_config oc;
  esmt_schedule sc;
  esmt_trainer *t = trainer_of(&s, run, &oc, &sc, 3);
  size_t ne = 0, nh = 0;
  float *enc0 = params_of(s.model, 0, &ne), *head0 = params_of(s.model, 1, &nh);
  step_to(t, 2);
  assert_int_equal(esmt_trainer_save(t, ckpt, sizeof ckpt), ESMT_OK);
  step_to(t, 3);
  float *enc3 = params_of(s.model, 0, &ne), *head3 = params_of(s.model, 1, &nh);
  assert_memory_equal(enc0, enc3, ne * sizeof *enc0);
  assert_memory_not_equal(head0, head3, nh * sizeof *head0);
  setup_t f;
  make_frozen(&f, ESMT_FREEZE_ENCODER);
  char frozen_run[600];
  snprintf(frozen_run, sizeof frozen_run, "%s/frozen", test_tmpdir);
  esmt_trainer *ft = trainer_of(&f, frozen_run, &oc, &sc, 3);
  step_to(ft, 3);
  float *head3f = params_of(f.model, 1, &nh);
  assert_memory_equal(head3, head3f, nh * sizeof *head3);
  esmt_trainer_destroy(ft);
  free(head3f);
  unmake(&f);
  step_to(t, 6);
  float *enc6 = params_of(s.model, 0, &ne), *head6 = params_of(s.model, 1, &nh);
  assert_memory_not_equal(enc3, enc6, ne * sizeof *enc3);
  esmt_trainer_destroy(t);
  /* the same run resumed at update 2 */
  make(&r);
  esmt_trainer *u = trainer_of(&r, run, &oc, &sc, 3);
  if (esmt_trainer_resume(u, ckpt)) fail_msg("%s", esmt_last_error());
  assert_int_equal(esmt_trainer_step_count(u), 2);
  step_to(u, 6);
  float *enc6r = params_of(r.model, 0, &ne), *head6r = params_of(r.model, 1, &nh);
  assert_memory_equal(enc6, enc6r, ne * sizeof *enc6);
  assert_memory_equal(head6, head6r, nh * sizeof *head6);
  esmt_trainer_destroy(u);
  /* a negative count is refused */
  oc.head_only_steps = -1;
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  o.optimizer = &oc;
  assert_int_equal(esmt_trainer_create(r.model, &o, &r.train_src, &u), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "head_only_steps -1 must be >= 0"));
  free(enc0), free(head0), free(enc3), free(head3), free(enc6), free(head6), free(enc6r),
      free(head6r);
  unmake(&s);
  unmake(&r);
}

/* LoRA dropout draws a new mask every training pass (model_lora.c): a run
 * resumed from its checkpoint at update 2 draws what the run that never
 * stopped drew, so at update 5 the two are bit-identical. */
static void test_lora_dropout_resume(void **state) {
  (void)state;
  setup_t s, r;
  make_model(&s, 0, 0.3f);
  char run[600], ckpt[1024];
  snprintf(run, sizeof run, "%s/lora-dropout", test_tmpdir);
  esmt_optimizer_config oc;
  esmt_schedule sc;
  esmt_trainer *t = trainer_of(&s, run, &oc, &sc, 0);
  step_to(t, 2);
  assert_int_equal(esmt_trainer_save(t, ckpt, sizeof ckpt), ESMT_OK);
  step_to(t, 5);
  size_t n = 0, nh = 0;
  float *all = params_of(s.model, 0, &n), *head = params_of(s.model, 1, &nh);
  esmt_trainer_destroy(t);
  make_model(&r, 0, 0.3f);
  esmt_trainer *u = trainer_of(&r, run, &oc, &sc, 0);
  if (esmt_trainer_resume(u, ckpt)) fail_msg("%s", esmt_last_error());
  step_to(u, 5);
  float *all_r = params_of(r.model, 0, &n), *head_r = params_of(r.model, 1, &nh);
  assert_memory_equal(all, all_r, n * sizeof *all);
  assert_memory_equal(head, head_r, nh * sizeof *head);
  esmt_trainer_destroy(u);
  free(all), free(head), free(all_r), free(head_r);
  unmake(&s);
  unmake(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_learns_charge),
                                     cmocka_unit_test(test_early_stop),
                                     cmocka_unit_test(test_init_from_pretrained),
                                     cmocka_unit_test(test_class_weights),
                                     cmocka_unit_test(test_head_warmup),
                                     cmocka_unit_test(test_lora_dropout_resume)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
