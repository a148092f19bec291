/* SPDX-License-Identifier: MIT */
/* Attention probabilities for esmt_model_infer (attention_maps.h). */
#include <stdlib.h>
#include <string.h>

#include "attention_maps.h"
#include "esmtrain/backend.h"

/* Protein p of the staged batch: first flattened position, positions. */
static void span_of(const esmt_model *m, const esmt_batch *b, int p, uint64_t *start, int *n) {
  if (b->num_segments > 0) {
    *start = (uint64_t)b->seg_start[p];
    *n = b->seg_len[p];
  } else {
    *start = (uint64_t)p * (uint64_t)m->T;
    *n = m->host_seq_len[p];
  }
}

static int proteins(const esmt_model *m, const esmt_batch *b) {
  return b->num_segments > 0 ? b->num_segments : m->B;
}

esmt_status esmt_attention_maps_begin(esmt_model *m, const esmt_batch *b, float *out,
                                      esmt_attention_maps *am, const char *fn) {
  memset(am, 0, sizeof *am);
  if (!m->ops->attention_probs)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: backend %s cannot return attention maps (it "
                     "lacks the attention_probs op of backend ABI 2.2)", fn, m->ops->name);
  am->batch = b;
  am->out = out;
  for (int p = 0; p < proteins(m, b); p++) {
    uint64_t s;
    int n;
    span_of(m, b, p, &s, &n);
    am->layer_floats += (uint64_t)m->H * (uint64_t)n * (uint64_t)n;
  }
  const uint64_t bytes = esmt_attention_maps_buffer_bytes(m->B, m->H, m->T);
  if (!(am->host = malloc(bytes)))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of host memory for attention maps "
                     "(%llu bytes)", fn, (unsigned long long)bytes);
  return esmt_model_dev_alloc(m, bytes, (void **)&am->dev, "attention maps");
}

esmt_status esmt_attention_maps_layer(esmt_model *m, int l, esmt_attention_maps *am) {
  const int B = m->B, T = m->T, H = m->H;
  esmtb_attention_args at = esmt_attention_args(m, l);
  at.probs = am->dev;
  ESMT_OP(m, attention_probs, at, "inference: attention maps");
  const uint64_t bytes = esmt_attention_maps_buffer_bytes(B, H, T);
  esmtb_status cs = m->ops->copy_async(m->dev, am->host, am->dev, bytes, ESMTB_COPY_D2H,
                                       m->stream);
  if (!cs) cs = m->ops->stream_sync(m->dev, m->stream);
  if (cs) return esmt_fail_prefix((esmt_status)cs, "inference: attention maps: download: ");
  float *dst = am->out + (uint64_t)l * am->layer_floats;
  for (int p = 0; p < proteins(m, am->batch); p++) {
    uint64_t s;
    int n;
    span_of(m, am->batch, p, &s, &n);
    const uint64_t b = s / (uint64_t)T, t0 = s % (uint64_t)T;
    for (int h = 0; h < H; h++)
      for (int i = 0; i < n; i++, dst += n)
        memcpy(dst, am->host + ((b * H + h) * T + t0 + i) * T + t0, (size_t)n * sizeof(float));
  }
  return ESMT_OK;
}

uint64_t esmt_attention_maps_buffer_bytes(int B, int H, int T) {
  return (uint64_t)B * (uint64_t)H * (uint64_t)T * (uint64_t)T * sizeof(float);
}

void esmt_attention_maps_end(esmt_model *m, esmt_attention_maps *am) {
  if (am->dev) m->ops->free(m->dev, ESMTB_MEM_DEVICE, am->dev);
  free(am->host);
  memset(am, 0, sizeof *am);
}
