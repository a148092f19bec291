/* SPDX-License-Identifier: MIT */
/* The fp32 master of a frozen prefix in host memory (param_layer.h): with a
 * half compute copy the kernels read the half weights and the fp32
 * LayerNorm w/b (norm_dev), never the master, and a frozen weight never
 * changes, so its fp32 copy stays on the host, exact, for what reads it
 * (checkpoints, export, esmt_model_read_tensor, LoRA merge). The device
 * keeps the master of what trains, [opt_lo, total), as a sharded master
 * does (master_shard.c). A LoRA model then needs half the bytes of its
 * base on the device, not three times as many. */
#include <stdlib.h>
#include <string.h>

#include "esmtrain/backend.h"
#include "param_layer.h"

int esmt_param_frozen_on_host(const esmt_param_env *env, int zero_level) {
  return env->opt_lo && env->dtype != ESMTB_F32 && !zero_level;
}

esmt_status esmt_param_frozen_setup(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  const uint64_t frozen = e->opt_lo, trained = e->total - e->opt_lo;
  const uint64_t nn = (uint64_t)e->n_norm * (uint64_t)e->d;
  p->frozen_host = calloc((size_t)frozen, sizeof(float));
  if (!p->frozen_host)
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_model_create: no host memory for the fp32 "
                     "master of the frozen weights (%.1f MiB)",
                     (double)(frozen * sizeof(float)) / 1048576.0);
  p->master_lo = e->opt_lo;
  esmt_status st = esmt_param_dev_alloc(e, (trained ? trained : 1) * sizeof(float),
                                        (void **)&p->master, "fp32 master of what trains");
  if (!st)
    st = esmt_param_dev_alloc(e, (nn ? nn : 1) * sizeof(float), (void **)&p->norm_dev,
                              "fp32 LayerNorm weights");
  return st;
}

/* [off, off + n) of the fp32 master into host, from wherever it is held. */
esmt_status esmt_param_read_host(esmt_param_memory *p, float *host, uint64_t off, uint64_t n) {
  const esmt_param_env *e = &p->env;
  const uint64_t hi = off + n, cut = p->master_lo;
  if (off < cut) {
    if (!p->frozen_host || hi > p->env.total)
      return esmt_fail(ESMT_ERR_STATE, "reading the fp32 weights [%llu, %llu): this rank "
                       "holds [%llu, %llu) only", (unsigned long long)off,
                       (unsigned long long)hi, (unsigned long long)p->master_lo,
                       (unsigned long long)p->master_hi);
    memcpy(host, p->frozen_host + off, (size_t)((hi < cut ? hi : cut) - off) * sizeof(float));
  }
  if (hi <= cut) return ESMT_OK;
  const uint64_t a = off > cut ? off : cut;
  esmtb_status bs = e->ops->copy_async(e->dev, host + (a - off), p->master + (a - cut),
                                       (hi - a) * sizeof(float), ESMTB_COPY_D2H, e->stream);
  if (!bs) bs = e->ops->stream_sync(e->dev, e->stream);
  return bs ? esmt_fail_prefix((esmt_status)bs, "reading the fp32 weights: ") : ESMT_OK;
}

void esmt_param_frozen_write(esmt_param_memory *p, const float *host, uint64_t off, uint64_t n) {
  const uint64_t hi = off + n, cut = p->master_lo;
  if (p->frozen_host && off < cut)
    memcpy(p->frozen_host + off, host, (size_t)((hi < cut ? hi : cut) - off) * sizeof(float));
}

void esmt_param_frozen_release(esmt_param_memory *p) {
  const esmt_param_env *e = &p->env;
  if (!p->frozen_host) return;
  if (p->norm_dev && e->dev) e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->norm_dev);
  p->norm_dev = NULL;
  free(p->frozen_host);
  p->frozen_host = NULL;
}
