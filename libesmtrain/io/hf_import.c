/* SPDX-License-Identifier: MIT */
/* esmt_model_import_hf: a Hugging Face ESM-2 directory into a model. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "carried_tensors.h"
#include "checkpoint.h"
#include "hf_import.h"
#include "json_input.h"
#include "safetensors.h"

#define PATH_CAP 4096
#define MAX_SHARDS 256

static const char *k_tool = "convert it with tools/convert_to_safetensors.py (needs torch)";

static int file_exists(const char *dir, const char *name) {
  char p[PATH_CAP];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

/* config.json's integer `key` into *out: a JSON integer (not 1.5, "16" or
 * true) in [lo, hi]; absent is an error when required, else *out stays. */
static esmt_status config_int(json_t *c, const char *path, const char *key, int required,
                              json_int_t lo, json_int_t hi, json_int_t *out) {
  json_t *x = json_object_get(c, key);
  if (!x && !required) return ESMT_OK;
  if (!x) return esmt_fail(ESMT_ERR_FORMAT, "%s: field '%s' is missing", path, key);
  if (!json_is_integer(x)) {
    char *text = json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT);
    esmt_status st = esmt_fail(ESMT_ERR_FORMAT, "%s: field '%s' is %.60s, not an integer (write "
                               "a whole number without quotes, %lld to %lld)", path, key,
                               text ? text : "not a number", (long long)lo, (long long)hi);
    free(text);
    return st;
  }
  json_int_t v = json_integer_value(x);
  if (v < lo || v > hi)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: field '%s' is %lld, outside the range esmtrain "
                     "supports (%lld to %lld)", path, key, (long long)v, (long long)lo,
                     (long long)hi);
  *out = v;
  return ESMT_OK;
}

/* The task head config.json's architecture names: EsmForSequenceClassification
 * (problem_type picks the head; absent, transformers' own rule: one label is
 * regression, more are single-label classes) or EsmForTokenClassification;
 * num_labels from id2label as transformers counts them. */
static esmt_status config_head(json_t *c, const char *path, esmt_model_config *m) {
  const char *arch = json_string_value(json_array_get(json_object_get(c, "architectures"), 0));
  const int seq = arch && !strcmp(arch, "EsmForSequenceClassification");
  if (!seq && !(arch && !strcmp(arch, "EsmForTokenClassification"))) return ESMT_OK;
  json_t *id2label = json_object_get(c, "id2label");
  json_int_t n = 2; /* transformers' default */
  if (json_is_object(id2label)) n = (json_int_t)json_object_size(id2label);
  else {
    esmt_status st = config_int(c, path, "num_labels", 0, 1, 1 << 20, &n);
    if (st) return st;
  }
  if (n < 1 || n > (1 << 20))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: %s with %lld labels (id2label)", path, arch,
                     (long long)n);
  m->num_labels = (int)n;
  m->pooling = ESMT_POOL_CLS; /* transformers' sequence head reads <cls> */
  if (!seq) {
    m->head = ESMT_HEAD_RESIDUE_CLASS;
    return ESMT_OK;
  }
  const char *problem = json_string_value(json_object_get(c, "problem_type"));
  if (!problem) m->head = n == 1 ? ESMT_HEAD_REGRESSION : ESMT_HEAD_SEQ_CLASS;
  else if (!strcmp(problem, "single_label_classification")) m->head = ESMT_HEAD_SEQ_CLASS;
  else if (!strcmp(problem, "multi_label_classification")) m->head = ESMT_HEAD_MULTILABEL;
  else if (!strcmp(problem, "regression")) m->head = ESMT_HEAD_REGRESSION;
  else
    return esmt_fail(ESMT_ERR_FORMAT, "%s: problem_type '%s' is none of "
                     "single_label_classification, multi_label_classification, regression",
                     path, problem);
  return ESMT_OK;
}

/* config.json's text (named `path` in messages) to a model config. */
esmt_status esmt_hf_config_parse(const char *text, size_t len, const char *path,
                                 esmt_model_config *mc) {
  json_error_t err;
  json_t *c = json_loadb(text, len, 0, &err);
  if (!c) return esmt_fail(ESMT_ERR_FORMAT, "%s: %s (line %d)", path, err.text, err.line);
  if (!json_is_object(c)) {
    json_decref(c);
    return esmt_fail(ESMT_ERR_FORMAT, "%s: not a JSON object", path);
  }
  esmt_status st = ESMT_OK;
  const char *type = json_string_value(json_object_get(c, "model_type"));
  const char *pos = json_string_value(json_object_get(c, "position_embedding_type"));
  const char *act = json_string_value(json_object_get(c, "hidden_act"));
  json_t *td = json_object_get(c, "token_dropout"), *before = json_object_get(c, "emb_layer_norm_before");
  if (!type || strcmp(type, "esm") != 0)
    st = esmt_fail(ESMT_ERR_FORMAT, "%s: model_type is '%s', not 'esm'", path, type ? type : "missing");
  else if (pos && strcmp(pos, "rotary") != 0)
    st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: position_embedding_type '%s': ESM-2 uses rotary "
                   "(ESM-1b style absolute positions are not supported)", path, pos);
  else if (json_is_false(td))
    st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: token_dropout false: ESM-2 always applies token "
                   "dropout", path);
  else if (json_is_true(before))
    st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: emb_layer_norm_before true (an ESM-1b layout), not "
                   "ESM-2", path);
  else if (act && strcmp(act, "gelu") != 0)
    st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: hidden_act '%s': ESM-2 uses the exact erf gelu", path, act);
  /* Read as 64-bit integers and range-checked before any narrowing: a
   * hidden_size of 2^32 + 16 must not become 16. */
  static const struct { const char *key; json_int_t lo, hi; } k_ints[] = {
      {"hidden_size", 2, 65536}, {"num_hidden_layers", 1, 1024},
      {"num_attention_heads", 1, 1024}, {"intermediate_size", 1, 1 << 20},
      {"vocab_size", 1, 1 << 20}};
  json_int_t v[5] = {0};
  for (int i = 0; i < 5 && !st; i++)
    st = config_int(c, path, k_ints[i].key, 1, k_ints[i].lo, k_ints[i].hi, &v[i]);
  json_int_t mpe = 0;
  if (!st && json_object_get(c, "max_position_embeddings"))
    st = config_int(c, path, "max_position_embeddings", 0, 5, 65536 + 2, &mpe);
  if (!st) {
    esmt_model_config m = ESMT_MODEL_CONFIG_INIT;
    m.hidden_size = (int)v[0];
    m.num_layers = (int)v[1];
    m.num_heads = (int)v[2];
    m.ffn_size = (int)v[3];
    m.vocab_size = (int)v[4];
    if (mpe) m.max_positions = (int)mpe - 2;
    json_t *eps = json_object_get(c, "layer_norm_eps");
    if (json_is_number(eps)) m.layer_norm_eps = (float)json_number_value(eps);
    st = config_head(c, path, &m);
    if (!st) *mc = m;
  }
  json_decref(c);
  return st;
}


esmt_status esmt_hf_read_config(const char *dir, esmt_model_config *mc) {
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/config.json", dir);
  json_t *root = NULL;
  esmt_status st = esmt_json_load_input(path, "Hugging Face config.json", &root);
  if (st) return st;
  char *text = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!text) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  st = esmt_hf_config_parse(text, strlen(text), path, mc);
  free(text);
  return st;
}

/* The checkpoint files: one safetensors or the shards an index names. */
static esmt_status open_files(const char *dir, esmt_st_file *files, int *nfiles) {
  *nfiles = 0;
  if (file_exists(dir, "model.safetensors")) {
    char p[PATH_CAP];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    esmt_status st = esmt_st_open(p, &files[0]);
    if (!st) *nfiles = 1;
    return st;
  }
  if (!file_exists(dir, "model.safetensors.index.json")) {
    if (file_exists(dir, "pytorch_model.bin"))
      return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s holds pytorch_model.bin (a pickle, not read in "
                       "C): %s", dir, k_tool);
    return esmt_fail(ESMT_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
  }
  char p[PATH_CAP];
  snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
  json_t *idx = NULL;
  esmt_status ist = esmt_json_load_input(p, "safetensors index", &idx);
  if (ist) return ist;
  json_t *map = json_object_get(idx, "weight_map");
  if (!json_is_object(map)) {
    json_decref(idx);
    return esmt_fail(ESMT_ERR_FORMAT, "%s: no weight_map", p);
  }
  esmt_status st = ESMT_OK;
  char seen[MAX_SHARDS][256];
  const char *key;
  json_t *val;
  json_object_foreach(map, key, val) {
    const char *f = json_string_value(val);
    if (!f || strchr(f, '/')) { st = esmt_fail(ESMT_ERR_FORMAT, "%s: bad shard for '%s'", p, key); break; }
    int known = 0;
    for (int i = 0; i < *nfiles; i++) known |= strcmp(seen[i], f) == 0;
    if (known) continue;
    if (*nfiles == MAX_SHARDS) { st = esmt_fail(ESMT_ERR_FORMAT, "%s: too many shards", p); break; }
    char sp[PATH_CAP];
    snprintf(sp, sizeof sp, "%s/%s", dir, f);
    if (access(sp, F_OK) != 0) {
      st = esmt_fail(ESMT_ERR_IO, "%s: shard %s (named for '%s') is missing", p, f, key);
      break;
    }
    if ((st = esmt_st_open(sp, &files[*nfiles]))) break;
    snprintf(seen[*nfiles], sizeof seen[0], "%s", f);
    (*nfiles)++;
  }
  json_decref(idx);
  return st;
}

static esmt_status refuse_pickle(const char *fn, const char *dir) {
  size_t dl = strlen(dir);
  if ((dl > 4 && !strcmp(dir + dl - 4, ".bin")) || (dl > 3 && !strcmp(dir + dl - 3, ".pt")))
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: %s is a pickle checkpoint (not read in C): %s", fn,
                     dir, k_tool);
  return ESMT_OK;
}

/* Layout tensors a transformers directory may lack: a classification
 * model's masked-LM head (kept as initialised, frozen and unused) and LoRA's
 * adapters (a PEFT directory holds them). */
static int optional_in_hf(const esmt_model *m, const char *name) {
  if (!strncmp(name, "base_model.", 11)) return 1;
  return m->cfg.head != ESMT_HEAD_NONE && !strncmp(name, "lm_head.", 8);
}

/* Verify and load a HF directory's tensors into `m` (shapes must match);
 * the model is unchanged on failure. */
esmt_status esmt_model_load_hf(esmt_model *m, const char *dir) {
  const char *fn = "esmt_model_load_hf";
  ESMT_CHECK_ARG(m && dir, fn, "model and dir must not be NULL");
  esmt_status st = refuse_pickle(fn, dir);
  if (st) return st;
  /* config.json is not needed (the model has its shape) but a damaged one
   * is refused, not ignored */
  esmt_model_config unused;
  if (file_exists(dir, "config.json") && (st = esmt_hf_read_config(dir, &unused)))
    return esmt_fail_prefix(st, "%s: ", fn);
  esmt_st_file *files = calloc(MAX_SHARDS, sizeof *files);
  if (!files) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  int n = 0;
  float *host = NULL;
  esmt_carried_tensor *carried = NULL;
  int nc = 0;
  esmt_st_file merged;
  memset(&merged, 0, sizeof merged);
  if ((st = open_files(dir, files, &n))) goto done;
  int total = 0;
  for (int i = 0; i < n; i++) total += files[i].count;
  merged.tensors = calloc((size_t)(total ? total : 1), sizeof *merged.tensors);
  host = malloc(m->layout.total * sizeof *host);
  if (!merged.tensors || !host) { st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn); goto done; }
  for (int i = 0; i < n; i++) /* one view over every shard (data stays mapped) */
    for (int k = 0; k < files[i].count; k++) merged.tensors[merged.count++] = files[i].tensors[k];
  if ((st = esmt_flat_download(m, host, m->mem.master))) goto done; /* what may stay */
  if ((st = esmt_read_flat_keep(m, &merged, dir, "", host, 1, optional_in_hf))) goto done;
  const esmt_st_tensor *dec = esmt_st_find(&merged, "lm_head.decoder.weight");
  if (dec) { /* a tied copy: it must equal the embedding */
    float *d = malloc(dec->numel * sizeof *d);
    if (!d) { st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn); goto done; }
    esmt_st_to_f32(dec, d);
    const float *E = host + m->layout.embed;
    uint64_t want = (uint64_t)m->V * (uint64_t)m->d;
    int same = dec->numel == want;
    for (uint64_t i = 0; same && i < want; i++) same = fabsf(d[i] - E[i]) <= 1e-6f * (1.0f + fabsf(E[i]));
    free(d);
    if (!same) {
      st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: lm_head.decoder.weight differs from the word "
                     "embedding; ESM-2 ties them (untied heads are not supported)", dir);
      goto done;
    }
  }
  /* the tensors esmtrain does not train, kept byte for byte: pretrained,
   * fp16-rounded inverse frequencies (used), the contact head... */
  if ((st = esmt_carried_collect(m, &merged, dir, &carried, &nc))) goto done;
  if ((st = esmt_flat_upload(m, host, m->mem.master))) goto done;
  st = esmt_carried_install(m, carried, nc);
  carried = NULL;
done:
  esmt_carried_free(carried, nc);
  for (int i = 0; i < n; i++) esmt_st_close(&files[i]);
  free(files);
  free(merged.tensors);
  free(host);
  return st;
}

/* id2label's names onto the model's outputs (esmt_model_set_label_names),
 * unless they are transformers' defaults LABEL_0, LABEL_1, ... (names the
 * model never had). config.json was read and checked already. */
static esmt_status import_label_names(esmt_model *m, const char *dir) {
  const int n = m->cfg.num_labels;
  if (m->cfg.head == ESMT_HEAD_NONE || n < 1) return ESMT_OK;
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/config.json", dir);
  json_t *root = NULL;
  esmt_status st = esmt_json_load_input(path, "Hugging Face config.json", &root);
  if (st) return st;
  json_t *id2label = json_object_get(root, "id2label");
  const char **names = calloc((size_t)n, sizeof *names);
  int defaults = 1;
  if (!names) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  for (int i = 0; !st && json_is_object(id2label) && i < n; i++) {
    char id[16], fallback[32];
    snprintf(id, sizeof id, "%d", i);
    snprintf(fallback, sizeof fallback, "LABEL_%d", i);
    names[i] = json_string_value(json_object_get(id2label, id));
    if (!names[i])
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: id2label has no name for output %d of %d", path, i, n);
    else if (strcmp(names[i], fallback)) defaults = 0;
  }
  if (!st && json_is_object(id2label) && !defaults) st = esmt_model_set_label_names(m, names, n);
  free(names);
  json_decref(root);
  return st;
}

esmt_status esmt_model_import_hf(esmt_context *ctx, const char *dir, esmt_model **out) {
  const char *fn = "esmt_model_import_hf";
  ESMT_CHECK_ARG(out, fn, "out is NULL");
  *out = NULL;
  ESMT_CHECK_ARG(ctx && dir, fn, "ctx and dir must not be NULL");
  esmt_status st = refuse_pickle(fn, dir);
  if (st) return st;
  esmt_model_config mc;
  if ((st = esmt_hf_read_config(dir, &mc))) return esmt_fail_prefix(st, "%s: ", fn);
  /* the weights must be there before anything is allocated for them */
  if (!file_exists(dir, "model.safetensors") && !file_exists(dir, "model.safetensors.index.json")) {
    if (file_exists(dir, "pytorch_model.bin"))
      return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: %s holds pytorch_model.bin (a pickle, not read "
                       "in C): %s", fn, dir, k_tool);
    return esmt_fail(ESMT_ERR_IO, "%s: %s: no model.safetensors or model.safetensors.index.json",
                     fn, dir);
  }
  esmt_model *m = NULL;
  if ((st = esmt_model_create(ctx, &mc, 0, &m))) return esmt_fail_prefix(st, "%s: ", fn);
  if ((st = esmt_model_load_hf(m, dir)) || (st = import_label_names(m, dir))) {
    esmt_model_destroy(m);
    return esmt_fail_prefix(st, "%s: ", fn);
  }
  *out = m;
  return ESMT_OK;
}
