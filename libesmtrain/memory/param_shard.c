/* SPDX-License-Identifier: MIT */
/* ZeRO in the parameter memory: moments for a shard of the flat buffer,
 * the gradient sum of squares of a range, and (ZeRO-2) the gradients
 * outside a shard cleared between micro-batches (see dist/dp_zero.c). */
#include <stdlib.h>

#include "esmtrain/backend.h"
#include "param_layer.h"
#include "param_shard.h"
#include "weight_gather.h"

void esmt_zero_split(uint64_t total, int world, uint64_t *off) {
  const uint64_t units = (total + ESMT_ZERO_ALIGN - 1) / ESMT_ZERO_ALIGN;
  const uint64_t base = units / (uint64_t)world, rem = units % (uint64_t)world;
  for (int r = 0; r <= world; r++) {
    uint64_t u = (uint64_t)r * base + ((uint64_t)r < rem ? (uint64_t)r : rem);
    uint64_t o = u * ESMT_ZERO_ALIGN;
    off[r] = o < total ? o : total;
  }
}

uint64_t esmt_zero_shard_max(uint64_t total, int world) {
  if (world <= 1) return total;
  const uint64_t units = (total + ESMT_ZERO_ALIGN - 1) / ESMT_ZERO_ALIGN;
  const uint64_t first = (units + (uint64_t)world - 1) / (uint64_t)world * ESMT_ZERO_ALIGN;
  return first < total ? first : total;
}

int esmt_zero_shards_master(int level, int world, int esize) {
  return level >= 2 && world > 1 && esize < 4;
}

int esmt_zero_gathered_bytes(int level, int world, int esize) {
  return esmt_zero_shards_master(level, world, esize) ? esize : 4;
}

void esmt_zero_comm_volume(int level, uint64_t params, int world, int micro_batches,
                           int gathered, esmt_zero_volume *v) {
  const uint64_t grads = params * sizeof(float);
  const uint64_t k = micro_batches > 0 ? (uint64_t)micro_batches : 1;
  v->allreduced = level == 0 ? grads : 0;
  v->reduce_scattered = level == 0 ? 0 : level == 1 ? grads : k * grads;
  v->allgathered = level == 0 ? 0 : params * (uint64_t)gathered;
  /* on the ring each half sends (W-1)/W of its buffer; an all-reduce is both */
  const uint64_t W = world > 0 ? (uint64_t)world : 1;
  v->sent_per_rank =
      (2 * v->allreduced + v->reduce_scattered + v->allgathered) / W * (W - 1);
}

void esmt_zero3_comm_volume(const uint64_t *part_bounds, int n_parts, int world,
                            int micro_batches, int esize, esmt_zero_volume *v) {
  const uint64_t P = part_bounds[n_parts];
  esmt_zero_comm_volume(2, P, world, micro_batches, 4, v);
  v->allgathered =
      esmt_weight_gather_elems(part_bounds, n_parts, micro_batches) * (uint64_t)esize;
  const uint64_t W = world > 0 ? (uint64_t)world : 1;
  v->sent_per_rank = (v->reduce_scattered + v->allgathered) / W * (W - 1);
}

static esmtb_status alloc_zeroed(const esmt_param_env *e, uint64_t n, float **out) {
  const uint64_t bytes = (n ? n : 1) * sizeof(float);
  esmtb_status bs = e->ops->alloc(e->dev, ESMTB_MEM_DEVICE, bytes, (void **)out);
  if (!bs) bs = e->ops->memset_async(e->dev, *out, 0, bytes, e->stream);
  return bs;
}

esmt_status esmt_param_shard_optimizer(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  const char *fn = "esmt_model_shard_optimizer";
  const esmt_param_env *e = &p->env;
  if (lo == p->opt_lo && hi == p->opt_hi) return ESMT_OK; /* sized for it at creation */
  if (p->offload)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: not with optimizer offload (its host buffers "
                     "are sized for the shard when the model is created)", fn);
  if (lo > hi || hi > e->total || lo < p->opt_lo || hi > p->opt_hi)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: [%llu, %llu) is not within the held "
                     "[%llu, %llu)", fn, (unsigned long long)lo, (unsigned long long)hi,
                     (unsigned long long)p->opt_lo, (unsigned long long)p->opt_hi);
  const uint64_t n = hi - lo, skip = lo - p->opt_lo;
  float *nm = NULL, *nv = NULL;
  esmtb_status bs = alloc_zeroed(e, n, &nm);
  if (!bs && p->moment2) bs = alloc_zeroed(e, n, &nv); /* AdamW's second moment; Lion has none */
  /* keep the current values (a checkpoint may have been loaded) */
  if (!bs && n) bs = e->ops->copy_async(e->dev, nm, p->moment1 + skip, n * sizeof(float),
                                        ESMTB_COPY_D2D, e->stream);
  if (!bs && n && nv) bs = e->ops->copy_async(e->dev, nv, p->moment2 + skip, n * sizeof(float),
                                              ESMTB_COPY_D2D, e->stream);
  if (!bs) bs = e->ops->stream_sync(e->dev, e->stream);
  if (bs) {
    if (nm) e->ops->free(e->dev, ESMTB_MEM_DEVICE, nm);
    if (nv) e->ops->free(e->dev, ESMTB_MEM_DEVICE, nv);
    return esmt_fail_prefix((esmt_status)bs, "%s: ", fn);
  }
  e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->moment1);
  if (p->moment2) e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->moment2);
  p->moment1 = nm;
  p->moment2 = nv;
  p->opt_lo = lo;
  p->opt_hi = hi;
  return ESMT_OK;
}

esmt_status esmt_param_grad_sumsq_range(esmt_param_memory *p, uint64_t lo, uint64_t hi,
                                        float *sum) {
  const esmt_param_env *e = &p->env;
  *sum = 0.0f;
  if (hi <= lo) return ESMT_OK;
  if (lo < p->grads_lo || hi > p->grads_hi)
    return esmt_fail(ESMT_ERR_INTERNAL, "gradient norm: [%llu, %llu) is outside the held "
                     "gradients [%llu, %llu)", (unsigned long long)lo, (unsigned long long)hi,
                     (unsigned long long)p->grads_lo, (unsigned long long)p->grads_hi);
  esmtb_sumsq_args s = {sizeof s, hi - lo, p->grads + (lo - p->grads_lo), e->scratch};
  esmtb_status bs = e->ops->memset_async(e->dev, e->scratch, 0, sizeof(float), e->stream);
  if (!bs) bs = e->ops->sumsq ? e->ops->sumsq(e->dev, &s, e->stream) : ESMT_ERR_UNSUPPORTED;
  if (!bs) bs = e->ops->copy_async(e->dev, sum, e->scratch, sizeof *sum, ESMTB_COPY_D2H, e->stream);
  if (!bs) bs = e->ops->stream_sync(e->dev, e->stream);
  return bs ? esmt_fail_prefix((esmt_status)bs, "gradient norm: ") : ESMT_OK;
}

esmt_status esmt_param_grads_keep_range(esmt_param_memory *p, uint64_t lo, uint64_t hi) {
  const esmt_param_env *e = &p->env;
  if (lo > hi || hi > e->total)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "clearing gradients outside [%llu, %llu) of %llu",
                     (unsigned long long)lo, (unsigned long long)hi,
                     (unsigned long long)e->total);
  if (p->gshard) return ESMT_OK; /* sharded: nothing is held outside the shard */
  p->layer->grads_changed(p);
  esmtb_status bs = ESMTB_OK;
  if (lo) bs = e->ops->memset_async(e->dev, p->grads, 0, lo * sizeof(float), e->stream);
  if (!bs && hi < e->total)
    bs = e->ops->memset_async(e->dev, p->grads + hi, 0, (e->total - hi) * sizeof(float), e->stream);
  return bs ? esmt_fail_prefix((esmt_status)bs, "clearing the other shards' gradients: ") : ESMT_OK;
}
