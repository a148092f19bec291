/* SPDX-License-Identifier: MIT */
/* ZeRO-3 with optimizer offload: the rank's shard [lo, hi) of the fp32
 * master, the moments and the fp32 gradients in its host memory (the
 * offload layer's host side, sized for the shard), and on the device only
 * what ZeRO-3 keeps there: the shard's compute weights (fp32, or half with
 * the fp32 LayerNorm w/b whole in norm_dev), the end parts, the two weight
 * slots each layer is all-gathered into, and ZeRO-2's gradient slots with
 * the shard's fp32 gradients, into which each layer's reduce-scattered
 * piece is added as backward finishes it. The layer is ZeRO-2's
 * (grad_shard.c), whose step pulls the shard's gradients down once per
 * update, runs the host optimizer and uploads the shard's compute weights;
 * the owner (dist/dp_zero.c) then gathers the end parts again. */
#include "esmtrain/backend.h"
#include "offload.h"

#include "grad_shard.h"
#include "param_layer.h"
#include "weight_gather.h"

esmt_status esmt_offload_setup_zero3(esmt_param_memory *p, const esmt_offload_options *o) {
  const esmt_param_env *e = &p->env;
  esmt_status st = esmt_offload_setup_host(p, o); /* master, moments, gradients: the shard */
  if (st) return st;
  const uint64_t lo = p->master_lo, hi = p->master_hi, n = hi > lo ? hi - lo : 1;
  const uint64_t nn = (uint64_t)e->n_norm * (uint64_t)e->d;
  p->compute_lo = lo;
  if (e->dtype == ESMTB_F32) /* (in half the weight gather allocates the half shard) */
    st = esmt_param_dev_alloc(e, n * sizeof(float), (void **)&p->compute32,
                              "fp32 compute weight shard");
  else
    st = esmt_param_dev_alloc(e, (nn ? nn : 1) * sizeof(float), (void **)&p->norm_dev,
                              "fp32 LayerNorm weights");
  if (!st) { /* the slots are built over the device layer; ZeRO-2's layer runs it after */
    p->layer = &esmt_device_layer;
    st = esmt_param_shard_grads(p, lo, hi, NULL, NULL);
  }
  if (st && !p->gshard) { /* the offload layer releases the host side and compute32 */
    if (p->norm_dev) e->ops->free(e->dev, ESMTB_MEM_DEVICE, p->norm_dev);
    p->norm_dev = NULL;
    p->layer = &esmt_offload_layer;
    return st;
  }
  return st ? st : esmt_param_shard_weights(p, lo, hi, NULL, NULL);
}
