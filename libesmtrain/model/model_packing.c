/* SPDX-License-Identifier: MIT */
/* Packed rows on the model side: host checks of a packed esmt_batch and
 * the device copy of its segments (esmt_packed in model.h), which
 * esmt_embed_args / esmt_attention_args hand to the backend (ABI 1.3). */
#include <stdlib.h>
#include <string.h>

#include "ops_table.h"
#include "model.h"

esmt_status esmt_packing_supported(const esmtb_ops *ops) {
  if (ops->caps & ESMTB_CAP_VARLEN) return ESMT_OK;
  return esmt_fail(ESMT_ERR_UNSUPPORTED, "backend %s does not support packed rows (needs "
                   "ESMTB_CAP_VARLEN, which it does not have)", ops->name);
}

/* Room on the device for n segments (start, len and scale arrays). */
static esmt_status reserve(esmt_model *m, int n) {
  esmt_packed *p = &m->packed;
  if (p->buf && n <= p->cap) return ESMT_OK;
  int cap = p->cap > n ? p->cap : n;
  if (cap < 64) cap = 64;
  const uint64_t slot = ((uint64_t)cap * 4 + 255) & ~(uint64_t)255;
  void *buf = NULL;
  esmtb_status bs = m->ops->alloc(m->dev, ESMTB_MEM_DEVICE, 3 * slot, &buf);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "packed rows: %d segments: ", cap);
  if (p->buf) {
    m->ops->stream_sync(m->dev, m->stream); /* the old arrays may still be read */
    m->ops->free(m->dev, ESMTB_MEM_DEVICE, p->buf);
  }
  p->buf = buf;
  p->start = (int32_t *)buf;
  p->len = (int32_t *)((char *)buf + slot);
  p->scale = (float *)((char *)buf + 2 * slot);
  p->cap = cap;
  return ESMT_OK;
}

void esmt_packed_free(esmt_model *m) {
  if (m->packed.buf) m->ops->free(m->dev, ESMTB_MEM_DEVICE, m->packed.buf);
  memset(&m->packed, 0, sizeof m->packed);
}

/* Segments ascending, disjoint, each inside one row; tokens inside them
 * real ids (not padding), outside them padding without a label. */
static esmt_status check(const esmt_model *m, const esmt_batch *b, esmt_forward_result *r,
                         int *max_len) {
  const char *fn = "esmt_model_forward";
  const int T = b->seq_len, n = b->num_segments;
  const int64_t N = (int64_t)b->batch * T;
  if (!b->seg_start || !b->seg_len)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %d segments but seg_start/seg_len is NULL",
                     fn, n);
  if ((int64_t)n > N)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %d segments in %lld positions", fn, n,
                     (long long)N);
  uint64_t selected = 0, real = 0;
  int64_t next = 0; /* first position after the previous segment */
  *max_len = 0;
  for (int s = 0; s <= n; s++) {
    const int64_t st = s < n ? b->seg_start[s] : N, len = s < n ? b->seg_len[s] : 0;
    if (s < n && (len < 1 || st < next || st + len > N || st / T != (st + len - 1) / T))
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: segment %d (start %lld, length %lld) "
                       "must have length >= 1, start after segment %d and lie inside one row "
                       "of %d positions", fn, s, (long long)st, (long long)len, s - 1, T);
    for (int64_t k = next; k < st; k++) /* the gap before it: padding */
      if (b->tokens[k] != ESMT_TOKEN_PAD || (b->labels && b->labels[k] != ESMT_LABEL_IGNORE))
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: position %lld is in no segment but "
                         "holds token %d%s (must be padding)", fn, (long long)k, b->tokens[k],
                         b->labels && b->labels[k] != ESMT_LABEL_IGNORE ? " with a label" : "");
    for (int64_t k = st; k < st + len; k++) {
      const int32_t tok = b->tokens[k], lab = b->labels ? b->labels[k] : ESMT_LABEL_IGNORE;
      if (tok < 0 || tok >= m->V || tok == ESMT_TOKEN_PAD)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: segment %d position %lld: token id %d "
                         "is not a non-padding id in [0, %d)", fn, s, (long long)k, tok, m->V);
      if (lab != ESMT_LABEL_IGNORE && (lab < 0 || lab >= m->V))
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: position %lld: label %d is neither %d "
                         "nor in [0, %d)", fn, (long long)k, lab, ESMT_LABEL_IGNORE, m->V);
      selected += lab != ESMT_LABEL_IGNORE;
    }
    real += (uint64_t)len;
    if (len > *max_len) *max_len = (int)len;
    next = st + len;
  }
  r->selected = selected;
  r->real_tokens = real;
  return ESMT_OK;
}

esmt_status esmt_packed_prepare(esmt_model *m, const esmt_batch *b, esmt_forward_result *r) {
  esmt_status st = esmt_packing_supported(m->ops);
  if (st) return esmt_fail_prefix(st, "esmt_model_forward: ");
  int max_len = 0;
  if ((st = check(m, b, r, &max_len))) return st;
  /* seq_len stays a valid right-padded description for the backend, which
   * ignores it with segments */
  for (int i = 0; i < b->batch; i++) m->host_seq_len[i] = b->seq_len;
  if ((st = reserve(m, b->num_segments))) return esmt_fail_prefix(st, "esmt_model_forward: ");
  const uint64_t bytes = (uint64_t)b->num_segments * sizeof(int32_t);
  esmtb_status cs = m->ops->copy_async(m->dev, m->packed.start, b->seg_start, bytes,
                                       ESMTB_COPY_H2D, m->stream);
  if (!cs) cs = m->ops->copy_async(m->dev, m->packed.len, b->seg_len, bytes, ESMTB_COPY_H2D,
                                   m->stream);
  /* No sync: a copy from pageable memory reads it before copy_async
   * returns (backend.h), so the caller may change its arrays at once. */
  if (cs) return esmt_fail_prefix((esmt_status)cs, "esmt_model_forward: upload: ");
  m->packed.nseg = b->num_segments;
  m->packed.max_len = max_len;
  return ESMT_OK;
}

void esmt_packed_zero_padding(const esmt_model *m, const esmt_batch *b, float *logits) {
  const int64_t N = (int64_t)b->batch * b->seq_len;
  int64_t next = 0;
  for (int s = 0; s <= b->num_segments; s++) {
    const int64_t st = s < b->num_segments ? b->seg_start[s] : N;
    if (st > next)
      memset(logits + next * m->V, 0, (size_t)(st - next) * (size_t)m->V * sizeof(float));
    if (s < b->num_segments) next = st + b->seg_len[s];
  }
}
