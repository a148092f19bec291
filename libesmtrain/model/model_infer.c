/* SPDX-License-Identifier: MIT */
/* esmt_model_infer: representations and logits without gradient
 * bookkeeping (esmtrain.h). The arena is carved for inference (one layer's
 * intermediates, two residual buffers); the next training forward carves
 * it back. Right-padded rows and packed rows both: a "protein" below is a
 * row, or a segment of a packed row. */
#include <stdlib.h>
#include <string.h>

#include "attention_maps.h"
#include "esmtrain/backend.h"
#include "model.h"

typedef struct infer_job {
  const esmt_infer_request *r;
  const esmt_batch *b;       /* the caller's batch (segments when packed) */
  int layer_of[64];          /* output block of each captured layer */
  uint64_t wanted;           /* the layers asked for (the head also runs to layer L) */
  float *host;               /* [B*T*d] one representation, fp32 */
} infer_job;

/* Proteins of the batch: count, and where protein p starts (flattened
 * position) and how many positions (cls .. eos) it has. */
static int proteins(const esmt_model *m, const esmt_batch *b) {
  return b->num_segments > 0 ? b->num_segments : m->B;
}
static void protein_span(const esmt_model *m, const esmt_batch *b, int p, size_t *start,
                         int *len) {
  if (b->num_segments > 0) {
    *start = (size_t)b->seg_start[p];
    *len = b->seg_len[p];
  } else {
    *start = (size_t)p * (size_t)m->T;
    *len = m->host_seq_len[p];
  }
}

/* The representation [B*T, d] to block k of the requested host outputs. */
static void reduce(const esmt_model *m, const infer_job *j, int k) {
  const esmt_infer_request *r = j->r;
  const int d = m->d, P = proteins(m, j->b);
  const size_t N = (size_t)m->B * (size_t)m->T;
  const float *x = j->host;
  if (r->outputs & ESMT_INFER_PER_TOKEN) {
    float *dst = r->per_token + (size_t)k * N * d;
    memset(dst, 0, N * d * sizeof(float));
    for (int p = 0; p < P; p++) {
      size_t s;
      int len;
      protein_span(m, j->b, p, &s, &len);
      memcpy(dst + s * d, x + s * d, (size_t)len * d * sizeof(float));
    }
  }
  for (int p = 0; p < P; p++) {
    size_t s;
    int len;
    protein_span(m, j->b, p, &s, &len);
    const float *row = x + s * d;
    if (r->outputs & ESMT_INFER_CLS)
      memcpy(r->cls + ((size_t)k * P + p) * d, row, (size_t)d * sizeof(float));
    if (r->outputs & ESMT_INFER_MEAN) {
      float *mean = r->mean + ((size_t)k * P + p) * d;
      const int lo = 1, hi = len - 1; /* the residues: not cls (0), not eos (len - 1) */
      for (int c = 0; c < d; c++) {
        double acc = 0;
        for (int t = lo; t < hi; t++) acc += row[(size_t)t * d + c];
        mean[c] = hi > lo ? (float)(acc / (hi - lo)) : 0.0f;
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

/* A representation, the moment it exists, into the request's outputs. */
static esmt_status capture(esmt_model *m, int layer, const void *rep, void *user) {
  infer_job *j = user;
  if (!(j->wanted >> layer & 1)) return ESMT_OK; /* run for the head only */
  const uint64_t n = (uint64_t)m->B * (uint64_t)m->T * (uint64_t)m->d;
  esmt_status st = download(m, rep, n, j->host);
  if (!st) reduce(m, j, j->layer_of[layer]);
  return st;
}

/* The request's layers as a bit set (bit l: layer l) and each one's output
 * block; fails on a layer out of range or asked for twice. */
static esmt_status layer_set(const esmt_model *m, const esmt_infer_request *r, int n_layers,
                             infer_job *j, uint64_t *set) {
  const char *fn = "esmt_model_infer";
  if (m->L > 62)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: models deeper than 62 layers", fn);
  *set = 0;
  if (!(r->outputs & (ESMT_INFER_PER_TOKEN | ESMT_INFER_MEAN | ESMT_INFER_CLS))) return ESMT_OK;
  for (int k = 0; k < n_layers; k++) {
    const int want = n_layers == 1 && r->num_layers <= 0 ? r->layer : r->layers[k];
    const int l = want < 0 ? m->L : want;
    if (want < -1 || l > m->L)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: layer %d (this model: 0..%d or -1)", fn,
                       want, m->L);
    if (*set >> l & 1)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: layer %d is asked for twice", fn, l);
    *set |= 1ull << l;
    j->layer_of[l] = k;
  }
  return ESMT_OK;
}

static esmt_status infer_unguarded(esmt_model *m, const esmt_batch *b, const esmt_infer_request *r) {
  const char *fn = "esmt_model_infer";
  ESMT_CHECK_ARG(m && b && r, fn, "model, batch and request must not be NULL");
  /* a caller from before num_layers: its struct ends at logits */
  esmt_status st = esmt_check_struct(fn, "esmt_infer_request", r->struct_size,
                                     offsetof(esmt_infer_request, num_layers));
  if (!st) st = esmt_check_struct(fn, "esmt_batch", b->struct_size, offsetof(esmt_batch, num_segments));
  if (st) return st;
  esmt_infer_request rr = ESMT_INFER_REQUEST_INIT;
  memcpy(&rr, r, r->struct_size < sizeof rr ? r->struct_size : sizeof rr);
  esmt_batch bb = ESMT_BATCH_INIT;
  memcpy(&bb, b, b->struct_size < sizeof bb ? b->struct_size : sizeof bb);
  ESMT_CHECK_ARG(bb.tokens, fn, "batch->tokens is NULL");
  if (!rr.outputs || (rr.outputs & ~63u))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: outputs 0x%x (ESMT_INFER_* bits, at least "
                     "one)", fn, rr.outputs);
  if (rr.num_layers < 0 || (rr.num_layers > 0 && !rr.layers))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: num_layers %d needs a layers array", fn,
                     rr.num_layers);
  if (((rr.outputs & ESMT_INFER_PER_TOKEN) && !rr.per_token) ||
      ((rr.outputs & ESMT_INFER_MEAN) && !rr.mean) || ((rr.outputs & ESMT_INFER_CLS) && !rr.cls) ||
      ((rr.outputs & ESMT_INFER_LOGITS) && !rr.logits) ||
      ((rr.outputs & ESMT_INFER_HEAD) && !rr.head) ||
      ((rr.outputs & ESMT_INFER_ATTENTION) && !rr.attention))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: an output asked for has no buffer", fn);
  const int want_head = (rr.outputs & ESMT_INFER_HEAD) != 0;
  if (want_head && m->cfg.head == ESMT_HEAD_NONE)
    return esmt_fail(ESMT_ERR_STATE, "%s: ESMT_INFER_HEAD: the model has no task head", fn);
  infer_job j = {.r = &rr, .b = &bb};
  uint64_t set = 0;
  if ((st = layer_set(m, &rr, rr.num_layers > 0 ? rr.num_layers : 1, &j, &set))) return st;
  bb.labels = NULL;
  esmt_forward_result fr = ESMT_FORWARD_RESULT_INIT;
  if ((st = esmt_model_stage_batch(m, &bb, 2, &fr, fn))) return st;
  const uint64_t N = (uint64_t)m->B * (uint64_t)m->T;
  if (set && !(j.host = malloc(N * (uint64_t)m->d * sizeof(float))))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  const int want_logits = (rr.outputs & ESMT_INFER_LOGITS) != 0;
  j.wanted = set;
  esmt_attention_maps maps = {0};
  const int want_maps = (rr.outputs & ESMT_INFER_ATTENTION) != 0;
  if (want_maps) st = esmt_attention_maps_begin(m, &bb, rr.attention, &maps, fn);
  esmt_lora_begin_pass(m, 0); /* no dropout at inference */
  if (!st)
    st = esmt_model_run_infer(m, want_head ? set | 1ull << m->L : set, want_logits, capture, &j,
                              want_maps ? &maps : NULL);
  if (want_maps) esmt_attention_maps_end(m, &maps);
  free(j.host);
  if (!st && want_head) st = esmt_head_infer(m, &bb, rr.head); /* reads lnf, layer L's */
  if (st || !want_logits) return st;
  if ((st = download(m, m->act.logits, N * (uint64_t)m->V, rr.logits))) return st;
  if (bb.num_segments > 0) {
    esmt_packed_zero_padding(m, &bb, rr.logits);
  } else {
    for (int i = 0; i < m->B; i++) /* padded positions carry no prediction */
      for (int t = m->host_seq_len[i]; t < m->T; t++)
        memset(rr.logits + ((uint64_t)i * m->T + t) * m->V, 0, (size_t)m->V * sizeof(float));
  }
  return ESMT_OK;
}

esmt_status esmt_model_infer(esmt_model *model, const esmt_batch *batch, const esmt_infer_request *request) {
  if (!model) return infer_unguarded(model, batch, request); /* its message */
  esmt_status st = esmt_model_enter(model, "esmt_model_infer");
  if (st) return st;
  st = infer_unguarded(model, batch, request);
  esmt_model_leave(model);
  return st;
}
