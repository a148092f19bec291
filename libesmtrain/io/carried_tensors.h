/* SPDX-License-Identifier: MIT */
/* Tensors of a Hugging Face ESM-2 directory that esmtrain does not train,
 * carried byte for byte (name, dtype, shape, bytes) from import through
 * checkpoints, resumes and exports, so that an HF directory taken through
 * esmtrain comes back bit-identical:
 *   esm.encoder.layer.{i}.attention.self.rotary_embeddings.inv_freq
 *       published checkpoints hold fp16-rounded values; the model computes
 *       with them (esmt_model_set_inv_freq), so they change the logits;
 *   esm.contact_head.regression.{weight,bias}  (trained in published ones)
 *   esm.embeddings.position_embeddings.weight, esm.embeddings.position_ids
 *   lm_head.decoder.weight/bias  (the tied copy: an export writes the
 *       current embedding in its place). */
#ifndef ESMTRAIN_CARRIED_TENSORS_H
#define ESMTRAIN_CARRIED_TENSORS_H

#include "model.h"
#include "safetensors.h"

/* 1 when `name` is one of the carried (not trained) HF tensors. */
ESMT_HIDDEN int esmt_carried_name(const char *name);

/* Copy every carried tensor of `f` into a new list (*out, *n; freed with
 * esmt_carried_free). The rotary inv_freq tensors must hold hd/2 finite,
 * positive floating values each, all layers the same (one table computes);
 * errors name `path`. */
ESMT_HIDDEN esmt_status esmt_carried_collect(const esmt_model *m, const esmt_st_file *f,
                                             const char *path, esmt_carried_tensor **out,
                                             int *n);

ESMT_HIDDEN void esmt_carried_free(esmt_carried_tensor *list, int n);

/* Make `list` the model's carried tensors (the model owns it from here,
 * also on failure) and install its rotary frequencies: layer 0's inv_freq
 * if carried, else the computed default. */
ESMT_HIDDEN esmt_status esmt_carried_install(esmt_model *m, esmt_carried_tensor *list, int n);

/* The model's carried tensor `name`, or NULL. */
ESMT_HIDDEN const esmt_carried_tensor *esmt_carried_find(const esmt_model *m, const char *name);

/* A carried tensor's value count, and its values as fp32 (numel floats). */
ESMT_HIDDEN uint64_t esmt_carried_numel(const esmt_carried_tensor *c);
ESMT_HIDDEN void esmt_carried_to_f32(const esmt_carried_tensor *c, float *out);

/* Carry `name` as an fp32 tensor of `shape` with a copy of `values`,
 * replacing the model's tensor of that name (a trained contact head). */
ESMT_HIDDEN esmt_status esmt_carried_put_f32(esmt_model *m, const char *name, int ndim,
                                             const int64_t *shape, const float *values);

#endif
