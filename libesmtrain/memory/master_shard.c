/* SPDX-License-Identifier: MIT */
/* ZeRO-2's sharded fp32 master (param_layer.h): with a half compute copy
 * the kernels never read the master, so a rank keeps the fp32 weights of
 * its shard only, beside the whole half copy and the fp32 LayerNorm w/b
 * (norm_dev) the kernels read. The optimizer updates the shard and its
 * half copy; dist/dp_zero.c all-gathers the half copy and norm_dev. */
#include <stdlib.h>

#include "esmtrain/backend.h"
#include "param_layer.h"

int esmt_param_master_sharded(const esmt_param_memory *p) {
  /* ZeRO-3 on one rank holds the whole shard, but its weights are gathered */
  return p->master_lo != 0 || p->master_hi != p->env.total || p->wgather;
}

/* The part of norm tensor i, [o, o + d), inside [lo, hi): [*a, *b). */
static int norm_cut(const esmt_param_env *e, int i, uint64_t lo, uint64_t hi, uint64_t *a,
                    uint64_t *b) {
  const uint64_t o = e->norm_offs[i], end = o + (uint64_t)e->d;
  *a = o > lo ? o : lo;
  *b = end < hi ? end : hi;
  return *a < *b;
}

esmt_status esmt_param_norms_from_master(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  const esmt_param_env *e = &p->env;
  if (lo < p->master_lo) lo = p->master_lo;
  if (hi > p->master_hi) hi = p->master_hi;
  esmtb_status bs = 0;
  for (int i = 0; i < e->n_norm && !bs; i++) {
    uint64_t a, b;
    if (!norm_cut(e, i, lo, hi, &a, &b)) continue;
    bs = e->ops->copy_async(e->dev, p->norm_dev + (uint64_t)i * e->d + (a - e->norm_offs[i]),
                            p->master + (a - p->master_lo), (b - a) * sizeof(float),
                            ESMTB_COPY_D2D, e->stream);
  }
  return bs ? esmt_fail_prefix((esmt_status)bs, "the LayerNorm weights from the master: ")
            : ESMT_OK;
}

void esmt_param_norm_split(const esmt_param_memory *p, const uint64_t *off, int world,
                           uint64_t *norm_off) {
  const esmt_param_env *e = &p->env;
  for (int r = 0; r <= world; r++) {
    uint64_t below = 0;
    for (int i = 0; i < e->n_norm; i++) {
      uint64_t a, b;
      if (norm_cut(e, i, 0, off[r], &a, &b)) below += b - a;
    }
    norm_off[r] = below;
  }
}

esmt_status esmt_param_shard_master(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  const char *fn = "sharding the fp32 master weights";
  const esmt_param_env *e = &p->env;
  if (p->master && lo == p->master_lo && hi == p->master_hi) return ESMT_OK;
  /* fp32: the kernels read the master itself, unless ZeRO-3 gathers it
   * (at setup there is no master yet, nor a half copy: the dtype says) */
  if ((e->dtype == ESMTB_F32 && !p->wgather) || !p->gshard || p->master_lo ||
      p->master_hi != e->total)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: needs a half compute copy (or ZeRO-3), "
                     "ZeRO-2's gradient slots and a whole master", fn);
  if (lo > hi || hi > e->total)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: [%llu, %llu) of %llu", fn,
                     (unsigned long long)lo, (unsigned long long)hi,
                     (unsigned long long)e->total);
  /* norm_dev is all-gathered by rank: its tensors must be in flat order */
  for (int i = 1; i < e->n_norm; i++)
    if (e->norm_offs[i] < e->norm_offs[i - 1] + (uint64_t)e->d)
      return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: the LayerNorm tensors are not in flat order",
                       fn);
  const uint64_t n = hi - lo, nn = (uint64_t)e->n_norm * (uint64_t)e->d;
  float *shard = NULL, *norms = NULL;
  esmt_status st = esmt_param_dev_alloc(e, (n ? n : 1) * sizeof(float), (void **)&shard,
                                        "fp32 master shard");
  /* in fp32 (ZeRO-3) the LayerNorm w/b are read from the gathered weights */
  if (!st && e->dtype != ESMTB_F32)
    st = esmt_param_dev_alloc(e, (nn ? nn : 1) * sizeof(float), (void **)&norms,
                              "fp32 LayerNorm weights");
  esmtb_status bs = 0;
  if (!st && n && p->master) /* (at setup: written later, esmt_param_write_host) */
    bs = e->ops->copy_async(e->dev, shard, p->master + lo, n * sizeof(float), ESMTB_COPY_D2D,
                            e->stream);
  for (int i = 0; p->master && norms && !st && !bs && i < e->n_norm; i++)
    bs = e->ops->copy_async(e->dev, norms + (uint64_t)i * e->d, p->master + e->norm_offs[i],
                            (uint64_t)e->d * sizeof(float), ESMTB_COPY_D2D, e->stream);
  if (!st && !bs) bs = e->ops->stream_sync(e->dev, e->stream);
  if (st || bs) {
    if (shard) e->ops->free(e->dev, ESMTB_MEM_DEVICE, shard);
    if (norms) e->ops->free(e->dev, ESMTB_MEM_DEVICE, norms);
    return st ? st : esmt_fail_prefix((esmt_status)bs, "%s: ", fn);
  }
  if (p->master) e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->master);
  p->master = shard;
  p->compute32 = NULL; /* the kernels read the half copy and norm_dev, or ZeRO-3's slots */
  p->norm_dev = norms;
  p->master_lo = lo;
  p->master_hi = hi;
  return ESMT_OK;
}

