/* SPDX-License-Identifier: MIT */
/* Attention probabilities on the inference path (esmt_model_infer with
 * ESMT_INFER_ATTENTION): after each layer's forward the backend's
 * attention_probs op recomputes that layer's softmax from the q/k the
 * forward produced (projection here, rotary and scale in the backend, as
 * the forward applies them) into a [B, H, T, T] device buffer, which is
 * downloaded and cut into each protein's [H, n, n] block. Training never
 * comes here: its attention stays in the flash kernels. */
#ifndef ESMTRAIN_ATTENTION_MAPS_H
#define ESMTRAIN_ATTENTION_MAPS_H

#include "model.h"

struct esmt_attention_maps {
  const esmt_batch *batch;   /* the staged batch (segments when packed) */
  float *out;                /* the caller's esmt_infer_request.attention */
  float *dev;                /* [B, H, T, T] on the device */
  float *host;               /* the same on the host */
  uint64_t layer_floats;     /* H * sum of n_p^2: one layer's block of out */
};

/* Check the backend has the op and allocate the buffers for the staged
 * batch (m->B, m->T set). Messages start with fn. */
ESMT_HIDDEN esmt_status esmt_attention_maps_begin(esmt_model *m, const esmt_batch *b, float *out,
                                                  esmt_attention_maps *am, const char *fn);
/* Layer l's probabilities into its block of out (after esmt_layer_forward). */
ESMT_HIDDEN esmt_status esmt_attention_maps_layer(esmt_model *m, int l, esmt_attention_maps *am);
ESMT_HIDDEN void esmt_attention_maps_end(esmt_model *m, esmt_attention_maps *am);
/* The [B, H, T, T] fp32 buffer's bytes (on the device and on the host). */
ESMT_HIDDEN uint64_t esmt_attention_maps_buffer_bytes(int B, int H, int T);

#endif
