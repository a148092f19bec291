/* SPDX-License-Identifier: MIT */
/* esmt_embed_dir (infer.h): an embedding output directory that a writer
 * fills protein by protein and an interrupted writer continues. The
 * order that keeps a user's files safe: inspect (nothing changed), under
 * the caller's run.lock inspect again, check the committed ids the input
 * gives again, then record that OUT is this writer's before creating or
 * re-opening any file. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embed_dir.h"
#include "fs_util.h"

static char *dup_or(const char *s, const char *fallback) {
  return strdup(s ? s : fallback);
}

esmt_status esmt_embed_dir_open(const esmt_embed_dir_options *o, esmt_embed_dir **out) {
  static const char fn[] = "esmt_embed_dir_open";
  ESMT_CHECK_ARG(out, fn, "out is NULL");
  *out = NULL;
  ESMT_CHECK_ARG(o, fn, "options is NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_embed_dir_options", o->struct_size,
                                     sizeof(esmt_embed_dir_options));
  if (st) return st;
  ESMT_CHECK_ARG(o->out && o->out[0] && strlen(o->out) < 4000, fn,
                 "out: a directory path (under 4000 bytes)");
  ESMT_CHECK_ARG(o->model && o->model_path && o->input, fn, "model, model_path and input");
  ESMT_CHECK_ARG(o->num_layers > 0 && o->num_layers <= EMBED_MAX_LAYERS && o->layers, fn,
                 "num_layers: 1..64 layers");
  ESMT_CHECK_ARG(o->include && !(o->include & ~15u), fn,
                 "include: ESMT_EMBED_MEAN, _PER_TOKEN, _CLS, _ATTENTION bits");
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  if ((st = esmt_model_get_config(o->model, &mc))) return st;
  for (int j = 0; j < o->num_layers; j++)
    ESMT_CHECK_ARG(o->layers[j] >= 0 && o->layers[j] <= mc.num_layers, fn,
                   "layers: each in 0..the model's depth");
  for (int j = 0; j < o->num_layers && (o->include & ESMT_EMBED_ATTENTION); j++)
    if (o->layers[j] == 0)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: layer 0 (the embedding) has no "
                       "attention maps; layers 1..%d do", fn, mc.num_layers);
  esmt_embed_dir *d = calloc(1, sizeof *d);
  if (!d) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  embed_arrays_init(d);
  snprintf(d->out, sizeof d->out, "%s", o->out);
  d->model = o->model;
  d->model_path = strdup(o->model_path);
  d->model_kind = dup_or(o->model_kind, "esmtrain");
  d->backend = dup_or(o->backend, "");
  d->input = strdup(o->input);
  d->split = dup_or(o->split, "train");
  d->nl = o->num_layers;
  memcpy(d->layers, o->layers, (size_t)o->num_layers * sizeof *o->layers);
  d->include = o->include;
  d->safetensors = o->safetensors != 0;
  d->windows = o->long_policy == ESMT_LONG_WINDOWS;
  d->hidden = mc.hidden_size;
  d->model_layers = mc.num_layers;
  d->max_positions = mc.max_positions;
  d->heads = mc.num_heads;
  d->window = mc.max_positions - 2;
  d->stride = o->stride ? o->stride : (d->window / 2 > 0 ? d->window / 2 : 1);
  if (!d->model_path || !d->model_kind || !d->backend || !d->input || !d->split)
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  else if (d->stride < 1 || d->stride > d->window)
    st = esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "stride %d is more than the window (%d "
                   "residues): residues between windows would have no representation",
                   d->stride, d->window);
  if (!st) st = embed_model_checksum(d->model, d->weights, sizeof d->weights);
  if (!st) st = embed_input_checksum(d->input, d->input_content, sizeof d->input_content);
  if (!st) st = embed_record_check(d);
  if (st) {
    esmt_embed_dir_close(d);
    return st;
  }
  *out = d;
  return ESMT_OK;
}

esmt_status esmt_embed_dir_check(esmt_embed_dir *d) {
  ESMT_CHECK_ARG(d, "esmt_embed_dir_check", "dir is NULL");
  if (d->begun)
    return esmt_fail(ESMT_ERR_STATE, "esmt_embed_dir_check: the files are open already");
  d->skipped = d->skip_hash = 0;
  return embed_record_check(d);
}

esmt_status esmt_embed_dir_status_get(const esmt_embed_dir *d, esmt_embed_dir_status *s) {
  static const char fn[] = "esmt_embed_dir_status_get";
  ESMT_CHECK_ARG(d && s, fn, "dir or status is NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_embed_dir_status", s->struct_size,
                                     sizeof(esmt_embed_dir_status));
  if (st) return st;
  s->state = d->state;
  s->proteins = d->s.proteins;
  s->residues = d->s.residues;
  s->truncated = d->s.truncated;
  s->windowed = d->s.windowed;
  s->unknown_residues = d->s.unknown;
  s->empty = d->s.empty;
  s->staging_removed = d->staging_removed;
  return ESMT_OK;
}

esmt_status esmt_embed_dir_skip(esmt_embed_dir *d, const char *id) {
  ESMT_CHECK_ARG(d && id, "esmt_embed_dir_skip", "dir or id is NULL");
  if (d->state != ESMT_EMBED_DIR_RESUME || d->begun || d->skipped >= d->s.proteins)
    return esmt_fail(ESMT_ERR_STATE, "esmt_embed_dir_skip: no committed protein left to skip");
  d->skip_hash = embed_id_hash(d->skip_hash, id);
  d->skipped++;
  return ESMT_OK;
}

esmt_status esmt_embed_dir_begin(esmt_embed_dir *d) {
  ESMT_CHECK_ARG(d, "esmt_embed_dir_begin", "dir is NULL");
  if (d->begun || d->state == ESMT_EMBED_DIR_COMPLETE)
    return esmt_fail(ESMT_ERR_STATE, "esmt_embed_dir_begin: %s",
                     d->begun ? "begun already" : "the output is complete already");
  esmt_status st = ESMT_OK;
  if (d->state == ESMT_EMBED_DIR_RESUME) {
    if (d->skipped != d->s.proteins || d->skip_hash != d->s.ids_hash)
      return esmt_fail(ESMT_ERR_STATE, "the first %llu proteins of %s are not those %s/ids.txt "
                       "committed: the input changed since the interrupted run. Nothing was "
                       "changed; embed it into a new directory",
                       (unsigned long long)d->s.proteins, d->input, d->out);
    st = embed_arrays_open(d, 1);
  } else {
    /* a new embed (or one restarting an attempt that committed nothing)
     * first records that OUT is this writer's, removes that attempt's
     * files, then creates its own */
    const int restart = d->state == ESMT_EMBED_DIR_RESTART;
    if (restart) st = embed_arrays_clear(d, d->recorded, 1);
    if (!st) st = esmt_mkdir_p(d->out);
    if (!st) st = embed_record_write(d, NULL, 0, 0);
    if (!st && restart) st = embed_arrays_clear(d, d->recorded, 0);
    if (!st) st = embed_arrays_open(d, 0);
  }
  d->begun = 1;
  if (!st && !(d->files = embed_arrays_files(d)))
    st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_embed_dir_begin: out of memory");
  if (!st) st = embed_record_write(d, d->files, 0, 0);
  d->t0 = esmt_now_s();
  return st;
}

static esmt_status need_begun(const esmt_embed_dir *d, const char *fn) {
  ESMT_CHECK_ARG(d, fn, "dir is NULL");
  if (!d->files) return esmt_fail(ESMT_ERR_STATE, "%s: esmt_embed_dir_begin did not succeed", fn);
  return ESMT_OK;
}

esmt_status esmt_embed_dir_append(esmt_embed_dir *d, int count, const char *const *ids,
                                  const esmt_embedding *results, uint64_t unknown_residues) {
  static const char fn[] = "esmt_embed_dir_append";
  esmt_status st = need_begun(d, fn);
  if (st) return st;
  ESMT_CHECK_ARG(count >= 0 && (!count || (ids && results)), fn, "ids and results");
  for (int i = 0; i < count; i++) {
    ESMT_CHECK_ARG(ids[i] && !strchr(ids[i], '\n'), fn, "ids: one line each");
    const esmt_embedding *e = &results[i];
    ESMT_CHECK_ARG(e->kept >= 0 && e->kept <= e->length, fn, "results: kept 0..length");
    ESMT_CHECK_ARG(!(d->include & ESMT_EMBED_MEAN) || e->mean, fn, "results: no mean");
    ESMT_CHECK_ARG(!(d->include & ESMT_EMBED_CLS) || e->cls, fn, "results: no cls");
    ESMT_CHECK_ARG(!(d->include & ESMT_EMBED_PER_TOKEN) || e->per_token || !e->kept, fn,
                   "results: no per_token (esmt_embed_request.per_token)");
    ESMT_CHECK_ARG(!(d->include & ESMT_EMBED_ATTENTION) ||
                   (e->struct_size >= sizeof(esmt_embedding) && (e->attention || !e->kept)),
                   fn, "results: no attention (esmt_embed_request.attention)");
  }
  d->s.unknown += unknown_residues;
  return embed_arrays_append(d, count, ids, results);
}

esmt_status esmt_embed_dir_commit(esmt_embed_dir *d) {
  esmt_status st = need_begun(d, "esmt_embed_dir_commit");
  if (!st) st = embed_arrays_commit(d);
  if (!st) st = embed_record_write(d, d->files, 0, esmt_now_s() - d->t0);
  return st;
}

esmt_status esmt_embed_dir_finish(esmt_embed_dir *d) {
  esmt_status st = need_begun(d, "esmt_embed_dir_finish");
  if (!st && d->safetensors) st = embed_arrays_to_safetensors(d);
  if (!st) st = embed_record_write(d, d->files, 1, esmt_now_s() - d->t0);
  if (!st && d->safetensors) embed_arrays_remove_staging(d);
  if (!st) d->state = ESMT_EMBED_DIR_COMPLETE;
  return st;
}

void esmt_embed_dir_close(esmt_embed_dir *d) {
  if (!d) return;
  embed_arrays_close(d);
  json_decref(d->files);
  json_decref(d->recorded);
  free(d->model_path);
  free(d->model_kind);
  free(d->backend);
  free(d->input);
  free(d->split);
  free(d);
}
