/* SPDX-License-Identifier: MIT */
/* esmt_model_export_hf: a transformers-loadable directory: EsmForMaskedLM,
 * or EsmForSequenceClassification / EsmForTokenClassification for a model
 * with a task head; LoRA adapters merged into the weights. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "carried_tensors.h"
#include "checkpoint.h"
#include "fs_util.h"
#include "hf_export.h"
#include "model_record.h"
#include "model.h"
#include "out_dir.h"
#include "safetensors.h"

#define PATH_CAP 4096

esmt_status esmt_hf_write_text(const char *dir, const char *name, const char *text) {
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return esmt_fail(ESMT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  esmt_status st = esmt_write_all(fd, text, strlen(text), path);
  if (!st && fsync(fd) != 0) st = esmt_fail(ESMT_ERR_IO, "%s: fsync: %s", path, strerror(errno));
  close(fd);
  return st;
}

esmt_status esmt_hf_write_json(const char *dir, const char *name, json_t *j) {
  if (!j) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "export: %s: out of memory", name);
  char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(j);
  if (!text) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "export: out of memory");
  esmt_status st = esmt_hf_write_text(dir, name, text);
  free(text);
  return st;
}

static const char *architecture(const esmt_model *m) {
  switch (m->cfg.head) {
  case ESMT_HEAD_NONE: return "EsmForMaskedLM";
  case ESMT_HEAD_RESIDUE_CLASS: return "EsmForTokenClassification";
  default: return "EsmForSequenceClassification";
  }
}

/* transformers' names for the head: num_labels through id2label/label2id
 * (the model's output names, esmt_model_label_name, else transformers'
 * default LABEL_i) and a sequence head's problem_type, which picks the loss
 * EsmForSequenceClassification computes. */
static int add_head_fields(const esmt_model *m, json_t *c) {
  if (m->cfg.head == ESMT_HEAD_NONE) return 0;
  json_t *id2label = json_object(), *label2id = json_object();
  int bad = !id2label || !label2id;
  for (int i = 0; i < m->cfg.num_labels && !bad; i++) {
    char id[16], fallback[32];
    snprintf(id, sizeof id, "%d", i);
    snprintf(fallback, sizeof fallback, "LABEL_%d", i);
    const char *named = esmt_model_label_name(m, i), *label = named ? named : fallback;
    bad |= json_object_set_new(id2label, id, json_string(label));
    bad |= json_object_set_new(label2id, label, json_integer(i));
  }
  bad |= json_object_set_new(c, "id2label", id2label);
  bad |= json_object_set_new(c, "label2id", label2id);
  static const char *const problem[] = {NULL, "single_label_classification",
                                        "multi_label_classification", "regression", NULL};
  if (problem[m->cfg.head])
    bad |= json_object_set_new(c, "problem_type", json_string(problem[m->cfg.head]));
  return bad;
}

static esmt_status write_config(esmt_model *m, const char *dir) {
  json_t *c = json_pack(
      "{s:[s],s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:b,s:b,s:f,s:i,s:i,s:s,s:f,s:f,s:f,s:b,s:b,s:s,s:s}",
      "architectures", architecture(m), "model_type", "esm", "vocab_size", m->V, "hidden_size",
      m->d, "num_hidden_layers", m->L, "num_attention_heads", m->H, "intermediate_size", m->F,
      "max_position_embeddings", m->cfg.max_positions + 2, "position_embedding_type", "rotary",
      "token_dropout", 1, "emb_layer_norm_before", 0, "layer_norm_eps",
      (double)m->cfg.layer_norm_eps, "pad_token_id", ESMT_TOKEN_PAD, "mask_token_id",
      ESMT_TOKEN_MASK, "hidden_act", "gelu", "hidden_dropout_prob", 0.0,
      "attention_probs_dropout_prob", 0.0, "initializer_range", 0.02, "is_folding_model", 0,
      "use_cache", 1, "torch_dtype", "float32", "producer", "esmtrain");
  if (c && add_head_fields(m, c)) {
    json_decref(c);
    c = NULL;
  }
  return esmt_hf_write_json(dir, "config.json", c);
}

static esmt_status write_tokenizer(const char *dir) {
  char vocab[512] = "";
  for (int i = 0; i < ESMT_VOCAB_SIZE; i++) {
    strcat(vocab, esmt_token_string(i));
    strcat(vocab, "\n");
  }
  esmt_status st = esmt_hf_write_text(dir, "vocab.txt", vocab);
  if (!st)
    st = esmt_hf_write_json(dir, "special_tokens_map.json",
                    json_pack("{s:s,s:s,s:s,s:s,s:s}", "cls_token", "<cls>", "eos_token", "<eos>",
                              "mask_token", "<mask>", "pad_token", "<pad>", "unk_token", "<unk>"));
  if (!st)
    st = esmt_hf_write_json(dir, "tokenizer_config.json",
                    json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:s}", "tokenizer_class", "EsmTokenizer",
                              "model_max_length", 1024, "cls_token", "<cls>", "eos_token", "<eos>",
                              "mask_token", "<mask>", "pad_token", "<pad>", "unk_token", "<unk>"));
  return st;
}

/* One tensor of the export after the trained ones. */
typedef struct extra {
  esmt_st_entry e;
  const void *data;
  uint64_t bytes;
} extra;

/* A carried tensor's own name, dtype, shape and bytes (carried_tensors.h). */
static extra carried_extra(const esmt_carried_tensor *c) {
  extra x;
  memset(&x, 0, sizeof x);
  x.e.name = c->name;
  x.e.dtype = (esmt_st_dtype)c->dtype;
  x.e.ndim = c->ndim;
  memcpy(x.e.shape, c->shape, sizeof x.e.shape);
  x.data = c->data;
  x.bytes = c->nbytes;
  return x;
}

/* Whether a layout tensor belongs in the transformers directory: LoRA's
 * adapters do not (merged, or in the PEFT directory), nor the masked-LM
 * head of a model with a task head (EsmFor*Classification has none). */
static int exported(const esmt_model *m, const char *name) {
  if (!strncmp(name, "base_model.", 11)) return 0;
  return m->cfg.head == ESMT_HEAD_NONE || strncmp(name, "lm_head.", 8) != 0;
}

/* Weights under HF names, then every key transformers' EsmForMaskedLM has
 * in its state dict, so that loading reports nothing missing: the tensors
 * the model carries from an imported directory byte for byte (rotary
 * inv_freq, contact head, position table: an HF directory comes back
 * bit-identical), else the values it computes with (inv_freq) or zeros. */
static esmt_status write_weights(esmt_model *m, const char *dir, int merge_lora) {
  const esmt_layout *ly = &m->layout;
  const int half = m->hd / 2, npos = m->cfg.max_positions + 2;
  const int cap = ly->count + m->L + 3 + m->n_carried;
  esmt_st_entry *e = calloc((size_t)cap, sizeof *e);
  extra *x = calloc((size_t)cap, sizeof *x);
  char (*names)[96] = calloc((size_t)m->L, sizeof *names);
  float *host = malloc(ly->total * sizeof *host);
  const size_t nz = (size_t)npos * (size_t)m->d > (size_t)m->L * m->H ? (size_t)npos * m->d
                                                                      : (size_t)m->L * m->H;
  float *zeros = calloc(nz, sizeof *zeros);
  esmt_status st = (!e || !x || !names || !host || !zeros)
                       ? esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "export: out of memory")
                       : esmt_flat_download(m, host, m->mem.master);
  if (!st && merge_lora) esmt_lora_merge_host(m, host);
  int k = 0, nx = 0;
  for (int i = 0; i < ly->count && !st; i++) {
    const esmt_tensor_info *t = &ly->tensors[i];
    if (exported(m, t->name))
      x[nx++] = (extra){{t->name, ESMT_ST_F32, t->ndim, {t->shape[0], t->shape[1]}},
                        host + t->offset, t->numel * sizeof *host};
  }
  const int n_trained = nx;
  /* the keys transformers expects: carried, or computed / zero */
  for (int l = 0; l < m->L && !st; l++) {
    snprintf(names[l], sizeof names[l], "esm.encoder.layer.%d.attention.self.rotary_embeddings.inv_freq", l);
    const esmt_carried_tensor *c = esmt_carried_find(m, names[l]);
    x[nx++] = c ? carried_extra(c)
                : (extra){{names[l], ESMT_ST_F32, 1, {half}}, m->inv_freq, (uint64_t)half * 4};
  }
  static const char *const k_zero_names[] = {"esm.embeddings.position_embeddings.weight",
                                             "esm.contact_head.regression.weight",
                                             "esm.contact_head.regression.bias"};
  const int64_t zshape[3][2] = {{npos, m->d}, {1, (int64_t)m->L * m->H}, {1, 0}};
  for (int z = 0; z < 3 && !st; z++) {
    const esmt_carried_tensor *c = esmt_carried_find(m, k_zero_names[z]);
    const int nd = z == 2 ? 1 : 2;
    const uint64_t bytes = (uint64_t)zshape[z][0] * (uint64_t)(nd == 2 ? zshape[z][1] : 1) * 4;
    x[nx++] = c ? carried_extra(c)
                : (extra){{k_zero_names[z], ESMT_ST_F32, nd, {zshape[z][0], zshape[z][1]}}, zeros,
                          bytes};
  }
  /* any other carried key; the tied decoder copy is the embedding as trained */
  for (int i = 0; i < m->n_carried && !st; i++) {
    const esmt_carried_tensor *c = &m->carried[i];
    int listed = 0;
    for (int j = n_trained; j < nx; j++) listed |= !strcmp(x[j].e.name, c->name);
    if (listed || !exported(m, c->name)) continue;
    if (!strcmp(c->name, "lm_head.decoder.weight"))
      x[nx++] = (extra){{c->name, ESMT_ST_F32, 2, {m->V, m->d}}, host + ly->embed,
                        (uint64_t)m->V * (uint64_t)m->d * 4};
    else
      x[nx++] = carried_extra(c);
  }
  for (int j = 0; j < nx; j++) e[k++] = x[j].e;
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  esmt_st_meta meta[] = {{"format", "pt"}, {"producer", "esmtrain"}};
  esmt_st_writer *w = NULL;
  if (!st) st = esmt_st_writer_begin(path, e, k, meta, 2, &w);
  for (int j = 0; j < nx && !st; j++) st = esmt_st_writer_append(w, x[j].data, x[j].bytes);
  if (w) {
    if (st) esmt_st_writer_abort(w);
    else st = esmt_st_writer_finish(w, NULL);
  }
  free(e);
  free(x);
  free(names);
  free(host);
  free(zeros);
  return st;
}

esmt_status esmt_hf_exportable(const esmt_model *m, const char *fn) {
  if (m->cfg.head != ESMT_HEAD_NONE && m->cfg.head != ESMT_HEAD_RESIDUE_CLASS &&
      m->cfg.pooling == ESMT_POOL_MEAN)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: the model's %s head pools the mean of the "
                     "residues, which transformers' EsmForSequenceClassification cannot compute "
                     "(its head reads the <cls> position): nothing was written; fine-tune with "
                     "cls pooling (finetune --pooling cls) to export to transformers", fn,
                     esmt_head_kind_name(m->cfg.head));
  return ESMT_OK;
}

esmt_status esmt_hf_export_into(esmt_model *m, const char *dir, int merge_lora) {
  esmt_status st = write_config(m, dir);
  if (!st) st = write_tokenizer(dir);
  if (!st) st = write_weights(m, dir, merge_lora);
  if (!st) st = esmt_hf_write_text(dir, ESMT_EXPORT_MARKER,
                                   "This directory is a Hugging Face export written by esmtrain; "
                                   "`esmtrain-example export --overwrite` may replace it.\n");
  return st;
}

/* The names an export holds; a directory with the marker and nothing else
 * is an earlier export that overwrite may replace. */
static const char *const k_export_names[] = {"config.json", "vocab.txt", "special_tokens_map.json",
                                             "tokenizer_config.json", "model.safetensors",
                                             ESMT_EXPORT_MARKER, NULL};

esmt_out_dir_rules esmt_hf_export_rules(const char *fn, int overwrite) {
  const esmt_out_dir_rules rules = {fn, ESMT_EXPORT_MARKER, k_export_names, overwrite,
                                    "overwrite (--overwrite)"};
  return rules;
}

esmt_status esmt_model_export_hf(esmt_model *m, const char *dir, int overwrite) {
  const char *fn = "esmt_model_export_hf";
  ESMT_CHECK_ARG(m && dir && *dir, fn, "model and dir must not be NULL");
  const esmt_out_dir_rules rules = esmt_hf_export_rules(fn, overwrite);
  esmt_out_dir od;
  esmt_status st = esmt_hf_exportable(m, fn);
  if (!st) st = esmt_out_dir_begin(&od, dir, &rules);
  if (st) return st;
  st = esmt_hf_export_into(m, od.work, 1);
  if (!st) st = esmt_out_dir_publish(&od, ESMT_EXPORT_MARKER);
  if (st) esmt_out_dir_abort(&od);
  return st;
}
