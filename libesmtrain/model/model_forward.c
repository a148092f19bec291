/* SPDX-License-Identifier: MIT */
/* The ESM-2 forward pass, top to bottom, as backend op calls
 * (docs/esm2.md). Inputs are already on the device in
 * m->act (tokens, labels, seq_len). */
#include <math.h>

#include "esmtrain/backend.h"
#include "attention_maps.h"
#include "model.h"
#include "param_layer.h"

/* Activations and Linear weights/biases are in the compute dtype m->dtype
 * (weights from the half copy when there is one: esmt_weight); LayerNorm
 * weights are the fp32 masters (the ABI's w/b are fp32). */
#define W32(off) esmt_norm_param(m, (off))

/* The linear maps (model_linear.c), GELU fused when gelu_pre is given. */
static esmt_status linear(esmt_model *m, const void *x, uint64_t w, uint64_t b, void *y,
                          int N, int in, int out, void *gelu_pre, const char *where) {
  return esmt_model_linear_gelu(m, x, w, b, y, N, in, out, gelu_pre, where);
}

static esmt_status layernorm(esmt_model *m, const void *x, uint64_t w, uint64_t b, void *out,
                             float *mean, float *rstd, int N, const char *where) {
  esmtb_layernorm_args a = {0};
  a.struct_size = sizeof a;
  a.dtype = m->dtype;
  a.N = N; a.d = m->d;
  a.eps = m->cfg.layer_norm_eps;
  a.x = x; a.w = W32(w); a.b = W32(b);
  a.out = out; a.mean = mean; a.rstd = rstd;
  ESMT_OP(m, layernorm_forward, a, where);
  return ESMT_OK;
}

static esmt_status residual_add(esmt_model *m, const void *a, const void *b, void *y,
                                uint64_t n, const char *where) {
  esmtb_add_args s = {sizeof s, m->dtype, n, a, b, y};
  ESMT_OP(m, add, s, where);
  return ESMT_OK;
}

esmtb_embed_args esmt_embed_args(const esmt_model *m) {
  esmtb_embed_args e = {0};
  e.struct_size = sizeof e;
  e.dtype = m->dtype;
  e.B = m->B; e.T = m->T; e.d = m->d;
  e.tokens = m->act.tokens;
  e.E = esmt_weight(m, m->layout.embed);
  e.row_scale = m->act.row_scale;
  e.mask_id = ESMT_TOKEN_MASK;
  e.pad_id = ESMT_TOKEN_PAD;
  e.mask_ratio_train = m->cfg.mask_ratio_train;
  if (m->packed.nseg > 0) { /* per-segment scales (ABI 1.3) */
    e.segs = (esmtb_segments){m->packed.nseg, m->packed.max_len, m->packed.start, m->packed.len};
    e.row_scale = m->packed.scale;
  }
  return e;
}

esmtb_attention_args esmt_attention_args(const esmt_model *m, int l) {
  esmtb_attention_args at = {0};
  at.struct_size = sizeof at;
  at.dtype = m->dtype;
  at.B = m->B; at.T = m->T; at.H = m->H; at.hd = m->hd;
  at.scale = (float)(1.0 / sqrt((double)m->hd)); /* applied to q before rotary */
  at.seq_len = m->act.seq_len;
  at.rope_cos = m->rope_cos; at.rope_sin = m->rope_sin;
  at.qkv = m->act.qkv[l];
  at.out = m->act.attn[l];
  at.lse = m->act.lse[l];
  at.nondeterministic = m->nondeterministic; /* read by backward only */
  if (m->packed.nseg > 0)
    at.segs = (esmtb_segments){m->packed.nseg, m->packed.max_len, m->packed.start, m->packed.len};
  return at;
}

esmt_status esmt_model_need_weights(esmt_model *m, int l) {
  const esmt_layout *ly = &m->layout;
  const uint64_t *b = ly->part_bounds;
  esmt_param_memory *p = &m->mem;
  if (l == ESMT_PART_EMBEDDING) return p->layer->weights_needed(p, b[0], b[1]);
  if (l == ESMT_PART_HEAD) {
    esmt_status st = p->layer->weights_needed(p, b[ly->n_parts - 1], b[ly->n_parts]);
    return st ? st : p->layer->weights_needed(p, b[0], b[1]); /* the tied decoder */
  }
  return p->layer->weights_needed(p, b[l + 1], b[l + 2]);
}

/* LoRA's term on layer l's map to target t, when the model has adapters. */
static esmt_status lora(esmt_model *m, int l, int t, const void *x, void *y, int ldy) {
  return m->layout.lora ? esmt_lora_forward(m, l, t, x, y, ldy) : ESMT_OK;
}

esmt_status esmt_layer_forward(esmt_model *m, int l, int full) {
  esmt_activations *a = &m->act;
  const int N = m->B * m->T, d = m->d, F = m->F;
  const uint64_t nd = (uint64_t)N * (uint64_t)d;
  const esmt_layer_offsets *o = &m->layout.layers[l];
  esmt_status st = esmt_model_need_weights(m, l);
  if (st) return st;
  /* Self-attention block (pre-LN). */
  if ((st = layernorm(m, a->res[l], o->ln1_w, o->ln1_b, a->ln1[l], a->ln1_mean[l],
                      a->ln1_rstd[l], N, "forward: attention LayerNorm")))
    return st;
  if ((st = linear(m, a->ln1[l], o->qkv_w, o->qkv_b, a->qkv[l], N, d, 3 * d, NULL,
                   "forward: q/k/v projection")))
    return st;
  for (int t = 0; t < 3; t++) /* query, key, value: column blocks of qkv */
    if ((st = lora(m, l, t, a->ln1[l], (char *)a->qkv[l] + (size_t)t * d * m->esize, 3 * d)))
      return st;
  esmtb_attention_args at = esmt_attention_args(m, l);
  ESMT_OP(m, attention_forward, at, "forward: attention");
  if ((st = linear(m, a->attn[l], o->out_w, o->out_b, a->tmp, N, d, d, NULL,
                   "forward: attention output")))
    return st;
  if ((st = lora(m, l, 3, a->attn[l], a->tmp, d))) return st;
  if ((st = residual_add(m, a->res[l], a->tmp, a->res_mid[l], nd, "forward: residual")))
    return st;
  /* Feed-forward block (pre-LN, erf GELU). */
  if ((st = layernorm(m, a->res_mid[l], o->ln2_w, o->ln2_b, a->ln2[l], a->ln2_mean[l],
                      a->ln2_rstd[l], N, "forward: FFN LayerNorm")))
    return st;
  if (m->layout.lora && m->layout.lora[l].a[ESMT_LORA_T_FFN_UP])
    st = esmt_lora_ffn_up(m, l, a->ln2[l], a->fc1_out[l], a->fc1_pre[l]); /* adapter inside GELU */
  else
    st = linear(m, a->ln2[l], o->fc1_w, o->fc1_b, a->fc1_out[l], N, d, F, a->fc1_pre[l],
                "forward: FFN up");
  if (st) return st;
  if (!full) return ESMT_OK; /* backward needs nothing past the GELU */
  if ((st = linear(m, a->fc1_out[l], o->fc2_w, o->fc2_b, a->tmp, N, F, d, NULL,
                   "forward: FFN down")))
    return st;
  if ((st = lora(m, l, ESMT_LORA_T_FFN_DOWN, a->fc1_out[l], a->tmp, d))) return st;
  return residual_add(m, a->res_mid[l], a->tmp, a->res[l + 1], nd, "forward: residual");
}

esmt_status esmt_model_run_forward(esmt_model *m) {
  esmt_activations *a = &m->act;
  const int B = m->B, T = m->T, N = B * T, d = m->d, V = m->V;
  esmt_status st;

  /* Embedding with token dropout. */
  if ((st = esmt_model_need_weights(m, ESMT_PART_EMBEDDING))) return st;
  esmtb_embed_args e = esmt_embed_args(m);
  e.out = a->res[0];
  ESMT_OP(m, embed_forward, e, "forward: embedding");

  /* The layers; under recompute their intermediates share one set, left
   * holding the last layer's (backward starts there). */
  for (int l = 0; l < m->L; l++)
    if ((st = esmt_layer_forward(m, l, 1))) return st;

  /* Final LayerNorm and the LM head: LN(gelu(x Wd^T + bd)) E^T + b. */
  const esmt_layout *ly = &m->layout;
  if ((st = esmt_model_need_weights(m, ESMT_PART_HEAD))) return st;
  if ((st = layernorm(m, a->res[m->L], ly->lnf_w, ly->lnf_b, a->lnf, a->lnf_mean, a->lnf_rstd, N,
                      "forward: final LayerNorm")))
    return st;
  if (m->cfg.head != ESMT_HEAD_NONE) return esmt_head_run_forward(m); /* a task head's loss */
  if ((st = linear(m, a->lnf, ly->head_w, ly->head_b, a->head_act, N, d, d, a->head_pre,
                   "forward: LM head dense")))
    return st;
  if ((st = layernorm(m, a->head_act, ly->head_ln_w, ly->head_ln_b, a->head_ln, a->head_mean,
                      a->head_rstd, N, "forward: LM head LayerNorm")))
    return st;
  if ((st = linear(m, a->head_ln, ly->embed, ly->out_b, a->logits, N, d, V, NULL,
                   "forward: LM head decoder")))
    return st;

  /* Cross-entropy over the selected positions; dlogits for backward are
   * produced here already, scaled by 1/normalizer. */
  esmtb_status mst = m->ops->memset_async(m->dev, a->loss_sum, 0, sizeof(float), m->stream);
  if (mst) return esmt_fail_prefix((esmt_status)mst, "forward: ");
  esmtb_xent_args x = {0};
  x.struct_size = sizeof x;
  x.dtype = m->dtype; /* logits/dlogits; the loss sum is fp32 */
  x.N = N; x.V = V;
  x.logits = a->logits;
  x.labels = a->labels;
  x.loss_sum = a->loss_sum;
  x.dlogits = a->dlogits;
  x.grad_scale = m->normalizer > 0 ? (float)(1.0 / m->normalizer) : 0.0f;
  ESMT_OP(m, xent, x, "forward: cross-entropy");
  return ESMT_OK;
}

/* Inference (arena carved in mode 2): the embedding, the layers up to the
 * deepest one asked for (all of them with logits), the final LayerNorm
 * when layer L is asked for or logits are wanted, and the LM head for
 * logits. `capture` receives each representation whose bit is set in
 * `layers` (fair-esm's numbering: 0 the embedding output, l the output of
 * block l, L after the final LayerNorm) as soon as it exists: the two
 * residual buffers are reused, so later layers overwrite it. With `maps`
 * every layer runs and its attention probabilities are taken right after
 * its forward, while its q/k/v are still there. */
esmt_status esmt_model_run_infer(esmt_model *m, uint64_t layers, int logits,
                                 esmt_status (*capture)(esmt_model *m, int layer,
                                                        const void *rep, void *user),
                                 void *user, esmt_attention_maps *maps) {
  esmt_activations *a = &m->act;
  const int N = m->B * m->T, d = m->d, V = m->V, L = m->L;
  int deepest = 0;
  for (int l = 0; l <= L; l++)
    if (layers >> l & 1) deepest = l;
  const int upto = logits || maps ? L : deepest;
  esmt_status st = esmt_model_need_weights(m, ESMT_PART_EMBEDDING);
  if (st) return st;
  esmtb_embed_args e = esmt_embed_args(m);
  e.out = a->res[0];
  ESMT_OP(m, embed_forward, e, "inference: embedding");
  if ((layers & 1) && (st = capture(m, 0, a->res[0], user))) return st;
  for (int l = 0; l < upto; l++) {
    if ((st = esmt_layer_forward(m, l, 1))) return st;
    if (maps && (st = esmt_attention_maps_layer(m, l, maps))) return st;
    if (l + 1 < L && (layers >> (l + 1) & 1) && (st = capture(m, l + 1, a->res[l + 1], user)))
      return st;
  }
  const int want_final = (int)(layers >> L & 1);
  if (!want_final && !logits) return ESMT_OK;
  const esmt_layout *ly = &m->layout;
  if ((st = esmt_model_need_weights(m, ESMT_PART_HEAD))) return st;
  if ((st = layernorm(m, a->res[L], ly->lnf_w, ly->lnf_b, a->lnf, a->lnf_mean, a->lnf_rstd, N,
                      "inference: final LayerNorm")))
    return st;
  if (want_final && (st = capture(m, L, a->lnf, user))) return st;
  if (!logits) return ESMT_OK;
  if ((st = linear(m, a->lnf, ly->head_w, ly->head_b, a->head_act, N, d, d, a->head_pre,
                   "inference: LM head dense")))
    return st;
  if ((st = layernorm(m, a->head_act, ly->head_ln_w, ly->head_ln_b, a->head_ln, a->head_mean,
                      a->head_rstd, N, "inference: LM head LayerNorm")))
    return st;
  return linear(m, a->head_ln, ly->embed, ly->out_b, a->logits, N, d, V, NULL,
                "inference: LM head decoder");
}
