/* SPDX-License-Identifier: MIT */
/* esmt_model_export_hf: a transformers-loadable EsmForMaskedLM directory. */
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
#include "out_dir.h"
#include "safetensors.h"

#define PATH_CAP 4096
/* The file that marks a directory as an export esmtrain wrote. */
#define ESMT_EXPORT_MARKER ".esmtrain-export"

static esmt_status write_text(const char *dir, const char *name, const char *text) {
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return esmt_fail(ESMT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  esmt_status st = esmt_write_all(fd, text, strlen(text), path);
  if (!st && fsync(fd) != 0) st = esmt_fail(ESMT_ERR_IO, "%s: fsync: %s", path, strerror(errno));
  close(fd);
  return st;
}

static esmt_status write_json(const char *dir, const char *name, json_t *j) {
  char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(j);
  if (!text) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "export: out of memory");
  esmt_status st = write_text(dir, name, text);
  free(text);
  return st;
}

static esmt_status write_config(esmt_model *m, const char *dir) {
  json_t *c = json_pack(
      "{s:[s],s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:b,s:b,s:f,s:i,s:i,s:s,s:f,s:f,s:f,s:b,s:b,s:s,s:s}",
      "architectures", "EsmForMaskedLM", "model_type", "esm", "vocab_size", m->V, "hidden_size",
      m->d, "num_hidden_layers", m->L, "num_attention_heads", m->H, "intermediate_size", m->F,
      "max_position_embeddings", m->cfg.max_positions + 2, "position_embedding_type", "rotary",
      "token_dropout", 1, "emb_layer_norm_before", 0, "layer_norm_eps",
      (double)m->cfg.layer_norm_eps, "pad_token_id", ESMT_TOKEN_PAD, "mask_token_id",
      ESMT_TOKEN_MASK, "hidden_act", "gelu", "hidden_dropout_prob", 0.0,
      "attention_probs_dropout_prob", 0.0, "initializer_range", 0.02, "is_folding_model", 0,
      "use_cache", 1, "torch_dtype", "float32", "producer", "esmtrain");
  return c ? write_json(dir, "config.json", c)
           : esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "export: config.json");
}

static esmt_status write_tokenizer(const char *dir) {
  char vocab[512] = "";
  for (int i = 0; i < ESMT_VOCAB_SIZE; i++) {
    strcat(vocab, esmt_token_string(i));
    strcat(vocab, "\n");
  }
  esmt_status st = write_text(dir, "vocab.txt", vocab);
  if (!st)
    st = write_json(dir, "special_tokens_map.json",
                    json_pack("{s:s,s:s,s:s,s:s,s:s}", "cls_token", "<cls>", "eos_token", "<eos>",
                              "mask_token", "<mask>", "pad_token", "<pad>", "unk_token", "<unk>"));
  if (!st)
    st = write_json(dir, "tokenizer_config.json",
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

/* Weights under HF names, then every key transformers' EsmForMaskedLM has
 * in its state dict, so that loading reports nothing missing: the tensors
 * the model carries from an imported directory byte for byte (rotary
 * inv_freq, contact head, position table: an HF directory comes back
 * bit-identical), else the values it computes with (inv_freq) or zeros. */
static esmt_status write_weights(esmt_model *m, const char *dir) {
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
  int k = 0, nx = 0;
  for (int i = 0; i < ly->count && !st; i++, k++) {
    const esmt_tensor_info *t = &ly->tensors[i];
    e[k] = (esmt_st_entry){t->name, ESMT_ST_F32, t->ndim, {t->shape[0], t->shape[1]}};
  }
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
    for (int j = 0; j < nx; j++) listed |= !strcmp(x[j].e.name, c->name);
    if (listed) continue;
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
  if (!st) st = esmt_st_writer_append(w, host, ly->total * sizeof *host);
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

/* The names an export holds; a directory with the marker and nothing else
 * is an earlier export that overwrite may replace. */
static const char *const k_export_names[] = {"config.json", "vocab.txt", "special_tokens_map.json",
                                             "tokenizer_config.json", "model.safetensors",
                                             ESMT_EXPORT_MARKER, NULL};

esmt_status esmt_model_export_hf(esmt_model *m, const char *dir, int overwrite) {
  const char *fn = "esmt_model_export_hf";
  ESMT_CHECK_ARG(m && dir && *dir, fn, "model and dir must not be NULL");
  const esmt_out_dir_rules rules = {fn, ESMT_EXPORT_MARKER, k_export_names, overwrite,
                                    "overwrite (--overwrite)"};
  esmt_out_dir od;
  esmt_status st = esmt_out_dir_begin(&od, dir, &rules);
  if (st) return st;
  if (!st) st = write_config(m, od.work);
  if (!st) st = write_tokenizer(od.work);
  if (!st) st = write_weights(m, od.work);
  if (!st) st = write_text(od.work, ESMT_EXPORT_MARKER,
                           "This directory is a Hugging Face export written by esmtrain; "
                           "`esmtrain-example export --overwrite` may replace it.\n");
  if (!st) st = esmt_out_dir_publish(&od, ESMT_EXPORT_MARKER);
  if (st) esmt_out_dir_abort(&od);
  return st;
}
