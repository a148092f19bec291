/* SPDX-License-Identifier: MIT */
/* The trainer's part of a checkpoint (state.json "trainer"): counters,
 * the data cursor, residue counts and the configuration text. Weights and
 * moments are in the safetensors files beside it. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dp_group.h"
#include "json_input.h"
#include "model_record.h"
#include "resume_check.h"
#include "trainer.h"

esmt_status esmt_trainer_state_to_json(esmt_trainer *t, char **json) {
  json_t *root = json_object();
  json_t *counts = json_array();
  for (int a = 0; a < ESMT_VOCAB_SIZE; a++) json_array_append_new(counts, json_integer((json_int_t)t->aa_counts[a]));
  json_object_set_new(root, "step", json_integer(t->step));
  json_object_set_new(root, "adam_step", json_integer(t->adam_step));
  json_object_set_new(root, "skipped", json_integer(t->skipped));
  json_object_set_new(root, "tokens", json_integer((json_int_t)t->tokens));
  /* LoRA dropout's masks are keyed by the training passes so far
   * (model_lora.c): a resume draws on from there */
  if (t->m->lora_draw)
    json_object_set_new(root, "lora_draw", json_integer((json_int_t)t->m->lora_draw));
  json_object_set_new(root, "elapsed_s", json_real(t->elapsed_before + (esmt_now_s() - t->t_start)));
  json_object_set_new(root, "best_eval_loss",
                      isfinite(t->best_eval_loss) ? json_real(t->best_eval_loss) : json_null());
  json_object_set_new(root, "aa_counts", counts);
  if (t->scaler.enabled)
    json_object_set_new(root, "loss_scale",
                        json_pack("{s:f,s:I,s:i,s:I}", "scale", t->scaler.scale, "clean_run",
                                  (json_int_t)t->scaler.clean_run, "hysteresis_left",
                                  t->scaler.hysteresis_left, "overflows",
                                  (json_int_t)t->scaler.overflows));
  json_t *model = json_pack("{s:i,s:i,s:i,s:i,s:i,s:f}", "num_layers", t->m->L, "hidden_size",
                            t->m->d, "num_heads", t->m->H, "ffn_size", t->m->F, "max_positions",
                            t->m->cfg.max_positions, "layer_norm_eps",
                            (double)t->m->cfg.layer_norm_eps);
  esmt_status rst = model ? esmt_model_record_add(&t->m->cfg, model)
                          : esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "trainer state: out of memory");
  json_object_set_new(root, "model", model);
  if (t->config_text) json_object_set_new(root, "config", json_string(t->config_text));
  /* what a resume compares with (resume_check.h) */
  json_object_set_new(root, "world_size", json_integer(esmt_dp_world(t->dp)));
  uint32_t manifest_crc;
  if (esmt_resume_manifest_crc(t->config_text, &manifest_crc) == 0)
    json_object_set_new(root, "dataset_manifest_crc32", json_integer((json_int_t)manifest_crc));
  json_t *changes = t->resume_changes ? json_loads(t->resume_changes, 0, NULL) : NULL;
  if (changes) json_object_set_new(root, "resume_changes", changes);
  esmt_status st = rst;
  if (!st && t->train.save_cursor) {
    char buf[8192];
    st = t->train.save_cursor(t->train.user, buf, sizeof buf);
    json_error_t err;
    json_t *cur = st ? NULL : json_loads(buf, JSON_DECODE_ANY, &err);
    if (!st && !cur) st = esmt_fail(ESMT_ERR_INTERNAL, "data cursor is not valid JSON");
    if (cur) json_object_set_new(root, "train_cursor", cur);
  }
  *json = st ? NULL : json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!st && !*json) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "trainer state: out of memory");
  return st;
}

static int get_int(json_t *root, const char *k, json_int_t *v) {
  json_t *x = json_object_get(root, k);
  if (!json_is_integer(x)) return 0;
  *v = json_integer_value(x);
  return 1;
}

/* The residue counts behind the amino-acid frequency baseline of every
 * evaluation ("beats composition"): ESMT_VOCAB_SIZE non-negative integers,
 * zero outside the amino acids. Absent: counted again from the validation
 * split at the next evaluation (a warning says so); malformed: refused, as
 * the baseline would be absurd. */
static esmt_status read_aa_counts(esmt_trainer *t, json_t *counts, uint64_t *out) {
  if (!counts) {
    esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_WARN, "the checkpoint has no aa_counts: the "
                    "amino-acid frequency baseline is counted again from the validation split");
    return ESMT_OK;
  }
  if (!json_is_array(counts) || json_array_size(counts) != ESMT_VOCAB_SIZE)
    return esmt_fail(ESMT_ERR_FORMAT, "trainer state aa_counts (the residue counts of the "
                     "amino-acid frequency baseline) %s, not an array of %d counts: the "
                     "checkpoint is damaged (remove the key to have them counted again)",
                     json_is_array(counts) ? "has the wrong length" : "is not an array",
                     ESMT_VOCAB_SIZE);
  uint64_t total = 0;
  for (int a = 0; a < ESMT_VOCAB_SIZE; a++) {
    json_t *c = json_array_get(counts, (size_t)a);
    if (!json_is_integer(c) || json_integer_value(c) < 0 ||
        ((a < 4 || a >= 29) && json_integer_value(c) != 0))
      return esmt_fail(ESMT_ERR_FORMAT, "trainer state aa_counts[%d] is %s: the residue counts "
                       "must be non-negative integers (and 0 for tokens that are not amino "
                       "acids); the checkpoint is damaged (remove the key to have them counted "
                       "again)", a, json_is_integer(c) ? "out of range" : "not an integer");
    out[a] = (uint64_t)json_integer_value(c);
    if (out[a] > UINT64_MAX - total)
      return esmt_fail(ESMT_ERR_FORMAT, "trainer state aa_counts sum past 2^64: the checkpoint "
                       "is damaged");
    total += out[a];
  }
  return ESMT_OK;
}

esmt_status esmt_trainer_state_from_json(esmt_trainer *t, const char *text) {
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) return esmt_fail(ESMT_ERR_FORMAT, "trainer state is not valid JSON: %s", err.text);
  json_int_t step = 0, adam = 0, skipped = 0, tokens = 0;
  esmt_status st = ESMT_OK;
  if (!get_int(root, "step", &step) || !get_int(root, "adam_step", &adam) ||
      !get_int(root, "skipped", &skipped) || !get_int(root, "tokens", &tokens) || step < 0)
    st = esmt_fail(ESMT_ERR_FORMAT, "trainer state lacks step/adam_step/skipped/tokens");
  if (!st && (adam < 0 || skipped < 0 || tokens < 0))
    st = esmt_fail(ESMT_ERR_FORMAT, "trainer state has a negative counter (adam_step %lld, "
                   "skipped %lld, tokens %lld): the checkpoint is damaged", (long long)adam,
                   (long long)skipped, (long long)tokens);
  json_t *best = json_object_get(root, "best_eval_loss");
  if (!st && best && !json_is_null(best) &&
      (!json_is_number(best) || !isfinite(json_number_value(best)) || json_number_value(best) < 0))
    st = esmt_fail(ESMT_ERR_FORMAT, "trainer state best_eval_loss is not a loss (a finite number "
                   ">= 0, or null before the first evaluation): the checkpoint is damaged");
  uint64_t counts[ESMT_VOCAB_SIZE] = {0};
  if (!st) st = read_aa_counts(t, json_object_get(root, "aa_counts"), counts);
  json_t *model = json_object_get(root, "model");
  if (!st && json_is_object(model)) {
    json_int_t L, d, H;
    if (get_int(model, "num_layers", &L) && get_int(model, "hidden_size", &d) &&
        get_int(model, "num_heads", &H) && (L != t->m->L || d != t->m->d || H != t->m->H))
      st = esmt_fail(ESMT_ERR_FORMAT, "checkpoint is of a %lld-layer d=%lld H=%lld model, this "
                     "one is %d-layer d=%d H=%d", (long long)L, (long long)d, (long long)H, t->m->L,
                     t->m->d, t->m->H);
  }
  json_int_t lora_draw = 0;
  if (!st && json_object_get(root, "lora_draw") &&
      (!get_int(root, "lora_draw", &lora_draw) || lora_draw < 0))
    st = esmt_fail(ESMT_ERR_FORMAT, "trainer state lora_draw is not a count (an integer >= 0): "
                   "the checkpoint is damaged");
  json_t *cur = json_object_get(root, "train_cursor");
  if (!st && cur && t->train.restore_cursor) {
    char *ctext = json_dumps(cur, JSON_COMPACT | JSON_ENCODE_ANY);
    st = ctext ? t->train.restore_cursor(t->train.user, ctext)
               : esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
    free(ctext);
    if (st) esmt_fail_prefix(st, "restoring the data position: ");
  }
  if (!st) {
    t->step = step;
    t->adam_step = adam;
    t->skipped = skipped;
    t->tokens = (uint64_t)tokens;
    t->m->lora_draw = (uint64_t)lora_draw;
    json_t *e = json_object_get(root, "elapsed_s");
    t->elapsed_before = json_is_number(e) ? json_number_value(e) : 0.0;
    t->best_eval_loss = json_is_number(best) ? json_number_value(best) : INFINITY;
    /* The scale goes on from where it was (a run saved at the floor
     * resumes there, so lowering the learning rate is what helps). */
    json_t *ls = json_object_get(root, "loss_scale");
    if (t->scaler.enabled && json_is_object(ls)) {
      json_t *sc = json_object_get(ls, "scale");
      json_int_t clean = 0, left = 0, over = 0;
      if (json_is_number(sc) && json_number_value(sc) > 0 && isfinite(json_number_value(sc)))
        t->scaler.scale = json_number_value(sc);
      if (get_int(ls, "clean_run", &clean) && clean >= 0) t->scaler.clean_run = clean;
      if (get_int(ls, "overflows", &over) && over >= 0) t->scaler.overflows = over;
      t->scaler.hysteresis_left =
          get_int(ls, "hysteresis_left", &left) && left > 0 ? (int)left : t->scaler.hysteresis;
    }
    for (int a = 0; a < ESMT_VOCAB_SIZE; a++) t->aa_counts[a] = counts[a];
  }
  json_decref(root);
  return st;
}

esmt_status esmt_trainer_resume_check(esmt_trainer *t, const char *ckpt_dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/state.json", ckpt_dir);
  json_t *root = NULL;
  esmt_status st = esmt_json_load_input(path, "checkpoint state (state.json)", &root);
  if (st) return st;
  json_t *tr = json_object_get(root, "trainer");
  json_t *world = json_object_get(tr, "world_size"), *crc = json_object_get(tr, "dataset_manifest_crc32");
  json_t *step = json_object_get(tr, "step"), *old = json_object_get(tr, "resume_changes");
  esmt_resume_run was = {json_string_value(json_object_get(tr, "config")),
                         json_is_integer(world) ? (int)json_integer_value(world) : 0,
                         json_is_integer(crc) ? json_integer_value(crc) : -1};
  uint32_t now_crc = 0;
  esmt_resume_run now = {t->config_text, esmt_dp_world(t->dp),
                         esmt_resume_manifest_crc(t->config_text, &now_crc) == 0 ? (json_int_t)now_crc : -1};
  json_t *changes = json_is_array(old) ? json_deep_copy(old) : json_array();
  if (!changes) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
  if (!st)
    st = esmt_resume_check(&was, &now, ckpt_dir, json_is_integer(step) ? json_integer_value(step) : 0,
                           &t->m->ctx->logger, changes);
  if (!st && json_array_size(changes)) {
    char *text = json_dumps(changes, JSON_COMPACT);
    if (!text) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "out of memory");
    free(t->resume_changes);
    t->resume_changes = text;
  }
  json_decref(changes);
  json_decref(root);
  return st ? esmt_fail_prefix(st, "%s: ", path) : ESMT_OK;
}
