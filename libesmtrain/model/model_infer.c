/* esmt_model_infer: representations and logits without gradient
 * bookkeeping (esmtrain.h). The arena is carved for inference (one layer's
 * intermediates, two residual buffers); the next training forward carves
 * it back. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* The representation [N, d] (compute dtype) to the requested host outputs. */
static void reduce(const esmt_model *m, const float *x, const esmt_infer_request *r) {
  const int B = m->B, T = m->T, d = m->d;
  for (int b = 0; b < B; b++) {
    const int len = m->host_seq_len[b]; /* cls + residues + eos */
    const float *row = x + (size_t)b * T * d;
    if (r->outputs & ESMT_INFER_PER_TOKEN) {
      float *dst = r->per_token + (size_t)b * T * d;
      memcpy(dst, row, (size_t)len * d * sizeof(float));
      memset(dst + (size_t)len * d, 0, (size_t)(T - len) * d * sizeof(float));
    }
    if (r->outputs & ESMT_INFER_CLS) memcpy(r->cls + (size_t)b * d, row, (size_t)d * sizeof(float));
    if (r->outputs & ESMT_INFER_MEAN) {
      float *mean = r->mean + (size_t)b * d;
      const int lo = 1, hi = len - 1; /* the residues: not cls (0), not eos (len - 1) */
      for (int j = 0; j < d; j++) {
        double s = 0;
        for (int t = lo; t < hi; t++) s += row[(size_t)t * d + j];
        mean[j] = hi > lo ? (float)(s / (hi - lo)) : 0.0f;
      }
    }
  }
}

static esmt_status download(esmt_model *m, const void *dev, uint64_t n, float *host) {
  void *half = m->dtype != ESMTB_F32 ? malloc(n * m->esize) : NULL;
  if (m->dtype != ESMTB_F32 && !half)
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_model_infer: out of host memory");
  esmtb_status cs = m->ops->copy_async(m->dev, half ? half : (void *)host, dev, n * m->esize,
                                       ESMTB_COPY_D2H, m->stream);
  if (!cs) cs = m->ops->stream_sync(m->dev, m->stream);
  if (!cs && half) esmt_to_f32(m->dtype, half, host, n);
  free(half);
  return cs ? esmt_fail_prefix((esmt_status)cs, "esmt_model_infer: download: ") : ESMT_OK;
}

/* The representation, the moment it exists, into the request's outputs. */
static esmt_status capture(esmt_model *m, const void *rep, void *user) {
  const esmt_infer_request *r = user;
  if (!(r->outputs & (ESMT_INFER_PER_TOKEN | ESMT_INFER_MEAN | ESMT_INFER_CLS))) return ESMT_OK;
  const uint64_t n = (uint64_t)m->B * (uint64_t)m->T * (uint64_t)m->d;
  float *x = malloc(n * sizeof *x);
  if (!x) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_model_infer: out of host memory");
  esmt_status st = download(m, rep, n, x);
  if (!st) reduce(m, x, r);
  free(x);
  return st;
}

esmt_status esmt_model_infer(esmt_model *m, const esmt_batch *b, const esmt_infer_request *r) {
  const char *fn = "esmt_model_infer";
  ESMT_CHECK_ARG(m && b && r, fn, "model, batch and request must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_infer_request", r->struct_size, sizeof *r);
  if (!st) st = esmt_check_struct(fn, "esmt_batch", b->struct_size, offsetof(esmt_batch, num_segments));
  if (st) return st;
  esmt_batch bb = ESMT_BATCH_INIT;
  memcpy(&bb, b, b->struct_size < sizeof bb ? b->struct_size : sizeof bb);
  ESMT_CHECK_ARG(bb.tokens, fn, "batch->tokens is NULL");
  if (bb.num_segments)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: packed rows are not supported yet; give one "
                     "protein per row", fn);
  const int layer = r->layer < 0 ? m->L : r->layer;
  if (layer > m->L || !r->outputs || (r->outputs & ~15u))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: layer %d (this model: 0..%d or -1) and "
                     "outputs 0x%x (ESMT_INFER_* bits, at least one)", fn, r->layer, m->L,
                     r->outputs);
  if (((r->outputs & ESMT_INFER_PER_TOKEN) && !r->per_token) ||
      ((r->outputs & ESMT_INFER_MEAN) && !r->mean) || ((r->outputs & ESMT_INFER_CLS) && !r->cls) ||
      ((r->outputs & ESMT_INFER_LOGITS) && !r->logits))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: an output asked for has no buffer", fn);
  bb.labels = NULL;
  esmt_forward_result fr = ESMT_FORWARD_RESULT_INIT;
  if ((st = esmt_model_stage_batch(m, &bb, 2, &fr, fn))) return st;
  const int want_logits = (r->outputs & ESMT_INFER_LOGITS) != 0;
  if ((st = esmt_model_run_infer(m, layer, want_logits, capture, (void *)r))) return st;
  const uint64_t N = (uint64_t)m->B * (uint64_t)m->T;
  if (want_logits) {
    if ((st = download(m, m->act.logits, N * (uint64_t)m->V, r->logits))) return st;
    for (int i = 0; i < m->B; i++) /* padded positions carry no prediction */
      for (int t = m->host_seq_len[i]; t < m->T; t++)
        memset(r->logits + ((uint64_t)i * m->T + t) * m->V, 0, (size_t)m->V * sizeof(float));
  }
  return ESMT_OK;
}
