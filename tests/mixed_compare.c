/* SPDX-License-Identifier: MIT */
/* See mixed_compare.h. */
#include "mixed_compare.h"

#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B 3
#define T 16

esmt_model_config mixed_tiny_config(esmt_precision p) {
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.num_heads = 4;
  c.ffn_size = 64;
  c.max_positions = 32;
  c.precision = p;
  return c;
}

/* Rows of 16, 11 and 7 tokens: <cls> residues <eos>, every 4th residue
 * masked and labelled. */
static void make_batch(int32_t *tok, int32_t *lab) {
  static const int len[B] = {T, 11, 7};
  uint32_t s = 12345;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      int32_t *x = tok + b * T + t, *y = lab + b * T + t;
      s = s * 1664525u + 1013904223u;
      *y = ESMT_LABEL_IGNORE;
      if (t >= len[b]) *x = ESMT_TOKEN_PAD;
      else if (t == 0) *x = ESMT_TOKEN_CLS;
      else if (t == len[b] - 1) *x = ESMT_TOKEN_EOS;
      else *x = 4 + (int32_t)((s >> 8) % 20);
      if (t > 0 && t < len[b] - 1 && t % 4 == 1) {
        *y = *x;
        *x = ESMT_TOKEN_MASK;
      }
    }
}

static double forward(esmt_model *m, const int32_t *tok, const int32_t *lab, float *logits) {
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tok;
  b.labels = lab;
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  if (esmt_model_forward(m, &b, &r, logits) != ESMT_OK) fail_msg("forward: %s", esmt_last_error());
  return r.loss;
}

static void check_grads(esmt_model *m32, esmt_model *mh, double tol) {
  int n = 0;
  assert_int_equal(esmt_model_tensor_count(m32, &n), ESMT_OK);
  double *norm = calloc((size_t)n, sizeof *norm), *diff = calloc((size_t)n, sizeof *diff);
  double largest = 0;
  for (int i = 0; i < n; i++) {
    esmt_tensor_info t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    assert_int_equal(esmt_model_tensor_info(m32, i, &t), ESMT_OK);
    float *a = malloc(t.numel * sizeof *a), *h = malloc(t.numel * sizeof *h);
    assert_int_equal(esmt_model_read_tensor(m32, t.name, ESMT_BUF_GRADS, a, t.numel), ESMT_OK);
    assert_int_equal(esmt_model_read_tensor(mh, t.name, ESMT_BUF_GRADS, h, t.numel), ESMT_OK);
    for (uint64_t k = 0; k < t.numel; k++) {
      norm[i] += (double)a[k] * a[k];
      diff[i] += ((double)h[k] - a[k]) * ((double)h[k] - a[k]);
    }
    norm[i] = sqrt(norm[i]);
    diff[i] = sqrt(diff[i]);
    if (norm[i] > largest) largest = norm[i];
    free(a);
    free(h);
  }
  assert_true(largest > 0);
  double worst = 0;
  int worst_i = 0;
  for (int i = 0; i < n; i++) {
    esmt_tensor_info t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    esmt_model_tensor_info(m32, i, &t);
    double ref = norm[i] > 1e-3 * largest ? norm[i] : largest;
    if (diff[i] / ref > worst) worst = diff[i] / ref, worst_i = i;
    if (!(diff[i] <= tol * ref))
      fail_msg("gradient of %s: |half - fp32| = %g, |fp32| = %g (tolerance %g relative to %g)",
               t.name, diff[i], norm[i], tol, ref);
  }
  esmt_tensor_info w;
  memset(&w, 0, sizeof w);
  w.struct_size = sizeof w;
  esmt_model_tensor_info(m32, worst_i, &w);
  printf("gradients: worst relative L2 difference %.3g (%s), tolerance %g\n", worst, w.name, tol);
  free(norm);
  free(diff);
}

void mixed_compare(esmt_model *m32, esmt_model *mh, int steps, double loss_tol, double grad_tol) {
  int32_t tok[B * T], lab[B * T];
  make_batch(tok, lab);
  const size_t nl = (size_t)B * T * ESMT_VOCAB_SIZE;
  float *l32 = malloc(nl * sizeof *l32), *lh = malloc(nl * sizeof *lh);
  double loss32 = forward(m32, tok, lab, l32), lossh = forward(mh, tok, lab, lh);
  double num = 0, den = 0;
  for (size_t i = 0; i < nl; i++) {
    num += ((double)lh[i] - l32[i]) * ((double)lh[i] - l32[i]);
    den += (double)l32[i] * l32[i];
    if (!isfinite(lh[i])) fail_msg("half logit %zu is %g", i, (double)lh[i]);
  }
  free(l32);
  free(lh);
  printf("logits: relative L2 difference %.3g\n", sqrt(num / den));
  if (!(sqrt(num) <= loss_tol * sqrt(den)))
    fail_msg("logits: relative L2 difference %g > %g", sqrt(num / den), loss_tol);
  const double first32 = loss32;
  esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
  double ac_lr = 3e-3; /* the learning rate is the step's argument */
  for (int step = 1;; step++) {
    printf("step %d: loss fp32 %.6f, half %.6f (relative difference %.3g)\n", step - 1, loss32,
           lossh, fabs(lossh - loss32) / fabs(loss32));
    if (!(fabs(lossh - loss32) <= loss_tol * fabs(loss32)))
      fail_msg("step %d: half loss %.6f, fp32 %.6f (relative tolerance %g)", step - 1, lossh,
               loss32, loss_tol);
    if (step > steps) break;
    esmt_model *ms[2] = {m32, mh};
    for (int i = 0; i < 2; i++) {
      assert_int_equal(esmt_model_zero_grad(ms[i]), ESMT_OK);
      if (i == 1) forward(mh, tok, lab, NULL); /* activations for backward */
      else forward(m32, tok, lab, NULL);
      if (esmt_model_backward(ms[i]) != ESMT_OK) fail_msg("backward: %s", esmt_last_error());
    }
    if (step == 1) check_grads(m32, mh, grad_tol);
    for (int i = 0; i < 2; i++)
      if (esmt_model_optimizer_step(ms[i], &ac, ac_lr, 1.0, step) != ESMT_OK) fail_msg("adamw: %s", esmt_last_error());
    loss32 = forward(m32, tok, lab, NULL);
    lossh = forward(mh, tok, lab, NULL);
  }
  if (steps > 0 && !(lossh < first32))
    fail_msg("half loss did not fall: %.6f after %d steps, %.6f before", lossh, steps, first32);
}
