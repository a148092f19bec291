/* SPDX-License-Identifier: MIT */
/* esmt_model_export_peft: a model with LoRA adapters as a transformers
 * base directory (the frozen weights and the task head) and a PEFT adapter
 * directory that peft.PeftModel.from_pretrained loads on it. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "checkpoint.h"
#include "hf_export.h"
#include "model_record.h"
#include "peft.h"
#include "safetensors.h"

void esmt_peft_base_fingerprint(const esmt_model *m, const float *host, char *out, size_t cap) {
  const esmt_layout *ly = &m->layout;
  uLong crc = crc32_z(0L, Z_NULL, 0);
  uint64_t total = 0;
  for (int i = 0; i < ly->count; i++) {
    const esmt_tensor_info *t = &ly->tensors[i];
    if (t->offset >= ly->head_w) continue; /* heads and adapters are not the base */
    crc = crc32_z(crc, (const Bytef *)t->name, strlen(t->name));
    crc = crc32_z(crc, (const Bytef *)(host + t->offset), (z_size_t)(t->numel * sizeof *host));
    total += t->numel;
  }
  snprintf(out, cap, "crc32:%08lx/%llu", (unsigned long)crc, (unsigned long long)total);
}

/* target_modules as one regular expression peft matches against whole
 * module names: a list entry "output.dense" would also catch
 * "attention.output.dense". */
static json_t *target_modules(const esmt_model_config *c) {
  char re[512] = ".*\\.layer\\.[0-9]+\\.(";
  int first = 1;
  for (int t = 0; t < ESMT_LORA_TARGETS; t++) {
    if (!(c->lora_targets >> t & 1)) continue;
    int in, out;
    const char *name = esmt_lora_target(c, t, &in, &out);
    if (!first) strcat(re, "|");
    first = 0;
    size_t n = strlen(re);
    for (const char *p = name; *p; p++) { /* dots escaped */
      if (*p == '.') re[n++] = '\\';
      re[n++] = *p;
    }
    re[n] = '\0';
  }
  strcat(re, ")");
  return json_string(re);
}

static esmt_status write_adapter_config(const esmt_model *m, const char *dir,
                                        const char *base_dir) {
  const esmt_model_config *c = &m->cfg;
  const char *task = c->head == ESMT_HEAD_NONE            ? NULL
                     : c->head == ESMT_HEAD_RESIDUE_CLASS ? "TOKEN_CLS"
                                                          : "SEQ_CLS";
  json_t *j = json_pack(
      "{s:{},s:n,s:s,s:s,s:b,s:b,s:b,s:n,s:n,s:n,s:{},s:f,s:f,s:n,s:s,s:o,s:s,s:i,s:{},s:n,s:o,"
      "s:o,s:b,s:b}",
      "alpha_pattern", "auto_mapping", "base_model_name_or_path", base_dir, "bias", "none",
      "fan_in_fan_out", 0, "inference_mode", 1, "init_lora_weights", 1, "layer_replication",
      "layers_pattern", "layers_to_transform", "loftq_config", "lora_alpha", (double)c->lora_alpha,
      "lora_dropout", (double)c->lora_dropout, "megatron_config", "megatron_core",
      "megatron.core", "modules_to_save",
      c->head == ESMT_HEAD_NONE ? json_null() : json_pack("[s]", "classifier"), "peft_type",
      "LORA", "r", c->lora_rank, "rank_pattern", "revision", "target_modules", target_modules(c),
      "task_type", task ? json_string(task) : json_null(), "use_dora", 0, "use_rslora", 0);
  return esmt_hf_write_json(dir, "adapter_config.json", j);
}

/* The adapters under their layout (peft) names and the task head under
 * peft's, with the base's fingerprint in the metadata. */
static esmt_status write_adapter_weights(esmt_model *m, const char *dir) {
  const esmt_layout *ly = &m->layout;
  esmt_st_entry *e = calloc((size_t)ly->count, sizeof *e);
  const float **data = calloc((size_t)ly->count, sizeof *data);
  char (*names)[128] = calloc((size_t)ly->count, sizeof *names);
  float *host = malloc(ly->total * sizeof *host);
  esmt_status st = (!e || !data || !names || !host)
                       ? esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "export: out of memory")
                       : esmt_flat_download(m, host, m->mem.master);
  int n = 0;
  for (int i = 0; i < ly->count && !st; i++) {
    const esmt_tensor_info *t = &ly->tensors[i];
    const int adapter = !strncmp(t->name, ESMT_PEFT_PREFIX, strlen(ESMT_PEFT_PREFIX));
    if (!adapter && t->offset < ly->cls_lo) continue; /* the base */
    snprintf(names[n], sizeof names[n], "%s%s", adapter ? "" : ESMT_PEFT_PREFIX, t->name);
    e[n] = (esmt_st_entry){names[n], ESMT_ST_F32, t->ndim, {t->shape[0], t->shape[1]}};
    data[n++] = host + t->offset;
  }
  char fingerprint[64] = "";
  if (!st) esmt_peft_base_fingerprint(m, host, fingerprint, sizeof fingerprint);
  char path[4200];
  snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
  esmt_st_meta meta[] = {{"format", "pt"}, {"producer", "esmtrain"},
                         {ESMT_PEFT_BASE_KEY, fingerprint}};
  esmt_st_writer *w = NULL;
  if (!st) st = esmt_st_writer_begin(path, e, n, meta, 3, &w);
  for (int i = 0; i < n && !st; i++)
    st = esmt_st_writer_append(w, data[i], (uint64_t)e[i].shape[0] *
                                               (uint64_t)(e[i].ndim > 1 ? e[i].shape[1] : 1) * 4);
  if (w) {
    if (st) esmt_st_writer_abort(w);
    else st = esmt_st_writer_finish(w, NULL);
  }
  free(e);
  free(data);
  free(names);
  free(host);
  return st;
}

static const char *const k_adapter_names[] = {"adapter_config.json", "adapter_model.safetensors",
                                              ESMT_EXPORT_MARKER, NULL};

esmt_status esmt_model_export_peft(esmt_model *m, const char *base_dir, const char *adapter_dir,
                                   int overwrite) {
  const char *fn = "esmt_model_export_peft";
  ESMT_CHECK_ARG(m && base_dir && *base_dir && adapter_dir && *adapter_dir, fn,
                 "model, base_dir and adapter_dir must not be NULL or empty");
  if (m->cfg.lora_rank <= 0)
    return esmt_fail(ESMT_ERR_STATE, "%s: the model has no LoRA adapters (lora_rank 0): export "
                     "it with esmt_model_export_hf", fn);
  if (!strcmp(base_dir, adapter_dir))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: the base and the adapter need two "
                     "directories (transformers would read the adapter's files as the model's)",
                     fn);
  esmt_status st = esmt_hf_exportable(m, fn);
  if (st) return st;
  const esmt_out_dir_rules base_rules = esmt_hf_export_rules(fn, overwrite);
  const esmt_out_dir_rules adapter_rules = {fn, ESMT_EXPORT_MARKER, k_adapter_names, overwrite,
                                            "overwrite (--overwrite)"};
  esmt_out_dir base, adapter;
  if ((st = esmt_out_dir_begin(&base, base_dir, &base_rules))) return st;
  if ((st = esmt_out_dir_begin(&adapter, adapter_dir, &adapter_rules))) {
    esmt_out_dir_abort(&base);
    return st;
  }
  st = esmt_hf_export_into(m, base.work, 0);
  if (!st) st = write_adapter_config(m, adapter.work, base_dir);
  if (!st) st = write_adapter_weights(m, adapter.work);
  if (!st) st = esmt_hf_write_text(adapter.work, ESMT_EXPORT_MARKER,
                                   "This directory is a PEFT adapter written by esmtrain; "
                                   "`esmtrain-example export --overwrite` may replace it.\n");
  /* both complete before either is published */
  if (!st) st = esmt_out_dir_publish(&base, ESMT_EXPORT_MARKER);
  if (st) {
    esmt_out_dir_abort(&base);
    esmt_out_dir_abort(&adapter);
    return st;
  }
  if ((st = esmt_out_dir_publish(&adapter, ESMT_EXPORT_MARKER))) esmt_out_dir_abort(&adapter);
  return st;
}
