/* SPDX-License-Identifier: MIT */
/* The ESM-2 backward pass, the forward in reverse. Gradients ADD into
 * m->mem.grads (so micro-batches accumulate); d_resid carries the gradient of
 * the residual stream from the head down to the embedding. */
#include "esmtrain/backend.h"
#include "model.h"
#include "param_layer.h"

/* Activations and their gradients are in the compute dtype; every
 * parameter gradient accumulates in fp32 (m->mem.grads), LayerNorm reads the
 * fp32 master w/b, Linear weights come from esmt_weight. */
#define W32(off) esmt_norm_param(m, (off))
#define G(off) esmt_grad(m, (off))

/* The encoder's maps: frozen under LoRA (m->base_frozen). */
static esmt_status linear_backward(esmt_model *m, const void *x, uint64_t w, uint64_t b,
                                   const void *dy, void *dx, int N, int in, int out,
                                   const char *where) {
  return esmt_model_linear_backward_with(m, x, w, b, dy, dx, N, in, out, m->base_frozen, where);
}

static esmt_status layernorm_backward(esmt_model *m, const void *x, uint64_t w, uint64_t b,
                                      const float *mean, const float *rstd, const void *dout,
                                      void *dx, int accumulate, int N, const char *where) {
  esmtb_layernorm_args a = {0};
  a.struct_size = sizeof a;
  a.dtype = m->dtype;
  a.N = N; a.d = m->d;
  a.eps = m->cfg.layer_norm_eps;
  a.x = x; a.w = W32(w); a.b = W32(b);
  a.mean = (float *)mean; a.rstd = (float *)rstd;
  a.dout = dout; a.dx = dx; a.accumulate_dx = accumulate;
  a.dw = G(w); a.db = G(b);
  if (m->base_frozen) { /* LoRA: the op accumulates dw/db; they go where nothing reads them */
    a.dw = esmt_lora_discard(m);
    a.db = a.dw + m->d;
  }
  ESMT_OP(m, layernorm_backward, a, where);
  return ESMT_OK;
}

/* LoRA's gradients on layer l's map to target t, when the model has adapters. */
static esmt_status lora(esmt_model *m, int l, int t, const void *x, const void *dy, int lddy,
                        void *dx) {
  return m->layout.lora ? esmt_lora_backward(m, l, t, x, dy, lddy, dx) : ESMT_OK;
}

static esmt_status gelu_backward(esmt_model *m, const void *pre, void *d, uint64_t n,
                                 const char *where) {
  esmtb_gelu_backward_args a = {sizeof a, m->dtype, n, pre, d, d};
  ESMT_OP(m, gelu_backward, a, where);
  return ESMT_OK;
}

/* Tell the data-parallel hook that gradients from `from` on are final. The
 * queued ops must have finished writing them first (or, for an async hook,
 * be ordered before its work by the hook itself). */
static esmt_status grads_ready(esmt_model *m, uint64_t from) {
  /* The parameter memory first (offload queues this bucket's D2H copy
   * behind an event: no host wait). */
  esmt_status ost = m->mem.layer->grads_ready(&m->mem, from);
  if (ost) return ost;
  if (!m->grads_hook.fn) return ESMT_OK;
  esmtb_status st = m->grads_hook.async ? 0 : m->ops->stream_sync(m->dev, m->stream);
  if (st) return esmt_fail_prefix((esmt_status)st, "backward: stream sync: ");
  m->grads_hook.fn(m->grads_hook.user, from);
  return ESMT_OK;
}

/* The LM head: decoder (tied E), LayerNorm, GELU, dense; d lnf into d_narrow. */
static esmt_status lm_head_backward(esmt_model *m) {
  esmt_activations *a = &m->act;
  const esmt_layout *ly = &m->layout;
  const int N = m->B * m->T, d = m->d, V = m->V;
  const uint64_t nd = (uint64_t)N * (uint64_t)d;
  esmt_status st;
  if ((st = linear_backward(m, a->head_ln, ly->embed, ly->out_b, a->dlogits, a->d_narrow, N, d,
                            V, "backward: LM head decoder")))
    return st;
  if ((st = layernorm_backward(m, a->head_act, ly->head_ln_w, ly->head_ln_b, a->head_mean,
                               a->head_rstd, a->d_narrow, a->tmp, 0, N,
                               "backward: LM head LayerNorm")))
    return st;
  if ((st = gelu_backward(m, a->head_pre, a->tmp, nd, "backward: LM head GELU"))) return st;
  return linear_backward(m, a->lnf, ly->head_w, ly->head_b, a->tmp, a->d_narrow, N, d, d,
                         "backward: LM head dense");
}

esmt_status esmt_model_run_backward(esmt_model *m) {
  esmt_activations *a = &m->act;
  const esmt_layout *ly = &m->layout;
  const int B = m->B, T = m->T, N = B * T, d = m->d, F = m->F;
  esmt_status st;

  /* The LM head, or a task head; either leaves d lnf in d_narrow. */
  if ((st = esmt_model_need_weights(m, ESMT_PART_HEAD))) return st;
  if ((st = m->cfg.head != ESMT_HEAD_NONE ? esmt_head_run_backward(m) : lm_head_backward(m)))
    return st;
  const int from_layer = esmt_model_backward_from_layer(m);
  if (from_layer > m->L) return grads_ready(m, 0); /* the encoder is frozen or held */
  if ((st = layernorm_backward(m, a->res[m->L], ly->lnf_w, ly->lnf_b, a->lnf_mean, a->lnf_rstd,
                               a->d_narrow, a->d_resid, 0, N, "backward: final LayerNorm")))
    return st;
  if ((st = grads_ready(m, ly->lnf_w))) return st;

  /* Layers below train_from_layer are frozen and nothing below them
   * trains: backward stops there. */
  for (int l = m->L - 1; l >= from_layer; l--) {
    const esmt_layer_offsets *o = &ly->layers[l];
    /* Recompute: refill the shared set with layer l's intermediates from
     * res[l] (the forward left the last layer's there already). */
    if (m->act_recompute && l < m->L - 1 && (st = esmt_layer_forward(m, l, 0))) return st;
    if ((st = esmt_model_need_weights(m, l))) return st; /* (recompute asked already) */
    /* FFN block: d_resid is d res[l+1] on entry and d res_mid[l] after. */
    if ((st = linear_backward(m, a->fc1_out[l], o->fc2_w, o->fc2_b, a->d_resid, a->d_wide, N, F,
                              d, "backward: FFN down")))
      return st;
    if ((st = lora(m, l, ESMT_LORA_T_FFN_DOWN, a->fc1_out[l], a->d_resid, d, a->d_wide)))
      return st;
    if ((st = gelu_backward(m, a->fc1_pre[l], a->d_wide, (uint64_t)N * F, "backward: FFN GELU")))
      return st;
    if ((st = linear_backward(m, a->ln2[l], o->fc1_w, o->fc1_b, a->d_wide, a->d_narrow, N, d, F,
                              "backward: FFN up")))
      return st;
    if ((st = lora(m, l, ESMT_LORA_T_FFN_UP, a->ln2[l], a->d_wide, F, a->d_narrow))) return st;
    if ((st = layernorm_backward(m, a->res_mid[l], o->ln2_w, o->ln2_b, a->ln2_mean[l],
                                 a->ln2_rstd[l], a->d_narrow, a->d_resid, 1, N,
                                 "backward: FFN LayerNorm")))
      return st;
    /* Attention block: d_resid becomes d res[l]. */
    if ((st = linear_backward(m, a->attn[l], o->out_w, o->out_b, a->d_resid, a->d_narrow, N, d,
                              d, "backward: attention output")))
      return st;
    if ((st = lora(m, l, 3, a->attn[l], a->d_resid, d, a->d_narrow))) return st;
    esmtb_attention_args at = esmt_attention_args(m, l);
    at.dout = a->d_narrow;
    at.dqkv = a->d_wide;
    ESMT_OP(m, attention_backward, at, "backward: attention");
    if ((st = linear_backward(m, a->ln1[l], o->qkv_w, o->qkv_b, a->d_wide, a->d_narrow, N, d,
                              3 * d, "backward: q/k/v projection")))
      return st;
    for (int t = 0; t < 3; t++) /* query, key, value: column blocks of d_wide */
      if ((st = lora(m, l, t, a->ln1[l], (char *)a->d_wide + (size_t)t * d * m->esize, 3 * d,
                     a->d_narrow)))
        return st;
    if ((st = layernorm_backward(m, a->res[l], o->ln1_w, o->ln1_b, a->ln1_mean[l],
                                 a->ln1_rstd[l], a->d_narrow, a->d_resid, 1, N,
                                 "backward: attention LayerNorm")))
      return st;
    if ((st = grads_ready(m, o->ln1_w))) return st;
  }

  if (m->train_lo > 0) return grads_ready(m, 0); /* the embedding is frozen */
  /* Embedding lookup (the second path into the tied E). */
  if ((st = esmt_model_need_weights(m, ESMT_PART_EMBEDDING))) return st;
  esmtb_embed_args e = esmt_embed_args(m);
  e.dout = a->d_resid;
  e.dE = G(ly->embed);
  ESMT_OP(m, embed_backward, e, "backward: embedding");
  return grads_ready(m, 0);
}
