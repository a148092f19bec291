/* SPDX-License-Identifier: MIT */
/* LoRA adapters (esmt_model_config.lora_*, docs/finetune.md), as peft's
 * lora.Linear computes them: a frozen linear map y = x W^T + b gains
 * s (D(x) A^T) B^T, s = alpha / rank, A [rank, in] and B [out, rank]
 * trained, D dropout in training forwards (identity otherwise). The GEMMs
 * run on the backend. The forward keeps u = D(x) A^T [N, rank] of every
 * adapter for backward (rank values per token and adapter, a small fraction
 * of a layer's activations). Dropout's masks are not kept: the backend's
 * dropout op draws each where the data is, from a counter-based generator
 * (esmtrain/philox.h) keyed by the model seed, the draw (one a training
 * pass), the adapter (layer, target) and the element, and backward redraws
 * the forward's mask. */
#include <stdlib.h>
#include <string.h>

#include "esmtrain/backend.h"
#include "esmtrain/philox.h"
#include "model.h"
#include "param_layer.h"

struct esmt_lora {
  void *buf;            /* one device allocation: u of every adapter, du, the discard */
  uint64_t bytes, N;    /* sized for N tokens */
  void **u;             /* [L * ESMT_LORA_TARGETS] -> [N, rank] (NULL: no adapter) */
  void *du;             /* [N, rank] backward scratch */
  float *discard;       /* [2 d] fp32 */
  /* dropout (lora_dropout > 0 only): device [N, in_max] x 2 */
  void *xd, *dxd;
  uint64_t drop_N;
};

const char *esmt_lora_target(const esmt_model_config *c, int t, int *in, int *out) {
  const int d = c->hidden_size, F = c->ffn_size ? c->ffn_size : 4 * d;
  static const char *const names[ESMT_LORA_TARGETS] = {
      "attention.self.query", "attention.self.key", "attention.self.value",
      "attention.output.dense", "output.dense", "intermediate.dense"};
  *in = t == ESMT_LORA_T_FFN_DOWN ? F : d;
  *out = t == ESMT_LORA_T_FFN_UP ? F : d;
  return names[t];
}

uint64_t esmt_lora_layer_params(const esmt_model_config *c) {
  uint64_t n = 0;
  for (int t = 0; t < ESMT_LORA_TARGETS; t++) {
    if (!(c->lora_targets >> t & 1)) continue;
    int in, out;
    esmt_lora_target(c, t, &in, &out);
    n += (uint64_t)c->lora_rank * (uint64_t)(in + out);
  }
  return n;
}

void esmt_lora_free(esmt_model *m) {
  struct esmt_lora *z = m->lora;
  if (!z) return;
  if (z->buf && m->dev) m->ops->free(m->dev, ESMTB_MEM_DEVICE, z->buf);
  if (z->xd && m->dev) m->ops->free(m->dev, ESMTB_MEM_DEVICE, z->xd);
  free(z->u);
  free(z);
  m->lora = NULL;
}

/* Room for the current batch's N = B * T tokens. */
static esmt_status reserve(esmt_model *m) {
  const char *fn = "LoRA";
  const uint64_t N = (uint64_t)m->B * (uint64_t)m->T, r = (uint64_t)m->cfg.lora_rank;
  if (!m->lora) {
    if (!(m->lora = calloc(1, sizeof *m->lora)) ||
        !(m->lora->u = calloc((size_t)m->L * ESMT_LORA_TARGETS, sizeof *m->lora->u))) {
      esmt_lora_free(m);
      return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
  }
  struct esmt_lora *z = m->lora;
  if (z->buf && z->N >= N) return ESMT_OK;
  int n_adapters = 0;
  for (int t = 0; t < ESMT_LORA_TARGETS; t++) n_adapters += (int)(m->cfg.lora_targets >> t & 1);
  const uint64_t per = N * r * m->esize;
  const uint64_t bytes = ((uint64_t)m->L * (uint64_t)n_adapters + 1) * per +
                         2 * (uint64_t)m->d * sizeof(float);
  if (z->buf) m->ops->free(m->dev, ESMTB_MEM_DEVICE, z->buf);
  z->buf = NULL;
  esmt_status st = esmt_model_dev_alloc(m, bytes, &z->buf, "LoRA activations");
  if (st) return st;
  z->bytes = bytes;
  z->N = N;
  char *p = z->buf;
  z->discard = (float *)p; /* first: fp32 alignment */
  p += 2 * (uint64_t)m->d * sizeof(float);
  z->du = p;
  p += per;
  for (int l = 0; l < m->L; l++)
    for (int t = 0; t < ESMT_LORA_TARGETS; t++) {
      z->u[l * ESMT_LORA_TARGETS + t] = m->cfg.lora_targets >> t & 1 ? (void *)p : NULL;
      if (m->cfg.lora_targets >> t & 1) p += per;
    }
  return ESMT_OK;
}

float *esmt_lora_discard(esmt_model *m) { return m->lora ? m->lora->discard : NULL; }

/* C[M,n] (ldc) = alpha op(A) op(B) + beta C in the compute dtype, or into
 * an fp32 gradient (c_f32). */
static esmt_status gemm(esmt_model *m, int ta, int tb, int M, int n, int k, float alpha,
                        const void *a, int lda, const void *b, int ldb, float beta, void *c,
                        int ldc, int grad, const char *where) {
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g;
  g.dtype = m->dtype;
  g.trans_a = ta; g.trans_b = tb;
  g.m = M; g.n = n; g.k = k;
  g.alpha = alpha; g.beta = beta;
  g.a = a; g.lda = lda;
  g.b = b; g.ldb = ldb;
  g.c = c; g.ldc = ldc;
  g.c_f32 = grad && m->dtype != ESMTB_F32;
  ESMT_OP(m, gemm, g, where);
  return ESMT_OK;
}

static float scaling(const esmt_model *m) {
  return m->cfg.lora_alpha / (float)m->cfg.lora_rank;
}

uint64_t esmt_lora_dropout_stream(uint64_t draw, int l, int t) {
  return draw << 16 | (uint64_t)(l * ESMT_LORA_TARGETS + t);
}

void esmt_lora_begin_pass(esmt_model *m, int training) {
  m->lora_dropout_on = training && m->layout.lora && m->cfg.lora_dropout > 0.0f;
  if (m->lora_dropout_on) m->lora_draw++;
}

/* The widest adapter input (the FFN's down map reads F values). */
static int widest_input(const esmt_model *m) {
  return m->cfg.lora_targets & ESMT_LORA_FFN_DOWN ? m->F : m->d;
}

/* Room for dropout's two [N, in_max] device buffers. */
static esmt_status reserve_dropout(esmt_model *m) {
  struct esmt_lora *z = m->lora;
  const uint64_t N = (uint64_t)m->B * (uint64_t)m->T;
  if (!m->ops->dropout)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "LoRA dropout: backend %s has no dropout op (backend "
                     "ABI 2.3); set lora_dropout 0 or use another backend", m->ops->name);
  if (z->xd && z->drop_N >= N) return ESMT_OK;
  const uint64_t n = N * (uint64_t)widest_input(m);
  if (z->xd) m->ops->free(m->dev, ESMTB_MEM_DEVICE, z->xd);
  z->xd = NULL;
  esmt_status st = esmt_model_dev_alloc(m, 2 * n * m->esize, &z->xd, "LoRA dropout buffers");
  if (st) return st;
  z->dxd = (char *)z->xd + n * m->esize;
  z->drop_N = N;
  return ESMT_OK;
}

/* dst [N, in] (+)= x with adapter (l, t)'s mask of this draw applied, kept
 * values scaled by 1 / (1 - p) (peft's nn.Dropout on the adapter input). */
static esmt_status apply_dropout(esmt_model *m, int l, int t, const void *x, void *dst, int in,
                                 int accumulate, const char *where) {
  const double p = m->cfg.lora_dropout;
  esmtb_dropout_args a = {0};
  a.struct_size = sizeof a;
  a.dtype = m->dtype;
  a.n = (size_t)m->B * (size_t)m->T * (size_t)in;
  a.x = x;
  a.y = dst;
  a.seed = m->seed;
  a.stream = esmt_lora_dropout_stream(m->lora_draw, l, t);
  a.threshold = esmt_dropout_threshold(p);
  a.scale = (float)(1.0 / (1.0 - p));
  a.accumulate = accumulate;
  ESMT_OP(m, dropout, a, where);
  return ESMT_OK;
}

/* The adapter's input: x, or D(x) in z->xd during a training pass. */
static esmt_status adapter_input(esmt_model *m, int l, int t, const void *x, int in,
                                 const void **xa) {
  *xa = x;
  if (!m->lora_dropout_on) return ESMT_OK;
  esmt_status st = reserve_dropout(m);
  if (!st) st = apply_dropout(m, l, t, x, m->lora->xd, in, 0, "LoRA dropout");
  if (!st) *xa = m->lora->xd;
  return st;
}

esmt_status esmt_lora_forward(esmt_model *m, int l, int t, const void *x, void *y, int ldy) {
  const esmt_lora_offsets *o = &m->layout.lora[l];
  if (!o->a[t]) return ESMT_OK;
  esmt_status st = reserve(m);
  if (st) return st;
  const int N = m->B * m->T, r = m->cfg.lora_rank;
  int in, out;
  esmt_lora_target(&m->cfg, t, &in, &out);
  void *u = m->lora->u[l * ESMT_LORA_TARGETS + t];
  const void *xa;
  if ((st = adapter_input(m, l, t, x, in, &xa))) return st;
  /* u [N, r] = D(x) A^T; y += s u B^T */
  if ((st = gemm(m, 0, 1, N, r, in, 1.0f, xa, in, esmt_weight(m, o->a[t]), in, 0.0f, u, r, 0,
                 "forward: LoRA A")))
    return st;
  return gemm(m, 0, 1, N, out, r, scaling(m), u, r, esmt_weight(m, o->b[t]), r, 1.0f, y, ldy, 0,
              "forward: LoRA B");
}

esmt_status esmt_lora_ffn_up(esmt_model *m, int l, const void *x, void *out, void *pre) {
  const esmt_lora_offsets *o = &m->layout.lora[l];
  const int t = ESMT_LORA_T_FFN_UP, N = m->B * m->T, r = m->cfg.lora_rank, d = m->d, F = m->F;
  const esmt_layer_offsets *w = &m->layout.layers[l];
  esmt_status st = reserve(m);
  if (st) return st;
  void *u = m->lora->u[l * ESMT_LORA_TARGETS + t];
  const void *xa;
  if ((st = adapter_input(m, l, t, x, d, &xa))) return st;
  if ((st = gemm(m, 0, 1, N, r, d, 1.0f, xa, d, esmt_weight(m, o->a[t]), d, 0.0f, u, r, 0,
                 "forward: LoRA A")))
    return st;
  /* out = s u B^T + b (the bias needs beta = 0, so it comes with the adapter's term) */
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g;
  g.dtype = m->dtype;
  g.trans_b = 1;
  g.m = N; g.n = F; g.k = r;
  g.alpha = m->cfg.lora_alpha / (float)r;
  g.a = u; g.lda = r;
  g.b = esmt_weight(m, o->b[t]); g.ldb = r;
  g.c = out; g.ldc = F;
  g.bias = esmt_weight(m, w->fc1_b);
  ESMT_OP(m, gemm, g, "forward: LoRA B");
  /* pre = x W^T + out, out = gelu(pre) */
  esmtb_gemm_args f = {0};
  f.struct_size = sizeof f;
  f.dtype = m->dtype;
  f.trans_b = 1;
  f.m = N; f.n = F; f.k = d;
  f.alpha = 1.0f; f.beta = 1.0f;
  f.a = x; f.lda = d;
  f.b = esmt_weight(m, w->fc1_w); f.ldb = d;
  f.c = out; f.ldc = F;
  f.epilogue = ESMTB_EPI_GELU;
  f.pre = pre;
  ESMT_OP(m, gemm, f, "forward: FFN up");
  return ESMT_OK;
}

esmt_status esmt_lora_backward(esmt_model *m, int l, int t, const void *x, const void *dy,
                               int lddy, void *dx) {
  const esmt_lora_offsets *o = &m->layout.lora[l];
  if (!o->a[t]) return ESMT_OK;
  const int N = m->B * m->T, r = m->cfg.lora_rank;
  int in, out;
  esmt_lora_target(&m->cfg, t, &in, &out);
  const void *u = m->lora->u[l * ESMT_LORA_TARGETS + t];
  void *du = m->lora->du;
  const float s = scaling(m);
  esmt_status st;
  /* dB [out, r] += s dy^T u */
  if ((st = gemm(m, 1, 0, out, r, N, s, dy, lddy, u, r, 1.0f, esmt_grad(m, o->b[t]), r, 1,
                 "backward: LoRA dB")))
    return st;
  /* du [N, r] = s dy B */
  if ((st = gemm(m, 0, 0, N, r, out, s, dy, lddy, esmt_weight(m, o->b[t]), r, 0.0f, du, r, 0,
                 "backward: LoRA du")))
    return st;
  /* dA [r, in] += du^T D(x): the forward's mask, redrawn */
  const void *xa;
  if ((st = adapter_input(m, l, t, x, in, &xa))) return st;
  if ((st = gemm(m, 1, 0, r, in, N, 1.0f, du, r, xa, in, 1.0f, esmt_grad(m, o->a[t]), in, 1,
                 "backward: LoRA dA")))
    return st;
  /* dx [N, in] += D'(du A): the mask and scale again on the way back */
  if (!m->lora_dropout_on)
    return gemm(m, 0, 0, N, in, r, 1.0f, du, r, esmt_weight(m, o->a[t]), in, 1.0f, dx, in, 0,
                "backward: LoRA dx");
  void *tmp = m->lora->dxd;
  if ((st = gemm(m, 0, 0, N, in, r, 1.0f, du, r, esmt_weight(m, o->a[t]), in, 0.0f, tmp, in, 0,
                 "backward: LoRA dx")))
    return st;
  return apply_dropout(m, l, t, tmp, dx, in, 1, "backward: LoRA dropout");
}

/* Element offset of the weight that layer l's target t adapts. */
static uint64_t base_weight(const esmt_model *m, int l, int t) {
  const esmt_layer_offsets *o = &m->layout.layers[l];
  const uint64_t dd = (uint64_t)m->d * (uint64_t)m->d;
  switch (t) {
  case 0: case 1: case 2: return o->qkv_w + (uint64_t)t * dd; /* query, key, value */
  case 3: return o->out_w;
  case ESMT_LORA_T_FFN_DOWN: return o->fc2_w;
  default: return o->fc1_w;
  }
}

void esmt_lora_merge_host(const esmt_model *m, float *host) {
  const int r = m->cfg.lora_rank;
  const double s = scaling(m);
  for (int l = 0; m->layout.lora && l < m->L; l++)
    for (int t = 0; t < ESMT_LORA_TARGETS; t++) {
      const esmt_lora_offsets *o = &m->layout.lora[l];
      if (!o->a[t]) continue;
      int in, out;
      esmt_lora_target(&m->cfg, t, &in, &out);
      const float *A = host + o->a[t], *B = host + o->b[t];
      float *W = host + base_weight(m, l, t);
      for (int i = 0; i < out; i++)
        for (int j = 0; j < in; j++) {
          double acc = 0.0;
          for (int k = 0; k < r; k++) acc += (double)B[(uint64_t)i * r + k] * A[(uint64_t)k * in + j];
          W[(uint64_t)i * in + j] = (float)(W[(uint64_t)i * in + j] + s * acc);
        }
    }
}

/* The merge when the frozen weights' fp32 master is in host memory (a half
 * compute dtype, memory/frozen_master.c): on a host image of the master,
 * B zeroed after, then written back with its half copy. */
static esmt_status merge_on_host(esmt_model *m) {
  const char *fn = "esmt_model_lora_merge";
  const uint64_t n = m->layout.total;
  float *w = malloc(n * sizeof *w);
  if (!w)
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: no host memory for the fp32 weights "
                     "(%.1f MiB)", fn, (double)(n * sizeof *w) / 1048576.0);
  esmt_status st = esmt_param_read_host(&m->mem, w, 0, n);
  if (!st) {
    esmt_lora_merge_host(m, w);
    for (int l = 0; l < m->L; l++)
      for (int t = 0; t < ESMT_LORA_TARGETS; t++) {
        const esmt_lora_offsets *o = &m->layout.lora[l];
        int in, out;
        esmt_lora_target(&m->cfg, t, &in, &out);
        if (o->a[t]) memset(w + o->b[t], 0, (size_t)out * (size_t)m->cfg.lora_rank * sizeof *w);
      }
    st = esmt_param_master_upload(&m->mem, w);
  }
  free(w);
  m->have_forward = 0; /* the weights changed */
  return st ? esmt_fail_prefix(st, "%s: ", fn) : ESMT_OK;
}

static esmt_status merge_unguarded(esmt_model *m) {
  const char *fn = "esmt_model_lora_merge";
  ESMT_CHECK_ARG(m, fn, "model is NULL");
  if (!m->layout.lora)
    return esmt_fail(ESMT_ERR_STATE, "%s: the model has no LoRA adapters (lora_rank 0)", fn);
  if (m->mem.frozen_host) return merge_on_host(m);
  const int r = m->cfg.lora_rank;
  float *w = m->mem.master; /* in fp32 the whole master is on the device */
  esmt_status st = ESMT_OK;
  for (int l = 0; l < m->L && !st; l++)
    for (int t = 0; t < ESMT_LORA_TARGETS && !st; t++) {
      const esmt_lora_offsets *o = &m->layout.lora[l];
      if (!o->a[t]) continue;
      int in, out;
      esmt_lora_target(&m->cfg, t, &in, &out);
      /* W [out, in] += s B [out, r] A [r, in], in fp32 on the master */
      esmtb_gemm_args g = {0};
      g.struct_size = sizeof g;
      g.dtype = ESMTB_F32;
      g.m = out; g.n = in; g.k = r;
      g.alpha = scaling(m); g.beta = 1.0f;
      g.a = w + o->b[t]; g.lda = r;
      g.b = w + o->a[t]; g.ldb = in;
      g.c = w + base_weight(m, l, t); g.ldc = in;
      esmtb_status bs = m->ops->gemm(m->dev, &g, m->stream);
      if (!bs) bs = m->ops->memset_async(m->dev, w + o->b[t], 0,
                                         (size_t)out * (size_t)r * sizeof(float), m->stream);
      if (bs) st = esmt_fail_prefix((esmt_status)bs, "%s: layer %d %s: ", fn, l,
                                    esmt_lora_target(&m->cfg, t, &in, &out));
    }
  if (!st) st = esmt_model_sync_lowp(m, 0, m->layout.total);
  m->have_forward = 0; /* the weights changed */
  return st;
}

esmt_status esmt_model_lora_merge(esmt_model *model) {
  if (!model) return merge_unguarded(model); /* its message */
  esmt_status st = esmt_model_enter(model, "esmt_model_lora_merge");
  if (st) return st;
  st = merge_unguarded(model);
  esmt_model_leave(model);
  return st;
}
