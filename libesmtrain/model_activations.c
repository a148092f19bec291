/* The activation arena: every tensor one micro-batch keeps for backward,
 * carved from one device allocation. The same carving, run without a base
 * pointer, gives the byte count the memory planner needs. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

typedef struct carver {
  char *base;                /* NULL: only count */
  uint64_t off;
} carver;

static void *take(carver *c, uint64_t bytes) {
  uint64_t off = (c->off + 255) & ~(uint64_t)255; /* 256-byte aligned, as cudaMalloc */
  c->off = off + bytes;
  return c->base ? c->base + off : NULL;
}

#define F32(n) ((float *)take(c, (uint64_t)(n) * sizeof(float)))
/* Activations proper are in the compute dtype (esize bytes each); norms'
 * statistics, softmax log-sum-exps, logits and scalars stay fp32. */
#define ACT(n) ((float *)take(c, (uint64_t)(n) * esize))

/* Carve for B x T rows; per-layer pointer arrays go into `tables`
 * (13 arrays of L + 1 entries) when non-NULL. With `recompute`, only the
 * residual stream is kept per layer and every other per-layer tensor
 * aliases one shared set that backward refills layer by layer. */
static void carve(carver *c, const esmt_model_config *cfg, int B, int T, uint64_t esize,
                  int recompute, esmt_activations *a, float **tables) {
  const uint64_t N = (uint64_t)B * (uint64_t)T, d = (uint64_t)cfg->hidden_size;
  const uint64_t H = (uint64_t)cfg->num_heads, V = (uint64_t)cfg->vocab_size;
  const uint64_t F = cfg->ffn_size ? (uint64_t)cfg->ffn_size : 4 * d;
  const int L = cfg->num_layers;
  esmt_activations dummy;
  if (!a) a = &dummy;
  if (tables) {
    float ***arrays[] = {&a->ln1,     &a->ln1_mean, &a->ln1_rstd, &a->qkv,     &a->attn,
                         &a->lse,     &a->ln2,      &a->ln2_mean, &a->ln2_rstd, &a->fc1_pre,
                         &a->fc1_out, &a->res_mid,  &a->res};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) *arrays[i] = tables + i * (size_t)(L + 1);
  }
  a->tokens = (int32_t *)take(c, N * sizeof(int32_t));
  a->labels = (int32_t *)take(c, N * sizeof(int32_t));
  a->seq_len = (int32_t *)take(c, (uint64_t)B * sizeof(int32_t));
  a->row_scale = F32(B);
  a->loss_sum = F32(1);
  float *p[12] = {0};
  for (int l = 0; l <= L; l++) {
    float *res = ACT(N * d);
    if (tables) a->res[l] = res;
    if (l == L) break;
    if (!recompute || l == 0) {
      float *q[] = {ACT(N * d), F32(N), F32(N), ACT(N * 3 * d), ACT(N * d), F32(H * N),
                    ACT(N * d), F32(N), F32(N), ACT(N * F),     ACT(N * F), ACT(N * d)};
      memcpy(p, q, sizeof p);
    }
    if (tables) {
      a->ln1[l] = p[0]; a->ln1_mean[l] = p[1]; a->ln1_rstd[l] = p[2];
      a->qkv[l] = p[3]; a->attn[l] = p[4]; a->lse[l] = p[5];
      a->ln2[l] = p[6]; a->ln2_mean[l] = p[7]; a->ln2_rstd[l] = p[8];
      a->fc1_pre[l] = p[9]; a->fc1_out[l] = p[10]; a->res_mid[l] = p[11];
    }
  }
  a->lnf = ACT(N * d); a->lnf_mean = F32(N); a->lnf_rstd = F32(N);
  a->head_pre = ACT(N * d); a->head_act = ACT(N * d);
  a->head_ln = ACT(N * d); a->head_mean = F32(N); a->head_rstd = F32(N);
  a->logits = F32(N * V);
  a->dlogits = F32(N * V);
  a->d_wide = ACT(N * (F > 3 * d ? F : 3 * d));
  a->d_narrow = ACT(N * d);
  a->d_resid = ACT(N * d);
  a->tmp = ACT(N * d);
}

uint64_t esmt_activation_bytes(const esmt_model_config *cfg, int B, int T, int esize,
                               int recompute) {
  carver c = {NULL, 0};
  carve(&c, cfg, B, T, (uint64_t)esize, recompute, NULL, NULL);
  return c.off;
}

esmt_status esmt_model_reserve(esmt_model *m, int B, int T) {
  if (m->arena && B <= m->act_B && T <= m->act_T) return ESMT_OK;
  /* Grow to cover both the old and the new shape. */
  int nB = B > m->act_B ? B : m->act_B, nT = T > m->act_T ? T : m->act_T;
  uint64_t bytes = esmt_activation_bytes(&m->cfg, nB, nT, (int)sizeof(float), 0);
  if (m->arena) {
    m->ops->stream_sync(m->dev, m->stream);
    m->ops->free(m->dev, ESMTB_MEM_DEVICE, m->arena);
    m->arena = NULL;
  }
  void *arena = NULL;
  esmtb_status st = m->ops->alloc(m->dev, ESMTB_MEM_DEVICE, bytes, &arena);
  if (st)
    return esmt_fail_prefix((esmt_status)st, "activations for %d x %d tokens (%.1f MiB): ", nB,
                            nT, (double)bytes / 1048576.0);
  if (!m->act_ptr_tables) {
    m->act_ptr_tables = calloc(13 * (size_t)(m->L + 1), sizeof(float *));
    if (!m->act_ptr_tables) {
      m->ops->free(m->dev, ESMTB_MEM_DEVICE, arena);
      return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "activations: out of host memory");
    }
  }
  int32_t *seq = realloc(m->host_seq_len, (size_t)nB * sizeof *seq);
  if (!seq) {
    m->ops->free(m->dev, ESMTB_MEM_DEVICE, arena);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "activations: out of host memory");
  }
  m->host_seq_len = seq;
  carver c = {arena, 0};
  carve(&c, &m->cfg, nB, nT, sizeof(float), 0, &m->act, m->act_ptr_tables);
  m->arena = arena;
  m->arena_bytes = bytes;
  m->act_B = nB;
  m->act_T = nT;
  m->have_forward = 0;
  return ESMT_OK;
}
