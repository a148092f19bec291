/* SPDX-License-Identifier: MIT */
/* esmt_model_save / esmt_model_load: a model on its own, for a training
 * loop of the caller's (esmt_model_optimizer_step): its weights, its
 * optimizer state and the step, as the same files a trainer checkpoint
 * has (checkpoint.h), so that esmt_model_create_from_checkpoint, export
 * and esmt_trainer_init_from read it too. The directory is new (or an
 * empty one the user made): a save never replaces anything (out_dir.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"
#include "json_input.h"
#include "model_record.h"
#include "out_dir.h"

esmt_status esmt_model_save(esmt_model *m, const char *dir, int64_t step) {
  const char *fn = "esmt_model_save";
  ESMT_CHECK_ARG(m && dir && *dir, fn, "model and dir must not be NULL or empty");
  if (step < 0) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: step %lld is negative", fn,
                                 (long long)step);
  json_t *trainer = json_pack("{s:I,s:{s:i,s:i,s:i,s:i,s:i,s:f}}", "step", (json_int_t)step,
                              "model", "num_layers", m->cfg.num_layers, "hidden_size",
                              m->cfg.hidden_size, "num_heads", m->cfg.num_heads, "ffn_size",
                              m->cfg.ffn_size, "max_positions", m->cfg.max_positions,
                              "layer_norm_eps", (double)m->cfg.layer_norm_eps);
  if (!trainer) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  esmt_status rst = esmt_model_record_add(&m->cfg, json_object_get(trainer, "model"));
  if (rst) {
    json_decref(trainer);
    return rst;
  }
  esmt_out_dir od;
  const esmt_out_dir_rules rules = {fn, NULL, NULL, 0, NULL};
  esmt_status st = esmt_out_dir_begin(&od, dir, &rules);
  if (!st) st = esmt_checkpoint_write_files(m, od.work, step, trainer, NULL, NULL, NULL);
  if (!st) st = esmt_out_dir_publish(&od, "state.json");
  if (st) esmt_out_dir_abort(&od);
  json_decref(trainer);
  return st ? esmt_fail_prefix(st, "%s: %s: ", fn, dir) : ESMT_OK;
}

esmt_status esmt_model_load(esmt_model *m, const char *dir, int with_optimizer, int64_t *step) {
  const char *fn = "esmt_model_load";
  ESMT_CHECK_ARG(m && dir, fn, "model and dir must not be NULL");
  char ck[4096], path[4200];
  esmt_status st = esmt_checkpoint_resolve(dir, ck, sizeof ck);
  if (!st) st = esmt_checkpoint_load(m, ck, with_optimizer != 0, NULL);
  if (st) return esmt_fail_prefix(st, "%s: ", fn);
  if (step) { /* state.json was verified by the load */
    snprintf(path, sizeof path, "%s/state.json", ck);
    json_t *root = NULL;
    if ((st = esmt_json_load_input(path, "checkpoint state (state.json)", &root)))
      return esmt_fail_prefix(st, "%s: ", fn);
    *step = (int64_t)json_integer_value(json_object_get(root, "step"));
    json_decref(root);
  }
  return ESMT_OK;
}
