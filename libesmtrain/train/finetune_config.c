/* SPDX-License-Identifier: MIT */
/* esmt_finetune_create_from_config (finetune.h): a fine-tuning trainer
 * from a configuration's finetune.* keys: the labelled table read and
 * split, a model of the model.* shape with the task head, freezing and
 * LoRA asked for, the training split shuffled endlessly, the validation
 * split as one pass per evaluation, a head warm-up with the encoder held
 * (finetune.freeze_encoder_steps), and the trainer options every run
 * shares (esmt_trainer_options_from_config). The trainer owns all of it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_read.h"
#include "optimizer.h"
#include "trainer.h"
#include "trainer_finetune.h"


static int task_of(const char *name) {
  const int head = esmt_head_from_name(name); /* the schema admits the task heads only */
  return head > ESMT_HEAD_NONE ? head : ESMT_HEAD_SEQ_CLASS;
}

/* The table's label names on the model, so that its checkpoints carry them. */
static esmt_status name_outputs(esmt_model *model, const esmt_labelled *data) {
  const int n = esmt_labelled_num_labels(data);
  const char **names = calloc((size_t)(n > 0 ? n : 1), sizeof *names);
  if (!names) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "naming the head's outputs: out of memory");
  for (int i = 0; i < n; i++) names[i] = esmt_labelled_label_name(data, i);
  esmt_status st = esmt_model_set_label_names(model, names, n);
  free(names);
  return st;
}

/* "none", "encoder" or a layer count into esmt_model_config.frozen_layers. */
static esmt_status freeze_of(const char *v, int *frozen, const char *fn) {
  char *end;
  if (!strcmp(v, "none")) *frozen = 0;
  else if (!strcmp(v, "encoder")) *frozen = ESMT_FREEZE_ENCODER;
  else if ((*frozen = (int)strtol(v, &end, 10)) < 0 || *end || end == v)
    return esmt_fail(ESMT_ERR_CONFIG, "%s: finetune.freeze is \"%s\": none, encoder or a "
                     "number of layers", fn, v);
  return ESMT_OK;
}

/* "q,k,v,o,up,down" into ESMT_LORA_* bits. */
static esmt_status lora_targets_of(const char *v, unsigned *bits, const char *fn) {
  static const struct { const char *name; unsigned bit; } names[] = {
      {"q", ESMT_LORA_QUERY}, {"k", ESMT_LORA_KEY}, {"v", ESMT_LORA_VALUE},
      {"o", ESMT_LORA_ATTN_OUT}, {"up", ESMT_LORA_FFN_UP}, {"down", ESMT_LORA_FFN_DOWN}};
  *bits = 0;
  for (const char *p = v; *p;) {
    const size_t len = strcspn(p, ",");
    size_t k = 0;
    while (k < 6 && (strlen(names[k].name) != len || strncmp(p, names[k].name, len))) k++;
    if (k == 6)
      return esmt_fail(ESMT_ERR_CONFIG, "%s: finetune.lora_targets \"%s\": \"%.*s\" is none of "
                       "q, k, v, o, up, down", fn, v, (int)len, p);
    *bits |= names[k].bit;
    p += len + (p[len] == ',');
  }
  return ESMT_OK;
}

/* finetune.class_weights ("auto" or w1,w2,...) onto the training loader. */
static esmt_status class_weights_of(const char *v, const esmt_labelled *d,
                                    esmt_labelled_loader *train, const char *fn) {
  if (!*v) return ESMT_OK;
  const int n = esmt_labelled_num_labels(d);
  float *w = calloc((size_t)(n > 0 ? n : 1), sizeof *w);
  if (!w) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  esmt_status st = ESMT_OK;
  if (!strcmp(v, "auto")) {
    st = esmt_labelled_balanced_weights(d, w, n);
  } else {
    int k = 0;
    for (const char *p = v; !st && *p; k++) {
      char *end;
      const double x = strtod(p, &end);
      if (end == p || (*end && *end != ',') || k >= n || !(x >= 0) || !isfinite(x))
        st = esmt_fail(ESMT_ERR_CONFIG, "%s: finetune.class_weights \"%s\": auto, or %d "
                       "finite weights >= 0 in class order", fn, v, n);
      else w[k] = (float)x;
      p = *end ? end + 1 : end;
    }
    if (!st && k != n)
      st = esmt_fail(ESMT_ERR_CONFIG, "%s: finetune.class_weights \"%s\": %d weights for %d "
                     "classes", fn, v, k, n);
  }
  if (!st) st = esmt_labelled_loader_set_class_weights(train, w, n);
  free(w);
  return st ? esmt_fail_prefix(st, "finetune.class_weights: ") : ESMT_OK;
}

/* finetune.label_cols split at commas into `names` (pointers into buf). */
static int split_columns(const char *list, char *buf, size_t cap, const char **names, int max) {
  snprintf(buf, cap, "%s", list);
  int n = 0;
  for (char *save = NULL, *p = strtok_r(buf, ",", &save); p && n < max;
       p = strtok_r(NULL, ",", &save))
    names[n++] = p;
  return n;
}

static esmt_status read_table(esmt_config_reader *rd, int task, struct esmt_finetune_owned *own,
                              const char *fn) {
  char cols_buf[2048];
  const char *cols[64];
  esmt_labelled_options lo = ESMT_LABELLED_OPTIONS_INIT;
  lo.path = esmt_cfg_string(rd, "finetune.data");
  lo.task = task;
  lo.seq_column = esmt_cfg_string(rd, "finetune.seq_col");
  const char *id = esmt_cfg_string(rd, "finetune.id_col");
  lo.id_column = *id ? id : NULL;
  lo.n_label_columns = split_columns(esmt_cfg_string(rd, "finetune.label_cols"), cols_buf,
                                     sizeof cols_buf, cols, 64);
  lo.label_columns = cols;
  const char *sep = esmt_cfg_string(rd, "finetune.label_sep");
  lo.label_separator = *sep ? sep : NULL;
  const char *split = esmt_cfg_string(rd, "finetune.split_col");
  lo.split_column = *split ? split : NULL;
  const char *clusters = esmt_cfg_string(rd, "finetune.clusters");
  lo.clusters = *clusters ? clusters : NULL;
  lo.valid_fraction = esmt_cfg_double(rd, "finetune.valid_fraction");
  lo.test_fraction = esmt_cfg_double(rd, "finetune.test_fraction");
  lo.seed = (uint64_t)esmt_cfg_int(rd, "data.seed");
  lo.max_len = (int)esmt_cfg_int(rd, "data.max_len");
  esmt_status st = esmt_cfg_status(rd, fn);
  if (!st && !*lo.path) st = esmt_fail(ESMT_ERR_CONFIG, "%s: finetune.data is not set", fn);
  if (!st && lo.n_label_columns == 0)
    st = esmt_fail(ESMT_ERR_CONFIG, "%s: finetune.label_cols names no column", fn);
  return st ? st : esmt_labelled_read(&lo, &own->data);
}

esmt_status esmt_finetune_create_from_config(esmt_context *ctx, const esmt_config *cfg,
                                             const esmt_trainer_options *base,
                                             esmt_trainer **out) {
  const char *fn = "esmt_finetune_create_from_config";
  esmt_config_reader reader, *rd = &reader;
  esmt_status st = esmt_trainer_config_begin(fn, ctx, cfg, out, rd);
  if (st) return st;
  const int task = task_of(esmt_cfg_string(rd, "finetune.task"));
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_cfg_model_shape(rd, &mc);
  mc.precision = esmt_cfg_precision(rd);
  mc.head = task;
  mc.pooling = strcmp(esmt_cfg_string(rd, "finetune.pooling"), "cls") ? ESMT_POOL_MEAN
                                                                       : ESMT_POOL_CLS;
  mc.lora_rank = (int)esmt_cfg_int(rd, "finetune.lora_rank");
  mc.lora_alpha = (float)esmt_cfg_double(rd, "finetune.lora_alpha");
  mc.lora_dropout = (float)esmt_cfg_double(rd, "finetune.lora_dropout");
  const char *freeze = esmt_cfg_string(rd, "finetune.freeze");
  const char *targets = esmt_cfg_string(rd, "finetune.lora_targets");
  const char *opt_kind = esmt_cfg_string(rd, "optimizer.kind");
  const int rows = (int)esmt_cfg_int(rd, "finetune.batch_rows");
  const uint64_t seed = (uint64_t)esmt_cfg_int(rd, "data.seed");
  const int64_t steps = esmt_cfg_int(rd, "train.max_steps");
  const int64_t eval_every = esmt_cfg_int(rd, "train.eval_every");
  if ((st = esmt_cfg_status(rd, fn))) return st;
  if ((st = freeze_of(freeze, &mc.frozen_layers, fn))) return st;
  if (mc.lora_rank > 0 && (st = lora_targets_of(targets, &mc.lora_targets, fn))) return st;
  if ((st = esmt_optimizer_from_name(opt_kind, &mc.optimizer)))
    return esmt_fail_prefix(st, "%s: ", fn);

  struct esmt_finetune_owned *own = calloc(1, sizeof *own);
  if (!own) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  esmt_model *model = NULL;
  esmt_trainer *t = NULL;
  if ((st = read_table(rd, task, own, fn))) goto fail;
  mc.num_labels = esmt_labelled_num_labels(own->data);
  if ((st = esmt_model_create(ctx, &mc, (uint64_t)esmt_cfg_int(rd, "train.seed"), &model)))
    goto fail;
  if ((st = name_outputs(model, own->data))) goto fail;
  if ((st = esmt_labelled_loader_create(own->data, ESMT_LABELLED_TRAIN, rows, 1, 0, seed,
                                        &own->train)))
    goto fail;
  if ((st = class_weights_of(esmt_cfg_string(rd, "finetune.class_weights"), own->data,
                             own->train, fn)))
    goto fail;
  const int has_eval = eval_every > 0 && esmt_labelled_count(own->data, ESMT_LABELLED_VALID) > 0;
  if (has_eval && (st = esmt_labelled_loader_create(own->data, ESMT_LABELLED_VALID, rows, 0, 0,
                                                    seed, &own->valid)))
    goto fail;
  esmt_trainer_config_options tco;
  if ((st = esmt_trainer_options_from_config(rd, base, model, mc.optimizer, steps,
                                             has_eval ? eval_every : 0, 0, fn, &tco)))
    goto fail;
  tco.oc.head_lr_scale = esmt_cfg_double(rd, "finetune.head_lr_scale");
  tco.oc.head_only_steps = esmt_cfg_int(rd, "finetune.freeze_encoder_steps");
  tco.to.best_metric = esmt_cfg_string(rd, "finetune.best_metric");
  tco.to.patience = (int)esmt_cfg_int(rd, "finetune.patience");
  if ((st = esmt_cfg_status(rd, fn))) goto fail;
  esmt_batch_source train_src = ESMT_BATCH_SOURCE_INIT, valid_src = ESMT_BATCH_SOURCE_INIT;
  esmt_labelled_loader_as_source(own->train, &train_src);
  if ((st = esmt_trainer_create(model, &tco.to, &train_src, &t))) goto fail;
  if (has_eval) {
    esmt_labelled_loader_as_source(own->valid, &valid_src);
    if ((st = esmt_trainer_set_eval_source(t, &valid_src))) goto fail;
  }
  t->owned_model = model;
  t->finetune_owned = own;
  *out = t;
  return ESMT_OK;
fail:
  esmt_trainer_destroy(t);
  esmt_model_destroy(model);
  esmt_finetune_owned_free(own);
  return st;
}

const esmt_labelled *esmt_trainer_labelled(const esmt_trainer *t) {
  return t ? esmt_finetune_owned_data(t->finetune_owned) : NULL;
}
