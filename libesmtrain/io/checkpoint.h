/* SPDX-License-Identifier: MIT */
/* Checkpoints: a directory per save,
 *   <run>/checkpoints/step-00000100/{model.safetensors, optimizer.safetensors, state.json}
 * written under a temporary name, fsynced, renamed, the parent fsynced; then
 * <run>/checkpoints/latest (a one-line file naming it) replaced the same
 * way. Retention keeps the newest N, the one `best` names, and `latest`.
 * state.json records each file's size and crc32, so truncation or changes
 * are caught on load. */
#ifndef ESMTRAIN_CHECKPOINT_H
#define ESMTRAIN_CHECKPOINT_H

#include <jansson.h>

#include "model.h"

#define ESMT_CKPT_FORMAT "esmtrain-checkpoint"
#define ESMT_CKPT_VERSION 1

/* Save weights, AdamW moments and `trainer_json` (a JSON object the
 * trainer owns) as step `step`; then prune to keep_last (0 = keep all).
 * *out_dir (may be NULL) receives the checkpoint's path. On failure nothing
 * that existed before is touched. */
ESMT_HIDDEN esmt_status esmt_checkpoint_save(esmt_model *m, const char *run_dir, int64_t step,
                                             const char *trainer_json, int keep_last,
                                             char *out_dir, size_t cap);

/* The same with the master weights and the moments given as host buffers
 * (layout.total each), e.g. gathered from the ZeRO shards of every rank;
 * NULL: the model's. */
ESMT_HIDDEN esmt_status esmt_checkpoint_save_with(esmt_model *m, const char *run_dir,
                                                  int64_t step, const char *trainer_json,
                                                  int keep_last, const float *host_w,
                                                  const float *host_m, const float *host_v,
                                                  char *out_dir, size_t cap);

/* Record `ckpt_dir`'s name as the best checkpoint (kept by pruning). */
/* The files of one checkpoint (model.safetensors, optimizer.safetensors,
 * state.json with `trainer` as its trainer object) written into the
 * existing, empty directory `dir` and synced; master weights from host_w
 * and moments from host_m/host_v when given (ZeRO gathers them), else
 * from the model. */
ESMT_HIDDEN esmt_status esmt_checkpoint_write_files(esmt_model *m, const char *dir, int64_t step,
                                                    json_t *trainer, const float *host_w,
                                                    const float *host_m, const float *host_v);

ESMT_HIDDEN esmt_status esmt_checkpoint_mark_best(const char *run_dir, const char *ckpt_dir);

/* Turn "RUN", "RUN/checkpoints", "RUN/checkpoints/latest" or a checkpoint
 * directory into the checkpoint directory's path. */
ESMT_HIDDEN esmt_status esmt_checkpoint_resolve(const char *spec, char *out, size_t cap);

/* 1 when `name` is a checkpoint directory's name: "step-" and 8 or more
 * digits. */
ESMT_HIDDEN int esmt_checkpoint_name_ok(const char *name);

/* Check a parsed state.json of the checkpoint in ckpt_dir before any file
 * is read: format and version, a 'files' table listing model.safetensors
 * and optimizer.safetensors with sizes and crc32s (names without '/'), and
 * 'step' equal to the trainer's and to the directory's step-N name. */
ESMT_HIDDEN esmt_status esmt_checkpoint_check_state(json_t *root, const char *ckpt_dir);

/* Verify and load a checkpoint into the model: weights always, moments
 * when with_optimizer (only the model's [opt_lo, opt_hi) under ZeRO-1). *trainer_json (may be NULL) receives a malloc'ed
 * copy of the trainer's state. The model is unchanged on failure. */
ESMT_HIDDEN esmt_status esmt_checkpoint_load(esmt_model *m, const char *ckpt_dir,
                                             int with_optimizer, char **trainer_json);

/* Weights only, to/from one safetensors file under HF names. Loading
 * accepts F32/F16/BF16 tensors, ignores known unused HF keys and refuses
 * missing, misshaped or non-finite tensors with the tensor's name. */
ESMT_HIDDEN esmt_status esmt_weights_save(esmt_model *m, const char *path, uint32_t *crc);
ESMT_HIDDEN esmt_status esmt_weights_load(esmt_model *m, const char *path);

/* Building blocks shared by checkpoints and HF import/export. */
struct esmt_st_file;
struct esmt_st_meta;
/* Whole flat buffer (layout.total floats) device <-> host. */
ESMT_HIDDEN esmt_status esmt_flat_download(esmt_model *m, float *host, float *dev_buf);
ESMT_HIDDEN esmt_status esmt_flat_upload(esmt_model *m, const float *host, float *dev_buf);
/* One safetensors file holding nbufs flat host buffers, tensor names
 * prefixed per buffer ("" for weights, "m." / "v." for moments), then, with
 * with_carried, the model's carried tensors byte for byte
 * (carried_tensors.h; for model.safetensors). */
ESMT_HIDDEN esmt_status esmt_write_flat(esmt_model *m, const char *path, const float *const *bufs,
                                        const char *const *prefixes, int nbufs, int with_carried,
                                        const struct esmt_st_meta *meta, int nmeta, uint32_t *crc);
/* Fill `host` (layout order) from tensors "<prefix><name>" of an open
 * file, checking presence, shape, dtype and finiteness; with strict_extra
 * any other tensor (but known unused HF keys) is an error. */
ESMT_HIDDEN esmt_status esmt_read_flat(esmt_model *m, const struct esmt_st_file *f,
                                       const char *path, const char *prefix, float *host,
                                       int strict_extra);
/* The same, where a layout tensor the file lacks and `optional` accepts
 * keeps the value `host` holds (a classification directory has no masked-LM
 * head; a base model has no adapters). */
ESMT_HIDDEN esmt_status esmt_read_flat_keep(esmt_model *m, const struct esmt_st_file *f,
                                            const char *path, const char *prefix, float *host,
                                            int strict_extra,
                                            int (*optional)(const esmt_model *m,
                                                            const char *name));

#endif
