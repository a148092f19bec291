/* SPDX-License-Identifier: MIT */
/* The flat parameter layout and its HF-name table. Layer tensors are laid
 * out so that the q/k/v weights (and biases) are one contiguous [3d, d]
 * matrix; the names still address each of them separately. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct builder {
  esmt_layout *l;
  int cap;
  esmt_status st;
} builder;

static uint64_t add(builder *b, const char *name, int ndim, int64_t s0, int64_t s1) {
  esmt_layout *l = b->l;
  uint64_t off = l->total;
  if (b->st) return off;
  if (l->count == b->cap) {
    int cap = b->cap ? 2 * b->cap : 64;
    esmt_tensor_info *t = realloc(l->tensors, (size_t)cap * sizeof *t);
    if (!t) {
      b->st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "model layout: out of memory");
      return off;
    }
    l->tensors = t;
    b->cap = cap;
  }
  esmt_tensor_info *t = &l->tensors[l->count++];
  memset(t, 0, sizeof *t);
  t->struct_size = sizeof *t;
  snprintf(t->name, sizeof t->name, "%s", name);
  t->ndim = ndim;
  t->shape[0] = s0;
  t->shape[1] = ndim > 1 ? s1 : 0;
  t->numel = (uint64_t)s0 * (uint64_t)(ndim > 1 ? s1 : 1);
  t->offset = off;
  l->total += t->numel;
  return off;
}

int esmt_norm_tensor_count(const esmt_model_config *cfg) { return 4 * cfg->num_layers + 4; }

/* The LayerNorm tensors' offsets, in the order esmt_layout documents. */
static esmt_status norm_table(const esmt_model_config *c, esmt_layout *l) {
  l->n_norm = esmt_norm_tensor_count(c);
  l->norm_offs = malloc((size_t)l->n_norm * sizeof *l->norm_offs);
  if (!l->norm_offs) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "model layout: out of memory");
  int k = 0;
  for (int i = 0; i < c->num_layers; i++) {
    l->norm_offs[k++] = l->layers[i].ln1_w;
    l->norm_offs[k++] = l->layers[i].ln1_b;
    l->norm_offs[k++] = l->layers[i].ln2_w;
    l->norm_offs[k++] = l->layers[i].ln2_b;
  }
  l->norm_offs[k++] = l->lnf_w;
  l->norm_offs[k++] = l->lnf_b;
  l->norm_offs[k++] = l->head_ln_w;
  l->norm_offs[k++] = l->head_ln_b;
  return ESMT_OK;
}

/* The parts' bounds: the embedding, each layer (its tensors are adjacent),
 * the head. */
static esmt_status part_table(const esmt_model_config *c, esmt_layout *l) {
  l->n_parts = c->num_layers + 2;
  l->part_bounds = malloc((size_t)(l->n_parts + 1) * sizeof *l->part_bounds);
  if (!l->part_bounds) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "model layout: out of memory");
  l->part_bounds[0] = l->embed;
  for (int i = 0; i < c->num_layers; i++) l->part_bounds[1 + i] = l->layers[i].ln1_w;
  l->part_bounds[c->num_layers + 1] = l->lnf_w;
  l->part_bounds[c->num_layers + 2] = l->total;
  return ESMT_OK;
}

esmt_status esmt_layout_build(const esmt_model_config *c, esmt_layout *l) {
  memset(l, 0, sizeof *l);
  builder b = {l, 0, ESMT_OK};
  const int64_t d = c->hidden_size, V = c->vocab_size;
  const int64_t F = c->ffn_size ? c->ffn_size : 4 * d;
  l->layers = calloc((size_t)c->num_layers, sizeof *l->layers);
  if (!l->layers) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "model layout: out of memory");
  l->embed = add(&b, "esm.embeddings.word_embeddings.weight", 2, V, d);
  char n[96];
  for (int i = 0; i < c->num_layers; i++) {
    esmt_layer_offsets *o = &l->layers[i];
#define NAME(fmt) (snprintf(n, sizeof n, "esm.encoder.layer.%d." fmt, i), n)
    o->ln1_w = add(&b, NAME("attention.LayerNorm.weight"), 1, d, 0);
    o->ln1_b = add(&b, NAME("attention.LayerNorm.bias"), 1, d, 0);
    o->qkv_w = add(&b, NAME("attention.self.query.weight"), 2, d, d);
    add(&b, NAME("attention.self.key.weight"), 2, d, d);
    add(&b, NAME("attention.self.value.weight"), 2, d, d);
    o->qkv_b = add(&b, NAME("attention.self.query.bias"), 1, d, 0);
    add(&b, NAME("attention.self.key.bias"), 1, d, 0);
    add(&b, NAME("attention.self.value.bias"), 1, d, 0);
    o->out_w = add(&b, NAME("attention.output.dense.weight"), 2, d, d);
    o->out_b = add(&b, NAME("attention.output.dense.bias"), 1, d, 0);
    o->ln2_w = add(&b, NAME("LayerNorm.weight"), 1, d, 0);
    o->ln2_b = add(&b, NAME("LayerNorm.bias"), 1, d, 0);
    o->fc1_w = add(&b, NAME("intermediate.dense.weight"), 2, F, d);
    o->fc1_b = add(&b, NAME("intermediate.dense.bias"), 1, F, 0);
    o->fc2_w = add(&b, NAME("output.dense.weight"), 2, d, F);
    o->fc2_b = add(&b, NAME("output.dense.bias"), 1, d, 0);
#undef NAME
  }
  l->lnf_w = add(&b, "esm.encoder.emb_layer_norm_after.weight", 1, d, 0);
  l->lnf_b = add(&b, "esm.encoder.emb_layer_norm_after.bias", 1, d, 0);
  l->head_w = add(&b, "lm_head.dense.weight", 2, d, d);
  l->head_b = add(&b, "lm_head.dense.bias", 1, d, 0);
  l->head_ln_w = add(&b, "lm_head.layer_norm.weight", 1, d, 0);
  l->head_ln_b = add(&b, "lm_head.layer_norm.bias", 1, d, 0);
  l->out_b = add(&b, "lm_head.bias", 1, V, 0);
  /* The task head, named as transformers' EsmForSequenceClassification /
   * EsmForTokenClassification so that checkpoints cross over. */
  l->cls_lo = l->total;
  const int64_t C = c->num_labels;
  if (c->head == ESMT_HEAD_RESIDUE_CLASS) {
    l->cls_out_w = add(&b, "classifier.weight", 2, C, d);
    l->cls_out_b = add(&b, "classifier.bias", 1, C, 0);
  } else if (c->head != ESMT_HEAD_NONE) {
    l->cls_dense_w = add(&b, "classifier.dense.weight", 2, d, d);
    l->cls_dense_b = add(&b, "classifier.dense.bias", 1, d, 0);
    l->cls_out_w = add(&b, "classifier.out_proj.weight", 2, C, d);
    l->cls_out_b = add(&b, "classifier.out_proj.bias", 1, C, 0);
  }
  /* LoRA's adapters, named as a peft adapter file names them */
  if (c->lora_rank > 0 && !b.st) {
    l->lora = calloc((size_t)c->num_layers, sizeof *l->lora);
    if (!l->lora) b.st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "model layout: out of memory");
  }
  for (int i = 0; l->lora && i < c->num_layers; i++)
    for (int t = 0; t < ESMT_LORA_TARGETS; t++) {
      if (!(c->lora_targets >> t & 1)) continue;
      int in, out;
      const char *mod = esmt_lora_target(c, t, &in, &out);
      snprintf(n, sizeof n, "base_model.model.esm.encoder.layer.%d.%s.lora_A.weight", i, mod);
      l->lora[i].a[t] = add(&b, n, 2, c->lora_rank, in);
      snprintf(n, sizeof n, "base_model.model.esm.encoder.layer.%d.%s.lora_B.weight", i, mod);
      l->lora[i].b[t] = add(&b, n, 2, out, c->lora_rank);
    }
  if (!b.st) b.st = norm_table(c, l);
  if (!b.st) b.st = part_table(c, l);
  if (b.st) esmt_layout_free(l);
  return b.st;
}

void esmt_layout_free(esmt_layout *l) {
  if (!l) return;
  free(l->tensors);
  free(l->layers);
  free(l->norm_offs);
  free(l->part_bounds);
  free(l->lora);
  memset(l, 0, sizeof *l);
}
