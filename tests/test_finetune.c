/* SPDX-License-Identifier: MIT */
/* Fine-tuning (docs/finetune.md), mostly through the public API, what the float64
 * comparison (interop/test_finetune_reference.py) does not cover: the
 * head's own learning rate, LoRA's initial state, the moments a frozen
 * prefix does not hold, and bad configs and batches refused with a
 * message naming the field, row or position. */
#include "test_util.h"
#include "head_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "esmtrain/esmtrain.h"
#include "comm.h"
#include "dp_group.h"
#include "model.h"
#include "optimizer.h"
#include "safetensors.h"

enum { B = 2, T = 8, C = 3 };

static esmt_model_config small(esmt_head_kind head) { return head_fixture_config(head, C); }

static esmt_model *make(esmt_context *ctx, const esmt_model_config *c) {
  esmt_model *m = NULL;
  if (esmt_model_create(ctx, c, 7, &m) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return m;
}

/* Two rows: <cls> residues <eos>, the second shorter (padded). */
static const int32_t tokens[B * T] = {0, 5, 6, 7, 8, 9, 10, 2, 0, 11, 12, 13, 2, 1, 1, 1};
static const float targets[B] = {2, 0};

static esmt_batch batch(void) {
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tokens;
  b.targets = targets;
  return b;
}

static void step(esmt_model *m, double lr, double head_scale) {
  esmt_batch b = batch();
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  assert_int_equal(esmt_model_zero_grad(m), ESMT_OK);
  if (esmt_model_forward(m, &b, &r, NULL) || esmt_model_backward(m))
    fail_msg("%s", esmt_last_error());
  esmt_optimizer_config oc;
  assert_int_equal(esmt_optimizer_config_init(ESMT_OPTIMIZER_ADAMW, &oc), ESMT_OK);
  oc.head_lr_scale = head_scale;
  if (esmt_model_optimizer_step(m, &oc, lr, 1.0, 1)) fail_msg("%s", esmt_last_error());
}

static int same_tensor(esmt_model *a, esmt_model *b, const char *name) {
  int i;
  esmt_tensor_info t = ESMT_TENSOR_INFO_INIT;
  if (esmt_model_find_tensor(a, name, &i) || esmt_model_tensor_info(a, i, &t))
    fail_msg("%s", esmt_last_error());
  float *x = malloc(t.numel * sizeof *x), *y = malloc(t.numel * sizeof *y);
  assert_int_equal(esmt_model_read_tensor(a, name, ESMT_BUF_PARAMS, x, t.numel), ESMT_OK);
  assert_int_equal(esmt_model_read_tensor(b, name, ESMT_BUF_PARAMS, y, t.numel), ESMT_OK);
  int same = memcmp(x, y, t.numel * sizeof *x) == 0;
  free(x);
  free(y);
  return same;
}

/* head_lr_scale k: the encoder moves as at lr, the head as at k * lr. */
static void test_head_learning_rate(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = small(ESMT_HEAD_SEQ_CLASS);
  esmt_model *split = make(ctx, &c), *slow = make(ctx, &c), *fast = make(ctx, &c);
  step(split, 1e-3, 10.0);
  step(slow, 1e-3, 1.0);
  step(fast, 1e-2, 1.0);
  const char *enc[] = {"esm.embeddings.word_embeddings.weight",
                       "esm.encoder.layer.1.attention.self.query.weight",
                       "esm.encoder.emb_layer_norm_after.weight"};
  const char *head[] = {"classifier.dense.weight", "classifier.out_proj.weight",
                        "classifier.out_proj.bias"};
  for (int i = 0; i < 3; i++) {
    assert_true(same_tensor(split, slow, enc[i]));
    assert_false(same_tensor(split, fast, enc[i]));
    assert_true(same_tensor(split, fast, head[i]));
    assert_false(same_tensor(split, slow, head[i]));
  }
  esmt_model_destroy(split);
  esmt_model_destroy(slow);
  esmt_model_destroy(fast);
  esmt_context_destroy(ctx);
}

/* LoRA starts as peft: B zero, A in +-1/sqrt(in) (not all zero), so the
 * adapted model computes exactly what the same model without adapters does. */
static void test_lora_initial_state(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = small(ESMT_HEAD_SEQ_CLASS), cl = c;
  cl.lora_rank = 4;
  cl.lora_alpha = 8.0f;
  cl.lora_targets = ESMT_LORA_QUERY | ESMT_LORA_VALUE | ESMT_LORA_FFN_DOWN;
  esmt_model *base = make(ctx, &c), *lora = make(ctx, &cl);
  uint64_t n_base, n_lora, counted;
  assert_int_equal(esmt_model_param_count(base, &n_base), ESMT_OK);
  assert_int_equal(esmt_model_param_count(lora, &n_lora), ESMT_OK);
  assert_int_equal(esmt_model_config_param_count(&cl, &counted), ESMT_OK);
  assert_int_equal(counted, n_lora);
  /* per layer: query and value 4 x (32 + 32) each, FFN down 4 x (128 + 32) */
  assert_int_equal(n_lora - n_base, 2 * (2 * 4 * 64 + 4 * 160));
  float a[4 * 128], bw[32 * 4];
  assert_int_equal(esmt_model_read_tensor(lora, "base_model.model.esm.encoder.layer.1.output.dense"
                                          ".lora_A.weight", ESMT_BUF_PARAMS, a, 4 * 128), ESMT_OK);
  assert_int_equal(esmt_model_read_tensor(lora, "base_model.model.esm.encoder.layer.0.attention."
                                          "self.value.lora_B.weight", ESMT_BUF_PARAMS, bw, 32 * 4),
                   ESMT_OK);
  double amax = 0;
  for (int i = 0; i < 4 * 128; i++) amax = fmax(amax, fabs(a[i]));
  assert_true(amax > 0.5 / sqrt(128.0) && amax <= 1.0 / sqrt(128.0));
  for (int i = 0; i < 32 * 4; i++) assert_true(bw[i] == 0.0f);
  esmt_batch b = batch();
  esmt_forward_result r1 = ESMT_FORWARD_RESULT_INIT, r2 = ESMT_FORWARD_RESULT_INIT;
  float o1[B * C], o2[B * C];
  if (esmt_model_forward(base, &b, &r1, o1) || esmt_model_forward(lora, &b, &r2, o2))
    fail_msg("%s", esmt_last_error());
  assert_memory_equal(o1, o2, sizeof o1);
  esmt_model_destroy(base);
  esmt_model_destroy(lora);
  esmt_context_destroy(ctx);
}

/* A frozen prefix holds no optimizer moments: reading a frozen tensor's is
 * refused, a trained one's works. */
static void test_frozen_moments(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = small(ESMT_HEAD_RESIDUE_CLASS);
  c.frozen_layers = 1;
  esmt_model *m = make(ctx, &c);
  float v[32];
  assert_int_not_equal(esmt_model_read_tensor(m, "esm.encoder.layer.0.LayerNorm.bias",
                                              ESMT_BUF_ADAM_M, v, 32), ESMT_OK);
  assert_int_equal(esmt_model_read_tensor(m, "esm.encoder.layer.1.LayerNorm.bias",
                                          ESMT_BUF_ADAM_M, v, 32), ESMT_OK);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

/* Every tensor's fp32 weights, in layout order, concatenated. */
static float *all_weights(esmt_model *m, uint64_t *n) {
  int count;
  assert_int_equal(esmt_model_tensor_count(m, &count), ESMT_OK);
  *n = m->layout.total;
  float *w = malloc(*n * sizeof *w);
  for (int i = 0; i < count; i++) {
    const esmt_tensor_info *t = &m->layout.tensors[i];
    if (esmt_model_read_tensor(m, t->name, ESMT_BUF_PARAMS, w + t->offset, t->numel))
      fail_msg("%s", esmt_last_error());
  }
  return w;
}

/* The head's outputs for batch() (B x C). */
static void head_outputs(esmt_model *m, float *out) {
  esmt_batch b = batch();
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  if (esmt_model_forward(m, &b, &r, out)) fail_msg("%s", esmt_last_error());
}

/* The saved optimizer state of the frozen prefix [0, lo) is zero: no
 * moments are kept there, and the save must not write whatever the host
 * buffer held before (main() makes malloc hand out dirty memory). */
static void assert_frozen_moments_zero(esmt_model *m, const char *dir, uint64_t lo) {
  char path[1024];
  snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
  esmt_st_file f;
  if (esmt_st_open(path, &f)) fail_msg("%s", esmt_last_error());
  int checked = 0;
  for (int i = 0; i < m->layout.count; i++) {
    const esmt_tensor_info *t = &m->layout.tensors[i];
    if (t->offset + t->numel > lo) continue;
    for (int s = 0; s < esmt_optimizer_state_count(m->cfg.optimizer); s++) {
      char name[512];
      snprintf(name, sizeof name, "%s%s", esmt_optimizer_state_prefix(m->cfg.optimizer, s),
               t->name);
      const esmt_st_tensor *st = esmt_st_find(&f, name);
      if (!st) fail_msg("%s: no tensor %s", path, name);
      float *v = malloc(st->numel * sizeof *v);
      esmt_st_to_f32(st, v);
      for (uint64_t k = 0; k < st->numel; k++)
        if (v[k] != 0.0f) fail_msg("%s[%llu] = %g, not 0", name, (unsigned long long)k, v[k]);
      free(v);
      checked++;
    }
  }
  assert_true(checked > 0);
  esmt_st_close(&f);
}

/* A frozen prefix in bf16 (LoRA, or frozen layers): the frozen weights'
 * fp32 master is in host memory, the device holding the master of what
 * trains only (docs/finetune.md, Memory); the frozen weights read back
 * bit-identical through training and through a checkpoint, and the model
 * loaded from that checkpoint computes what the trained one does (the
 * LayerNorm weights that train followed the steps). Returns the model
 * loaded back. */
static esmt_model *frozen_on_host_trains(esmt_context *ctx, const esmt_model_config *c,
                                         float **trained_weights) {
  esmt_model *m = make(ctx, c);
  const uint64_t lo = m->train_lo;
  assert_true(lo > 0);
  assert_non_null(m->mem.frozen_host);
  assert_int_equal(m->mem.master_lo, lo); /* no device master below what trains */
  uint64_t n;
  float *before = all_weights(m, &n);
  for (int k = 0; k < 3; k++) step(m, 1e-2, 1.0);
  float *after = all_weights(m, &n);
  assert_memory_equal(before, after, lo * sizeof *before);
  assert_memory_not_equal(before + lo, after + lo, (n - lo) * sizeof *before);
  const char *dir = test_mkdtemp();
  if (esmt_model_save(m, dir, 3)) fail_msg("%s", esmt_last_error());
  assert_frozen_moments_zero(m, dir, lo);
  esmt_model *back = make(ctx, c);
  if (esmt_model_load(back, dir, 1, NULL)) fail_msg("%s", esmt_last_error());
  test_rmtree(dir);
  float *loaded = all_weights(back, &n);
  assert_memory_equal(after, loaded, n * sizeof *after);
  float out_m[B * C], out_back[B * C];
  head_outputs(m, out_m);
  head_outputs(back, out_back);
  assert_memory_equal(out_m, out_back, sizeof out_m);
  free(before);
  free(loaded);
  esmt_model_destroy(m);
  *trained_weights = after;
  return back;
}

static void test_frozen_master_on_host(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = small(ESMT_HEAD_SEQ_CLASS);
  c.precision = ESMT_PRECISION_BF16;
  c.frozen_layers = 1;
  float *after;
  esmt_model_destroy(frozen_on_host_trains(ctx, &c, &after));
  free(after);
  c.frozen_layers = 0;
  c.lora_rank = 4;
  c.lora_alpha = 8.0f;
  c.lora_targets = ESMT_LORA_QUERY | ESMT_LORA_FFN_DOWN;
  esmt_model *back = frozen_on_host_trains(ctx, &c, &after);
  /* the merge, from the host copy: W += (alpha / r) B A, B zeroed */
  const esmt_lora_offsets *o = &back->layout.lora[1];
  const uint64_t wq = back->layout.layers[1].qkv_w;
  if (esmt_model_lora_merge(back)) fail_msg("%s", esmt_last_error());
  uint64_t n;
  float *merged = all_weights(back, &n);
  const int d = 32, r = 4;
  for (int i = 0; i < d; i++)
    for (int j = 0; j < d; j++) {
      double acc = 0;
      for (int k = 0; k < r; k++)
        acc += (double)after[o->b[0] + (uint64_t)i * r + k] * after[o->a[0] + (uint64_t)k * d + j];
      const float want = (float)(after[wq + (uint64_t)i * d + j] + 2.0 * acc);
      assert_float_equal(merged[wq + (uint64_t)i * d + j], want, 1e-6f);
    }
  for (int i = 0; i < d * r; i++) assert_true(merged[o->b[0] + (uint64_t)i] == 0.0f);
  assert_memory_not_equal(after + wq, merged + wq, (size_t)d * d * sizeof *after);
  free(after);
  free(merged);
  esmt_model_destroy(back);
  esmt_context_destroy(ctx);
}

/* The planner holds moments and gradients for what trains only, as the
 * model allocates them, and plans no optimizer offload for a frozen prefix. */
static uint64_t planned_moments(const esmt_model_config *c, int offload) {
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  r.model = c;
  r.micro_batch = 2;
  r.seq_len = 8;
  r.precision = ESMT_PRECISION_FP32;
  r.offload_optimizer = offload;
  r.recompute = 0;
  esmt_plan p = ESMT_PLAN_INIT;
  if (offload) { /* refused with a reason */
    assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_UNSUPPORTED);
    assert_non_null(strstr(esmt_last_error(), "frozen parameters"));
    return 0;
  }
  if (esmt_plan_memory(&r, &p)) fail_msg("%s", esmt_last_error());
  /* the gradients, like the moments, only for what trains (AdamW: 2 x 4 bytes) */
  assert_int_equal(p.device[ESMT_MEM_GRADIENTS], p.device[ESMT_MEM_MOMENTS] / 2);
  return p.device[ESMT_MEM_MOMENTS];
}

static void test_plan(void **state) {
  (void)state;
  esmt_model_config c = small(ESMT_HEAD_SEQ_CLASS);
  uint64_t all;
  assert_int_equal(esmt_model_config_param_count(&c, &all), ESMT_OK);
  assert_int_equal(planned_moments(&c, 0), 8 * all); /* AdamW: two fp32 moments */
  const uint64_t head = 32 * 32 + 32 + C * 32 + C;
  c.frozen_layers = ESMT_FREEZE_ENCODER;
  assert_int_equal(planned_moments(&c, 0), 8 * head);
  planned_moments(&c, 1);
  c.frozen_layers = 0;
  c.lora_rank = 4;
  c.lora_alpha = 4.0f;
  c.lora_targets = ESMT_LORA_QUERY | ESMT_LORA_FFN_UP;
  /* per layer: query 4 x (32 + 32), FFN up 4 x (32 + 128) */
  assert_int_equal(planned_moments(&c, 0), 8 * (head + 2 * (4 * 64 + 4 * 160)));
}

/* esmt_model_infer's ESMT_INFER_HEAD gives what esmt_model_forward's
 * outputs are (the same ops in the inference arena), with or without
 * other outputs; a model without a head refuses it. */
static void infer_matches_forward(esmt_context *ctx, esmt_model_config *c) {
  esmt_model *m = make(ctx, c);
  const int residue = c->head == ESMT_HEAD_RESIDUE_CLASS;
  const size_t n = (size_t)(residue ? B * T : B) * C;
  float fwd[B * T * C], inf[B * T * C], mean[B * 32];
  int32_t labels[B * T];
  for (int i = 0; i < B * T; i++) labels[i] = tokens[i] > 3 ? i % C : ESMT_LABEL_IGNORE;
  esmt_batch b = batch();
  if (residue) b.labels = labels;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  if (esmt_model_forward(m, &b, &r, fwd)) fail_msg("%s", esmt_last_error());
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_HEAD;
  q.head = inf;
  memset(inf, 0xff, sizeof inf);
  if (esmt_model_infer(m, &b, &q)) fail_msg("%s", esmt_last_error());
  assert_memory_equal(fwd, inf, n * sizeof(float));
  q.outputs = ESMT_INFER_HEAD | ESMT_INFER_MEAN; /* another layer asked for too */
  q.layer = 1;
  q.mean = mean;
  memset(inf, 0xff, sizeof inf);
  if (esmt_model_infer(m, &b, &q)) fail_msg("%s", esmt_last_error());
  assert_memory_equal(fwd, inf, n * sizeof(float));
  esmt_model_destroy(m);
}

static void test_infer_head(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = small(ESMT_HEAD_SEQ_CLASS);
  infer_matches_forward(ctx, &c);
  c.pooling = ESMT_POOL_MEAN;
  infer_matches_forward(ctx, &c);
  c = small(ESMT_HEAD_RESIDUE_CLASS);
  infer_matches_forward(ctx, &c);
  c = small(ESMT_HEAD_NONE);
  esmt_model *m = make(ctx, &c);
  float out[B * C];
  esmt_batch b = batch();
  esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
  q.outputs = ESMT_INFER_HEAD;
  q.head = out;
  assert_int_equal(esmt_model_infer(m, &b, &q), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "no task head"));
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

/* LoRA's B nonzero, so that A's gradient is not zero. */
static void set_lora_b(esmt_model *m) { head_fixture_set_lora_b(m, 0.05f, 11, 0.25f); }

/* Relative L2 distance of b from a. */
static double rel_l2(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)a[i] * a[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The head and LoRA in bf16 (the GPU backends' precision: half
 * activations, the head's host parts converted, fp32 gradient GEMMs)
 * against fp32: loss within 2e-2, outputs and every trained tensor's
 * gradient within 5e-2 relative L2 (test_mixed_precision's bounds). */
static void half_matches_fp32(esmt_context *ctx, esmt_model_config c) {
  esmt_model *m32 = make(ctx, &c), *mh = NULL;
  c.precision = ESMT_PRECISION_BF16;
  esmt_status st = esmt_model_create(ctx, &c, 7, &mh);
  if (st == ESMT_ERR_UNSUPPORTED) {
    esmt_model_destroy(m32);
    skip();
  }
  if (st) fail_msg("%s", esmt_last_error());
  if (c.lora_rank) {
    set_lora_b(m32);
    set_lora_b(mh);
  }
  const int residue = c.head == ESMT_HEAD_RESIDUE_CLASS;
  const size_t n = (size_t)(residue ? B * T : B) * C;
  int32_t labels[B * T];
  for (int i = 0; i < B * T; i++) labels[i] = tokens[i] > 3 ? i % C : ESMT_LABEL_IGNORE;
  static const float multi[B * C] = {1, 0, 1, 0, 1, 1};
  esmt_batch b = batch();
  if (residue) b.labels = labels;
  if (c.head == ESMT_HEAD_MULTILABEL) b.targets = multi;
  esmt_model *ms[2] = {m32, mh};
  float out[2][B * T * C];
  double loss[2];
  for (int k = 0; k < 2; k++) {
    esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
    if (esmt_model_zero_grad(ms[k]) || esmt_model_forward(ms[k], &b, &r, out[k]) ||
        esmt_model_backward(ms[k]))
      fail_msg("%s", esmt_last_error());
    loss[k] = r.loss;
  }
  assert_true(fabs(loss[1] - loss[0]) <= 2e-2 * fabs(loss[0]));
  assert_true(rel_l2(out[0], out[1], n) <= 5e-2);
  /* per tensor: |g_h - g_32| against |g_32|, or against the largest |g_32|
   * where a gradient nearly cancels (below 1% of the largest: the key
   * bias's is 0 exactly, the residue classifier's bias sums softmax -
   * onehot over positions), as mixed_compare.c does below 0.1% */
  int count, trained = 0;
  assert_int_equal(esmt_model_tensor_count(m32, &count), ESMT_OK);
  double *err = calloc((size_t)count, sizeof *err), *norm = calloc((size_t)count, sizeof *norm);
  double largest = 0;
  for (int i = 0; i < count; i++) {
    esmt_tensor_info t = ESMT_TENSOR_INFO_INIT;
    assert_int_equal(esmt_model_tensor_info(m32, i, &t), ESMT_OK);
    float *g32 = malloc(t.numel * sizeof *g32), *gh = malloc(t.numel * sizeof *gh);
    assert_int_equal(esmt_model_read_tensor(m32, t.name, ESMT_BUF_GRADS, g32, t.numel), ESMT_OK);
    assert_int_equal(esmt_model_read_tensor(mh, t.name, ESMT_BUF_GRADS, gh, t.numel), ESMT_OK);
    for (uint64_t k = 0; k < t.numel; k++) {
      err[i] += ((double)gh[k] - g32[k]) * ((double)gh[k] - g32[k]);
      norm[i] += (double)g32[k] * g32[k];
    }
    err[i] = sqrt(err[i]);
    norm[i] = sqrt(norm[i]);
    largest = fmax(largest, norm[i]);
    free(g32);
    free(gh);
  }
  for (int i = 0; i < count; i++) {
    esmt_tensor_info t = ESMT_TENSOR_INFO_INIT;
    assert_int_equal(esmt_model_tensor_info(m32, i, &t), ESMT_OK);
    const double ref = norm[i] >= 1e-2 * largest ? norm[i] : largest;
    if (!(err[i] <= 5e-2 * ref)) fail_msg("%s: bf16 gradient error %.3g of %.3g", t.name, err[i], ref);
    trained += norm[i] > 0;
  }
  free(err);
  free(norm);
  assert_true(trained > 4);
  esmt_model_destroy(m32);
  esmt_model_destroy(mh);
}

static void test_half_precision(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = small(ESMT_HEAD_SEQ_CLASS);
  c.pooling = ESMT_POOL_MEAN;
  half_matches_fp32(ctx, c);
  c = small(ESMT_HEAD_RESIDUE_CLASS);
  half_matches_fp32(ctx, c);
  c.lora_rank = 4;
  c.lora_alpha = 8.0f;
  c.lora_targets = ESMT_LORA_QUERY | ESMT_LORA_VALUE | ESMT_LORA_FFN_UP | ESMT_LORA_FFN_DOWN;
  half_matches_fp32(ctx, c);
  c = small(ESMT_HEAD_MULTILABEL);
  c.lora_rank = 2;
  c.lora_alpha = 4.0f;
  c.lora_targets = ESMT_LORA_KEY | ESMT_LORA_ATTN_OUT;
  half_matches_fp32(ctx, c);
  esmt_context_destroy(ctx);
}

/* Data parallelism refuses a model whose gradients start past a frozen
 * prefix (its buckets cover the whole flat buffer). One rank, TCP. */
static void test_data_parallel_refused(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = small(ESMT_HEAD_SEQ_CLASS);
  c.frozen_layers = 1;
  esmt_model *m = make(ctx, &c);
  esmt_comm_options co = {0, 1, "127.0.0.1", 0, NULL, 1, 5.0};
  esmt_comm *comm = NULL;
  esmt_dp *dp = NULL;
  if (esmt_comm_create(&comm, &co) || esmt_dp_create(comm, 4096, &dp))
    fail_msg("%s", esmt_last_error());
  assert_int_equal(esmt_dp_grads_arm(dp, m), ESMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(esmt_last_error(), "frozen parameters"));
  esmt_dp_destroy(dp);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

static void expect_create_error(esmt_context *ctx, const esmt_model_config *c, const char *what) {
  esmt_model *m = NULL;
  assert_int_not_equal(esmt_model_create(ctx, c, 1, &m), ESMT_OK);
  assert_null(m);
  if (!strstr(esmt_last_error(), what))
    fail_msg("expected '%s' in: %s", what, esmt_last_error());
}

static void test_bad_configs(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = small(ESMT_HEAD_SEQ_CLASS);
  c.num_labels = 1;
  expect_create_error(ctx, &c, "num_labels >= 2");
  c = small(ESMT_HEAD_REGRESSION);
  c.frozen_layers = 3;
  expect_create_error(ctx, &c, "frozen_layers 3");
  c = small(ESMT_HEAD_NONE);
  c.frozen_layers = ESMT_FREEZE_ENCODER;
  expect_create_error(ctx, &c, "needs a task head");
  c = small(ESMT_HEAD_SEQ_CLASS);
  c.pooling = (esmt_pooling)5;
  expect_create_error(ctx, &c, "pooling 5");
  c = small(ESMT_HEAD_SEQ_CLASS);
  c.lora_rank = 4;
  c.lora_alpha = 8.0f;
  c.lora_targets = ESMT_LORA_QUERY;
  c.lora_dropout = 1.0f;
  expect_create_error(ctx, &c, "lora_dropout 1 is outside [0, 1)");
  c.lora_dropout = 0.0f;
  c.lora_targets = 64;
  expect_create_error(ctx, &c, "lora_targets 0x40");
  c.lora_targets = ESMT_LORA_QUERY;
  c.frozen_layers = 1;
  expect_create_error(ctx, &c, "frozen_layers must be 0");
  esmt_context_destroy(ctx);
}

static void expect_forward_error(esmt_model *m, const esmt_batch *b, const char *what) {
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  assert_int_not_equal(esmt_model_forward(m, b, &r, NULL), ESMT_OK);
  if (!strstr(esmt_last_error(), what)) fail_msg("expected '%s' in: %s", what, esmt_last_error());
}

static void test_bad_batches(void **state) {
  (void)state;
  esmt_context *ctx = head_fixture_ctx();
  esmt_model_config c = small(ESMT_HEAD_SEQ_CLASS);
  esmt_model *m = make(ctx, &c);
  esmt_batch b = batch();
  b.targets = NULL;
  expect_forward_error(m, &b, "needs batch->targets");
  const float bad_class[B] = {1, 3};
  b.targets = bad_class;
  expect_forward_error(m, &b, "row 1: class 3");
  const float w[C] = {1, -1, 1};
  b.targets = targets;
  b.class_weights = w;
  expect_forward_error(m, &b, "class weight 1");
  esmt_model_destroy(m);

  c = small(ESMT_HEAD_MULTILABEL);
  m = make(ctx, &c);
  const float half[B * C] = {0, 1, 0.5f, 1, 1, 0};
  b = batch();
  b.targets = half;
  expect_forward_error(m, &b, "row 0 label 2: 0.5");
  esmt_model_destroy(m);

  c = small(ESMT_HEAD_RESIDUE_CLASS);
  m = make(ctx, &c);
  int32_t labels[B * T];
  for (int i = 0; i < B * T; i++) labels[i] = ESMT_LABEL_IGNORE;
  labels[3] = C; /* a class the head does not have */
  b = batch();
  b.labels = labels;
  expect_forward_error(m, &b, "row 0 position 3: label 3");
  const int32_t seg_start[2] = {0, 8}, seg_len[2] = {8, 5};
  labels[3] = 1;
  b.num_segments = 2;
  b.seg_start = seg_start;
  b.seg_len = seg_len;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  assert_int_not_equal(esmt_model_forward(m, &b, &r, NULL), ESMT_OK);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

int main(void) {
#ifdef __GLIBC__
  /* every allocation from the heap, filled with a non-zero pattern: a
   * buffer read before it is written shows (assert_frozen_moments_zero) */
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_PERTURB, 0x5a);
#endif
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_head_learning_rate),
      cmocka_unit_test(test_lora_initial_state),
      cmocka_unit_test(test_frozen_moments),
      cmocka_unit_test(test_frozen_master_on_host),
      cmocka_unit_test(test_plan),
      cmocka_unit_test(test_infer_head),
      cmocka_unit_test(test_half_precision),
      cmocka_unit_test(test_data_parallel_refused),
      cmocka_unit_test(test_bad_configs),
      cmocka_unit_test(test_bad_batches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
