/* SPDX-License-Identifier: MIT */
/* The task heads on the encoder (esmt_model_config.head, docs/finetune.md):
 *   sequence: pooled = P . lnf (P [B, N] picks each row's <cls> or averages
 *             its residues), y = out_proj(tanh(dense(pooled))), as
 *             transformers' EsmClassificationHead at eval (no dropout);
 *             loss cross-entropy (class weights), BCE with logits or MSE;
 *   residue:  y = classifier(lnf) per position, cross-entropy over the
 *             labelled positions (the backend's xent op).
 * The GEMMs run on the backend; the sequence head's tanh and loss, over
 * B x d and B x num_labels values, run on the host in double (no backend
 * op has them), so every backend runs the heads unchanged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/backend.h"
#include "model.h"

struct esmt_head {
  void *dev;            /* one device allocation behind the pointers below */
  uint64_t dev_bytes;
  void *pool;           /* [B, N] pooling matrix P (sequence heads) */
  void *pooled, *h, *dh, *dpooled; /* [B, d] each */
  void *out, *dout;     /* [rows, C] outputs and their gradient */
  /* host: the batch's targets and weights, tanh values, outputs, staging */
  float *targets, *weights, *h32, *out32, *stage;
  uint64_t host_cap;
  double loss_sum;
  int rows;             /* B (sequence heads) or B*T (residue) */
};

static int sequence_head(const esmt_model *m) {
  return m->cfg.head != ESMT_HEAD_NONE && m->cfg.head != ESMT_HEAD_RESIDUE_CLASS;
}

void esmt_head_free(esmt_model *m) {
  struct esmt_head *h = m->head;
  if (!h) return;
  if (h->dev && m->dev) m->ops->free(m->dev, ESMTB_MEM_DEVICE, h->dev);
  free(h->targets);
  free(h->weights);
  free(h->h32);
  free(h->out32);
  free(h->stage);
  free(h);
  m->head = NULL;
}

static esmt_status transfer(esmt_model *m, void *dst, const void *src, uint64_t bytes,
                            esmtb_copy_kind kind, int sync, const char *where) {
  esmtb_status cs = m->ops->copy_async(m->dev, dst, src, bytes, kind, m->stream);
  if (!cs && sync) cs = m->ops->stream_sync(m->dev, m->stream);
  return cs ? esmt_fail_prefix((esmt_status)cs, "%s: ", where) : ESMT_OK;
}

/* fp32 host values to the compute dtype on the device (through `stage`). */
static esmt_status upload_f32(esmt_model *m, void *dst, const float *src, uint64_t n,
                              const char *where) {
  const void *from = src;
  if (m->dtype != ESMTB_F32) {
    uint16_t *s = (uint16_t *)m->head->stage;
    for (uint64_t i = 0; i < n; i++)
      s[i] = m->dtype == ESMTB_BF16 ? esmt_f32_to_bf16(src[i]) : esmt_f32_to_f16(src[i]);
    from = s;
  }
  /* synchronous: `stage` is reused by the next upload */
  return transfer(m, dst, from, n * m->esize, ESMTB_COPY_H2D, 1, where);
}

/* Device values in the compute dtype to fp32 host values. */
static esmt_status download_f32(esmt_model *m, float *dst, const void *src, uint64_t n,
                                const char *where) {
  void *to = m->dtype == ESMTB_F32 ? (void *)dst : m->head->stage;
  esmt_status st = transfer(m, to, src, n * m->esize, ESMTB_COPY_D2H, 1, where);
  if (!st && to != (void *)dst) esmt_to_f32(m->dtype, to, dst, n);
  return st;
}

/* Device and host room for a B x T batch. */
static esmt_status reserve(esmt_model *m, int B, int T, const char *fn) {
  if (!m->head && !(m->head = calloc(1, sizeof *m->head)))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  struct esmt_head *h = m->head;
  const uint64_t N = (uint64_t)B * (uint64_t)T, d = (uint64_t)m->d, C = (uint64_t)m->cfg.num_labels;
  const int seq = sequence_head(m);
  const uint64_t rows = seq ? (uint64_t)B : N;
  const uint64_t pool = seq ? (uint64_t)B * N : 0, bd = seq ? (uint64_t)B * d : 0;
  const uint64_t elems = pool + 4 * bd + 2 * rows * C;
  const uint64_t bytes = elems * m->esize;
  if (bytes > h->dev_bytes) {
    if (h->dev) m->ops->free(m->dev, ESMTB_MEM_DEVICE, h->dev);
    h->dev = NULL;
    h->dev_bytes = 0;
    esmt_status st = esmt_model_dev_alloc(m, bytes, &h->dev, "task head buffers");
    if (st) return esmt_fail_prefix(st, "%s: ", fn);
    h->dev_bytes = bytes;
  }
  char *p = h->dev;
  h->pool = p, p += pool * m->esize;
  h->pooled = p, p += bd * m->esize;
  h->h = p, p += bd * m->esize;
  h->dh = p, p += bd * m->esize;
  h->dpooled = p, p += bd * m->esize;
  h->out = p, p += rows * C * m->esize;
  h->dout = p;
  /* each host buffer as large as the largest of the three sizes, so that
   * one capacity covers them whatever the batch shape grows in */
  uint64_t host = pool > rows * C ? pool : rows * C;
  if (bd > host) host = bd;
  if (host > h->host_cap) {
    float *t = realloc(h->targets, (size_t)host * sizeof *t);
    if (t) h->targets = t;
    float *w = t ? realloc(h->h32, (size_t)host * sizeof *w) : NULL;
    if (w) h->h32 = w;
    float *o = w ? realloc(h->out32, (size_t)host * sizeof *o) : NULL;
    if (o) h->out32 = o;
    float *s = o ? realloc(h->stage, (size_t)host * sizeof *s) : NULL;
    if (s) h->stage = s;
    if (!s) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory for the task head", fn);
    h->host_cap = host;
  }
  if (!h->weights && !(h->weights = malloc((size_t)C * sizeof *h->weights)))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  h->rows = (int)rows;
  return ESMT_OK;
}

/* The pooling matrix of a right-padded batch: row b picks position 0
 * (<cls>) or averages the positions before seq_len that are neither <cls>
 * nor <eos>. */
static esmt_status pooling_matrix(esmt_model *m, const esmt_batch *b, const char *fn) {
  const int B = b->batch, T = b->seq_len;
  const uint64_t N = (uint64_t)B * (uint64_t)T;
  float *P32 = malloc((size_t)((uint64_t)B * N) * sizeof *P32);
  if (!P32) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory for pooling", fn);
  memset(P32, 0, (size_t)((uint64_t)B * N) * sizeof *P32);
  for (int r = 0; r < B; r++) {
    float *row = P32 + (uint64_t)r * N + (uint64_t)r * T;
    if (m->cfg.pooling == ESMT_POOL_CLS) {
      row[0] = 1.0f;
      continue;
    }
    const int32_t *tok = b->tokens + (uint64_t)r * T;
    int n = 0;
    for (int t = 0; t < m->host_seq_len[r]; t++) n += tok[t] != ESMT_TOKEN_CLS && tok[t] != ESMT_TOKEN_EOS;
    if (!n) {
      free(P32);
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: row %d has no residue to average "
                       "(pooling mean)", fn, r);
    }
    for (int t = 0; t < m->host_seq_len[r]; t++)
      if (tok[t] != ESMT_TOKEN_CLS && tok[t] != ESMT_TOKEN_EOS) row[t] = 1.0f / (float)n;
  }
  esmt_status st = upload_f32(m, m->head->pool, P32, (uint64_t)B * N, fn);
  free(P32);
  return st;
}

/* The targets of a sequence head: checked, kept, and the loss's
 * normalizer (scored rows, their class weights' sum, or B x C values). */
static esmt_status sequence_targets(esmt_model *m, const esmt_batch *b, esmt_forward_result *r,
                                    const char *fn) {
  struct esmt_head *h = m->head;
  const int B = b->batch, C = m->cfg.num_labels;
  if (!b->targets)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: a sequence head needs batch->targets", fn);
  for (int c = 0; c < C; c++) {
    h->weights[c] = b->class_weights ? b->class_weights[c] : 1.0f;
    if (!(h->weights[c] >= 0.0f) || !isfinite(h->weights[c]))
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: class weight %d is %g (need a finite "
                       "value >= 0)", fn, c, (double)h->weights[c]);
  }
  const int per_row = m->cfg.head == ESMT_HEAD_SEQ_CLASS ? 1 : C;
  double denom = 0.0;
  uint64_t scored = 0;
  for (int i = 0; i < B * per_row; i++) {
    const float t = b->targets[i];
    h->targets[i] = t;
    if (!isfinite(t))
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: row %d: target %g is not finite", fn,
                       i / per_row, (double)t);
    if (m->cfg.head == ESMT_HEAD_SEQ_CLASS) {
      if (t == (float)ESMT_LABEL_IGNORE) continue;
      if (t != floorf(t) || t < 0.0f || t >= (float)C)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: row %d: class %g is neither %d nor "
                         "in [0, %d)", fn, i, (double)t, ESMT_LABEL_IGNORE, C);
      denom += h->weights[(int)t];
    } else {
      if (m->cfg.head == ESMT_HEAD_MULTILABEL && t != 0.0f && t != 1.0f)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: row %d label %d: %g is neither 0 "
                         "nor 1", fn, i / C, i % C, (double)t);
      denom += 1.0;
    }
    scored++;
  }
  r->selected = scored;
  m->selected = scored;
  m->normalizer = b->loss_normalizer > 0 ? b->loss_normalizer : denom;
  return ESMT_OK;
}

esmt_status esmt_head_stage(esmt_model *m, const esmt_batch *b, esmt_forward_result *r,
                            const char *fn) {
  esmt_status st = reserve(m, b->batch, b->seq_len, fn);
  if (st) return st;
  if (b->num_segments > 0)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: a task head takes right-padded rows, not "
                     "packed ones", fn);
  if (!sequence_head(m)) { /* residue: the labels, checked against num_labels already */
    m->normalizer = b->loss_normalizer > 0 ? b->loss_normalizer : (double)r->selected;
    return ESMT_OK;
  }
  if ((st = sequence_targets(m, b, r, fn))) return st;
  return pooling_matrix(m, b, fn);
}

/* C[m,n] = A[m,k] . B[k,n] (trans_a: A^T with A stored [k,m]), compute dtype. */
static esmt_status matmul(esmt_model *m, int trans_a, int M, int n, int k, const void *a, int lda,
                          const void *b, void *c, const char *where) {
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g;
  g.dtype = m->dtype;
  g.trans_a = trans_a;
  g.m = M; g.n = n; g.k = k;
  g.alpha = 1.0f;
  g.a = a; g.lda = lda;
  g.b = b; g.ldb = n;
  g.c = c; g.ldc = n;
  ESMT_OP(m, gemm, g, where);
  return ESMT_OK;
}

/* Loss and d loss / d output of a sequence head's outputs, in double. */
static void sequence_loss(esmt_model *m, float *dout) {
  struct esmt_head *h = m->head;
  const int B = h->rows, C = m->cfg.num_labels;
  const double scale = m->normalizer > 0 ? 1.0 / m->normalizer : 0.0;
  double sum = 0.0;
  for (int r = 0; r < B; r++) {
    const float *z = h->out32 + (uint64_t)r * C;
    float *dz = dout + (uint64_t)r * C;
    if (m->cfg.head == ESMT_HEAD_SEQ_CLASS) {
      const float t = h->targets[r];
      if (t == (float)ESMT_LABEL_IGNORE) {
        for (int c = 0; c < C; c++) dz[c] = 0.0f;
        continue;
      }
      const int y = (int)t;
      double mx = z[0], se = 0.0;
      for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
      for (int c = 0; c < C; c++) se += exp(z[c] - mx);
      const double lse = mx + log(se), w = h->weights[y];
      sum += w * (lse - z[y]);
      for (int c = 0; c < C; c++) dz[c] = (float)(w * (exp(z[c] - lse) - (c == y)) * scale);
      continue;
    }
    for (int c = 0; c < C; c++) {
      const double x = z[c], t = h->targets[(uint64_t)r * C + c];
      if (m->cfg.head == ESMT_HEAD_MULTILABEL) { /* stable BCE with logits */
        sum += (x > 0 ? x : 0) - x * t + log1p(exp(-fabs(x)));
        dz[c] = (float)((1.0 / (1.0 + exp(-x)) - t) * scale);
      } else {
        sum += (x - t) * (x - t);
        dz[c] = (float)(2.0 * (x - t) * scale);
      }
    }
  }
  h->loss_sum = sum;
}

/* The head's outputs into h->out (device); a sequence head's also into
 * h->out32 (host), where its loss is computed. */
static esmt_status head_outputs(esmt_model *m, const char *where) {
  struct esmt_head *h = m->head;
  const esmt_layout *ly = &m->layout;
  const int B = m->B, N = m->B * m->T, d = m->d, C = m->cfg.num_labels;
  esmt_status st;
  if (!sequence_head(m))
    return esmt_model_linear(m, m->act.lnf, ly->cls_out_w, ly->cls_out_b, h->out, N, d, C, where);
  if ((st = matmul(m, 0, B, d, N, h->pool, N, m->act.lnf, h->pooled, where))) return st;
  if ((st = esmt_model_linear(m, h->pooled, ly->cls_dense_w, ly->cls_dense_b, h->h, B, d, d,
                              where)))
    return st;
  const uint64_t bd = (uint64_t)B * (uint64_t)d;
  if ((st = download_f32(m, h->h32, h->h, bd, where))) return st;
  for (uint64_t i = 0; i < bd; i++) h->h32[i] = (float)tanh((double)h->h32[i]);
  if ((st = upload_f32(m, h->h, h->h32, bd, where))) return st;
  if ((st = esmt_model_linear(m, h->h, ly->cls_out_w, ly->cls_out_b, h->out, B, d, C, where)))
    return st;
  return download_f32(m, h->out32, h->out, (uint64_t)B * (uint64_t)C, where);
}

esmt_status esmt_head_run_forward(esmt_model *m) {
  struct esmt_head *h = m->head;
  const int B = m->B, N = m->B * m->T, C = m->cfg.num_labels;
  esmt_status st = head_outputs(m, "forward: task head");
  if (st) return st;
  if (!sequence_head(m)) {
    esmtb_status ms = m->ops->memset_async(m->dev, m->act.loss_sum, 0, sizeof(float), m->stream);
    if (ms) return esmt_fail_prefix((esmt_status)ms, "forward: ");
    esmtb_xent_args x = {0};
    x.struct_size = sizeof x;
    x.dtype = m->dtype;
    x.N = N; x.V = C;
    x.logits = h->out;
    x.labels = m->act.labels;
    x.loss_sum = m->act.loss_sum;
    x.dlogits = h->dout;
    x.grad_scale = m->normalizer > 0 ? (float)(1.0 / m->normalizer) : 0.0f;
    ESMT_OP(m, xent, x, "forward: residue cross-entropy");
    return ESMT_OK;
  }
  const uint64_t bc = (uint64_t)B * (uint64_t)C;
  float *dz = malloc((size_t)bc * sizeof *dz);
  if (!dz) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "forward: head loss: out of memory");
  sequence_loss(m, dz);
  st = upload_f32(m, h->dout, dz, bc, "forward: head loss");
  free(dz);
  return st;
}

/* The outputs only (esmt_model_infer): after the encoder's inference pass. */
static esmt_status download_outputs(esmt_model *m, float *outputs);

esmt_status esmt_head_infer(esmt_model *m, const esmt_batch *b, float *outputs) {
  const char *fn = "esmt_model_infer";
  if (b->num_segments > 0)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: a task head takes right-padded rows, not "
                     "packed ones", fn);
  esmt_status st = reserve(m, b->batch, b->seq_len, fn);
  if (!st && sequence_head(m)) st = pooling_matrix(m, b, fn);
  if (!st) st = head_outputs(m, "inference: task head");
  return st ? st : download_outputs(m, outputs);
}

esmt_status esmt_head_run_backward(esmt_model *m) {
  struct esmt_head *h = m->head;
  const esmt_layout *ly = &m->layout;
  const int B = m->B, N = m->B * m->T, d = m->d, C = m->cfg.num_labels;
  esmt_status st;
  if (!sequence_head(m))
    return esmt_model_linear_backward(m, m->act.lnf, ly->cls_out_w, ly->cls_out_b, h->dout,
                                      m->act.d_narrow, N, d, C, "backward: residue classifier");
  if ((st = esmt_model_linear_backward(m, h->h, ly->cls_out_w, ly->cls_out_b, h->dout, h->dh, B,
                                       d, C, "backward: classifier out_proj")))
    return st;
  /* d pre-tanh = d h * (1 - tanh^2), on the host beside the kept tanh values */
  const uint64_t bd = (uint64_t)B * (uint64_t)d;
  float *g = malloc((size_t)bd * sizeof *g);
  if (!g) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "backward: classifier tanh: out of memory");
  st = download_f32(m, g, h->dh, bd, "backward: classifier tanh");
  for (uint64_t i = 0; !st && i < bd; i++)
    g[i] = (float)((double)g[i] * (1.0 - (double)h->h32[i] * h->h32[i]));
  if (!st) st = upload_f32(m, h->dh, g, bd, "backward: classifier tanh");
  free(g);
  if (st) return st;
  if ((st = esmt_model_linear_backward(m, h->pooled, ly->cls_dense_w, ly->cls_dense_b, h->dh,
                                       h->dpooled, B, d, d, "backward: classifier dense")))
    return st;
  if (esmt_model_backward_from_layer(m) > m->L) return ESMT_OK; /* nothing below the head trains */
  /* d lnf [N, d] = P^T . d pooled */
  return matmul(m, 1, N, d, B, h->pool, N, h->dpooled, m->act.d_narrow, "backward: head pooling");
}

/* The outputs to the caller: [B, C] from the host copy, or [B, T, C]
 * with padded positions 0. */
static esmt_status download_outputs(esmt_model *m, float *outputs) {
  struct esmt_head *h = m->head;
  const int C = m->cfg.num_labels;
  const uint64_t n = (uint64_t)h->rows * (uint64_t)C;
  if (!outputs) return ESMT_OK;
  if (sequence_head(m)) {
    memcpy(outputs, h->out32, (size_t)n * sizeof *outputs);
    return ESMT_OK;
  }
  esmt_status st = download_f32(m, outputs, h->out, n, "download");
  if (st) return st;
  for (int i = 0; i < m->B; i++) /* padded positions carry no prediction */
    for (int t = m->host_seq_len[i]; t < m->T; t++)
      memset(outputs + ((uint64_t)i * m->T + t) * C, 0, (size_t)C * sizeof *outputs);
  return ESMT_OK;
}

esmt_status esmt_head_download(esmt_model *m, float *outputs, double *loss_sum) {
  struct esmt_head *h = m->head;
  if (sequence_head(m)) {
    *loss_sum = h->loss_sum;
  } else {
    float loss = 0.0f;
    esmt_status st = transfer(m, &loss, m->act.loss_sum, sizeof loss, ESMTB_COPY_D2H, 1,
                              "esmt_model_forward");
    if (st) return st;
    *loss_sum = loss;
  }
  esmt_status st = download_outputs(m, outputs);
  return st ? esmt_fail_prefix(st, "esmt_model_forward: ") : ESMT_OK;
}
