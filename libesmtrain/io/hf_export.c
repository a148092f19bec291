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

/* Weights under HF names plus the extra keys transformers' EsmForMaskedLM
 * has in its state dict, so that loading reports nothing missing. */
static esmt_status write_weights(esmt_model *m, const char *dir) {
  const esmt_layout *ly = &m->layout;
  const int half = m->hd / 2, npos = m->cfg.max_positions + 2;
  int n = ly->count + m->L + 3;
  esmt_st_entry *e = calloc((size_t)n, sizeof *e);
  char (*names)[96] = calloc((size_t)m->L, sizeof *names);
  float *host = malloc(ly->total * sizeof *host);
  float *zeros = calloc((size_t)npos * (size_t)m->d > (size_t)m->L * m->H ? (size_t)npos * m->d
                                                                          : (size_t)m->L * m->H,
                        sizeof *zeros);
  esmt_status st = (!e || !names || !host || !zeros)
                       ? esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "export: out of memory")
                       : esmt_flat_download(m, host, m->params);
  int k = 0;
  for (int i = 0; i < ly->count && !st; i++, k++) {
    const esmt_tensor_info *t = &ly->tensors[i];
    e[k] = (esmt_st_entry){t->name, ESMT_ST_F32, t->ndim, {t->shape[0], t->shape[1]}};
  }
  for (int l = 0; l < m->L && !st; l++, k++) {
    snprintf(names[l], sizeof names[l], "esm.encoder.layer.%d.attention.self.rotary_embeddings.inv_freq", l);
    e[k] = (esmt_st_entry){names[l], ESMT_ST_F32, 1, {half}};
  }
  if (!st) {
    e[k++] = (esmt_st_entry){"esm.embeddings.position_embeddings.weight", ESMT_ST_F32, 2, {npos, m->d}};
    e[k++] = (esmt_st_entry){"esm.contact_head.regression.weight", ESMT_ST_F32, 2, {1, (int64_t)m->L * m->H}};
    e[k++] = (esmt_st_entry){"esm.contact_head.regression.bias", ESMT_ST_F32, 1, {1}};
  }
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  esmt_st_meta meta[] = {{"format", "pt"}, {"producer", "esmtrain"}};
  esmt_st_writer *w = NULL;
  if (!st) st = esmt_st_writer_begin(path, e, n, meta, 2, &w);
  if (!st) st = esmt_st_writer_append(w, host, ly->total * sizeof *host);
  for (int l = 0; l < m->L && !st; l++) st = esmt_st_writer_append(w, m->inv_freq, (uint64_t)half * 4);
  if (!st) st = esmt_st_writer_append(w, zeros, (uint64_t)npos * m->d * 4);
  if (!st) st = esmt_st_writer_append(w, zeros, (uint64_t)m->L * m->H * 4);
  if (!st) st = esmt_st_writer_append(w, zeros, 4);
  if (w) {
    if (st) esmt_st_writer_abort(w);
    else st = esmt_st_writer_finish(w, NULL);
  }
  free(e);
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
