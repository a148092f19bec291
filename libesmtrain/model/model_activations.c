/* SPDX-License-Identifier: MIT */
/* The activation arena: every tensor one micro-batch keeps for backward,
 * carved from one device allocation. The same carving, run without a base
 * pointer, gives the byte count the memory planner needs; and when the
 * device has no room, esmt_oom_advice says what to change. */
#include "esmtrain/backend.h"
#include "model.h"
#include "param_layer.h"

#include <stdio.h>
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
/* Activations proper (logits included) are in the compute dtype (esize
 * bytes each); norms' statistics, softmax log-sum-exps and scalars stay
 * fp32. */
#define ACT(n) take(c, (uint64_t)(n) * esize)

/* Carve for N tokens in any B x T with B * T <= N (per-row arrays get N
 * entries too: a row holds at least one token), so that batches of varying
 * shape under one token budget share one arena of the planned size.
 * Per-layer pointer arrays go into `vt` (compute dtype, ESMT_ACT_VTABLES
 * arrays of L + 1 entries) and `ft` (fp32, ESMT_ACT_FTABLES arrays) when
 * non-NULL. With `recompute`, only the residual stream is kept per layer
 * and every other per-layer tensor aliases one shared set that backward
 * refills layer by layer. recompute 2 is inference (esmt_model_infer):
 * the shared set too, the residual stream in two buffers used in turn, and
 * nothing backward would need. */
static void carve(carver *c, const esmt_model_config *cfg, uint64_t N, uint64_t esize,
                  int recompute, esmt_activations *a, void **vt, float **ft) {
  const uint64_t B = N, d = (uint64_t)cfg->hidden_size;
  const uint64_t H = (uint64_t)cfg->num_heads, V = (uint64_t)cfg->vocab_size;
  const uint64_t F = cfg->ffn_size ? (uint64_t)cfg->ffn_size : 4 * d;
  const int L = cfg->num_layers;
  const size_t stride = (size_t)(L + 1);
  const int tables = vt && ft;
  esmt_activations dummy;
  if (!a) a = &dummy;
  if (tables) {
    void ***va[ESMT_ACT_VTABLES] = {&a->ln1, &a->qkv,     &a->attn,    &a->ln2,
                                    &a->fc1_pre, &a->fc1_out, &a->res_mid, &a->res};
    float ***fa[ESMT_ACT_FTABLES] = {&a->ln1_mean, &a->ln1_rstd, &a->lse, &a->ln2_mean,
                                     &a->ln2_rstd};
    for (size_t i = 0; i < ESMT_ACT_VTABLES; i++) *va[i] = vt + i * stride;
    for (size_t i = 0; i < ESMT_ACT_FTABLES; i++) *fa[i] = ft + i * stride;
  }
  a->tokens = (int32_t *)take(c, N * sizeof(int32_t));
  a->labels = (int32_t *)take(c, N * sizeof(int32_t));
  a->seq_len = (int32_t *)take(c, (uint64_t)B * sizeof(int32_t));
  a->row_scale = F32(B);
  a->loss_sum = F32(1);
  /* the order of take() calls is the layout; keep it as it was for fp32 */
  void *p[8] = {0};
  float *q[5] = {0};
  const int infer = recompute == 2;
  void *res_pair[2] = {0};
  for (int l = 0; l <= L; l++) {
    void *res = infer && l > 1 ? res_pair[l & 1] : ACT(N * d);
    if (l < 2) res_pair[l] = res;
    if (tables) a->res[l] = res;
    if (l == L) break;
    if (!recompute || l == 0) {
      p[0] = ACT(N * d);       /* ln1 */
      q[0] = F32(N);           /* ln1_mean */
      q[1] = F32(N);           /* ln1_rstd */
      p[1] = ACT(N * 3 * d);   /* qkv */
      p[2] = ACT(N * d);       /* attn */
      q[2] = F32(H * N);       /* lse */
      p[3] = ACT(N * d);       /* ln2 */
      q[3] = F32(N);           /* ln2_mean */
      q[4] = F32(N);           /* ln2_rstd */
      p[4] = ACT(N * F);       /* fc1_pre */
      p[5] = ACT(N * F);       /* fc1_out */
      p[6] = ACT(N * d);       /* res_mid */
    }
    if (tables) {
      a->ln1[l] = p[0]; a->qkv[l] = p[1]; a->attn[l] = p[2]; a->ln2[l] = p[3];
      a->fc1_pre[l] = p[4]; a->fc1_out[l] = p[5]; a->res_mid[l] = p[6];
      a->ln1_mean[l] = q[0]; a->ln1_rstd[l] = q[1]; a->lse[l] = q[2];
      a->ln2_mean[l] = q[3]; a->ln2_rstd[l] = q[4];
    }
  }
  a->lnf = ACT(N * d); a->lnf_mean = F32(N); a->lnf_rstd = F32(N);
  a->head_pre = ACT(N * d); a->head_act = ACT(N * d);
  a->head_ln = ACT(N * d); a->head_mean = F32(N); a->head_rstd = F32(N);
  a->logits = ACT(N * V);
  if (infer) {
    a->dlogits = a->d_wide = a->d_narrow = a->d_resid = NULL;
  } else {
    a->dlogits = ACT(N * V);
    a->d_wide = ACT(N * (F > 3 * d ? F : 3 * d));
    a->d_narrow = ACT(N * d);
    a->d_resid = ACT(N * d);
  }
  a->tmp = ACT(N * d);
}

uint64_t esmt_activation_bytes(const esmt_model_config *cfg, int B, int T, int esize,
                               int recompute) {
  carver c = {NULL, 0};
  carve(&c, cfg, (uint64_t)B * (uint64_t)T, (uint64_t)esize, recompute, NULL, NULL, NULL);
  return c.off;
}

esmt_status esmt_model_reserve(esmt_model *m, int B, int T) {
  return esmt_model_reserve_mode(m, B, T, m->recompute);
}

esmt_status esmt_model_reserve_mode(esmt_model *m, int B, int T, int mode) {
  const uint64_t N = (uint64_t)B * (uint64_t)T;
  if (m->arena && N <= m->act_N && m->act_recompute == mode) return ESMT_OK;
  /* Grow to cover both the old and the new token count. */
  const uint64_t nN = N > m->act_N ? N : m->act_N;
  const int rec = mode;
  carver cnt = {NULL, 0};
  carve(&cnt, &m->cfg, nN, m->esize, rec, NULL, NULL, NULL);
  const uint64_t bytes = cnt.off;
  if (m->arena) {
    m->ops->stream_sync(m->dev, m->stream);
    m->ops->free(m->dev, ESMTB_MEM_DEVICE, m->arena);
    m->arena = NULL;
    m->arena_bytes = 0;
    m->have_forward = 0;
  }
  void *arena = NULL;
  esmtb_status st = m->ops->alloc(m->dev, ESMTB_MEM_DEVICE, bytes, &arena);
  if (st) {
    esmt_fail_prefix((esmt_status)st, "activations for %llu tokens (%d x %d now; %.1f MiB%s): ",
                     (unsigned long long)nN, B, T, (double)bytes / 1048576.0,
                     rec ? ", recompute on" : "");
    return esmt_oom_advice(m, (esmt_status)st, B, T);
  }
  if (!m->act_vtables) m->act_vtables = calloc(ESMT_ACT_VTABLES * (size_t)(m->L + 1), sizeof(void *));
  if (!m->act_ftables) m->act_ftables = calloc(ESMT_ACT_FTABLES * (size_t)(m->L + 1), sizeof(float *));
  if (!m->act_vtables || !m->act_ftables) {
    m->ops->free(m->dev, ESMTB_MEM_DEVICE, arena);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "activations: out of host memory");
  }
  int32_t *seq = realloc(m->host_seq_len, (size_t)nN * sizeof *seq);
  if (!seq) {
    m->ops->free(m->dev, ESMTB_MEM_DEVICE, arena);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "activations: out of host memory");
  }
  m->host_seq_len = seq;
  carver c = {arena, 0};
  carve(&c, &m->cfg, nN, m->esize, rec, &m->act, m->act_vtables, m->act_ftables);
  m->arena = arena;
  m->arena_bytes = bytes;
  m->act_recompute = rec;
  m->act_N = nN;
  m->have_forward = 0;
  return ESMT_OK;
}

/* Out of device memory is a planned error: after the allocator's message
 * (what did not fit, the limit) say what to change, with the figures the
 * change would give. */
#define MIB(x) ((double)(x) / 1048576.0)

esmt_status esmt_model_device_oom(void *model, esmt_status st) {
  return esmt_oom_advice(model, st, 0, 0);
}

esmt_status esmt_model_dev_alloc(esmt_model *m, uint64_t bytes, void **out, const char *what) {
  /* the parameter memory's allocation and message, before that memory exists */
  const esmt_param_env e = {.ops = m->ops, .dev = m->dev, .device_oom = esmt_model_device_oom,
                            .owner = m};
  return esmt_param_dev_alloc(&e, bytes, out, what);
}

esmt_status esmt_oom_advice(const esmt_model *m, esmt_status st, int B, int T) {
  if (st != ESMT_ERR_OUT_OF_MEMORY) return st;
  char item[6][200];
  int n = 0;
  if (B > 0)
    snprintf(item[n++], sizeof item[0], "use a smaller micro-batch (data.micro_batch or "
             "data.tokens_per_batch) or shorter rows (data.max_len)");
  if (B > 0 && !m->recompute)
    snprintf(item[n++], sizeof item[0], "turn on activation recompute (offload.recompute: on, "
             "or esmt_model_set_recompute) for %.1f MiB of activations",
             MIB(esmt_activation_bytes(&m->cfg, B, T, (int)m->esize, 1)));
  if (!m->mem.offload)
    snprintf(item[n++], sizeof item[0], "offload the optimizer (offload.optimizer: on) to move "
             "%.1f MiB of fp32 master weights and AdamW moments to the host",
             MIB(m->layout.total * 12));
  if (m->dtype == ESMTB_F32)
    snprintf(item[n++], sizeof item[0], "compute in a lower precision (backend.precision)");
  snprintf(item[n++], sizeof item[0], "use a smaller model");
  snprintf(item[n++], sizeof item[0], "raise backend.device_memory_limit");
  uint64_t avail = 0, total = 0;
  if (m->ops->mem_info && m->dev && m->ops->mem_info(m->dev, &avail, &total) == 0 && total)
    esmt_fail_append(st, " (device: %.1f MiB free of %.1f MiB)", MIB(avail), MIB(total));
  esmt_fail_append(st, ". To fit: ");
  for (int i = 0; i < n; i++)
    esmt_fail_append(st, "%s%s", i == 0 ? "" : i == n - 1 ? ", or " : ", ", item[i]);
  esmt_fail_append(st, " (`esmtrain-example plan` shows what fits)");
  return st;
}
