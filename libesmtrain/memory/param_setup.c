/* SPDX-License-Identifier: MIT */
/* The parameter memory's setup: the layer the options ask for, its
 * buffers allocated, the gradients and moments zeroed. The device layer's
 * buffers are allocated here; the offload layer allocates its own. */
#include "esmtrain/backend.h"
#include "param_layer.h"

#include <stdlib.h>
#include <string.h>

#include "grad_shard.h"
#include "param_shard.h"

#include "stream.h"
#include "weight_gather.h"

static esmt_status zero(const esmt_param_env *env, void *buf, uint64_t bytes) {
  esmtb_status bs = buf ? env->ops->memset_async(env->dev, buf, 0, bytes, env->stream) : 0;
  return bs ? esmt_fail_prefix((esmt_status)bs, "esmt_model_create: ") : ESMT_OK;
}

esmt_status esmt_param_memory_setup(esmt_param_memory *p, const esmt_param_env *env,
                                    const esmt_offload_options *o) {
  memset(p, 0, sizeof *p);
  p->env = *env;
  const uint64_t bytes = env->total * sizeof(float);
  p->opt_lo = env->opt_lo;
  p->opt_hi = env->total;
  p->master_hi = env->total; /* whole: ZeRO-2 may cut it to the shard later (param_shard.c) */
  /* the gradients held: a frozen prefix has none (ZeRO-2 narrows them to
   * the rank's shard below) */
  p->grads_lo = env->opt_lo;
  p->grads_hi = env->total;
  const uint64_t grad_bytes = (env->total - env->opt_lo) * sizeof(float);
  const int streamed = o && o->enabled && o->streamed != ESMT_STREAM_NONE;
  p->layer = streamed ? &esmt_stream_layer : o && o->enabled ? &esmt_offload_layer
                                                             : &esmt_device_layer;
  if (env->opt_lo && o && o->enabled)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "esmt_model_create: frozen parameters need the "
                     "parameters on the device (no optimizer offload or streaming)");
  esmt_status st = ESMT_OK;
  if (streamed) /* parts of the gradients and weights leave the device (stream.c) */
    return esmt_stream_setup(p, o);
  if (o && o->enabled && o->zero_level >= 3 && o->zero_world >= 1) {
    /* ZeRO-3 offloaded: the shard's master and moments on the host, its
     * compute weights and gradients on the device (offload.c) */
    return esmt_offload_setup_zero3(p, o);
  } else if (o && o->enabled) { /* host master and moments, device compute weights (offload.c) */
    st = esmt_offload_setup(p, o);
  } else {
    /* ZeRO: the rank's shard of the moments (and at stage 2 of the gradients) only */
    const int zero_level = o && o->zero_world > 1 ? o->zero_level : 0;
    if (zero_level > 0 && env->opt_lo)
      return esmt_fail(ESMT_ERR_UNSUPPORTED, "esmt_model_create: frozen parameters with "
                       "ZeRO sharding (dist.zero %d) are not supported; use dist.zero 0",
                       zero_level);
    if (zero_level > 0) {
      uint64_t *off = calloc((size_t)o->zero_world + 1, sizeof *off);
      if (!off) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_model_create: out of memory");
      esmt_zero_split(env->total, o->zero_world, off);
      p->opt_lo = off[o->zero_rank];
      p->opt_hi = off[o->zero_rank + 1];
      free(off);
    }
    const uint64_t held = (p->opt_hi - p->opt_lo) * sizeof(float), mbytes = held ? held : 4;
    const int nstate = esmt_optimizer_state_count(env->optimizer);
    /* ZeRO-3, and ZeRO-2 with a half copy: the master (and at 3 the
     * compute weights) allocated for the shard only, never whole */
    const int shard_w = zero_level >= 3;
    const int shard_m = shard_w || (zero_level > 0 && esmt_zero_shards_master(
                                        zero_level, o->zero_world, (int)env->esize));
    /* a frozen prefix in half: its master on the host (frozen_master.c) */
    const int frozen_host = esmt_param_frozen_on_host(env, zero_level);
    if (frozen_host) st = esmt_param_frozen_setup(p);
    else if (!shard_m) st = esmt_param_dev_alloc(env, bytes, (void **)&p->master, "parameters");
    p->compute32 = frozen_host ? NULL : p->master;
    if (!st) st = esmt_param_dev_alloc(env, mbytes, (void **)&p->moment1, "optimizer first moments");
    if (!st && nstate > 1)
      st = esmt_param_dev_alloc(env, mbytes, (void **)&p->moment2, "AdamW second moments");
    if (!st && env->dtype != ESMTB_F32 && !shard_w)
      st = esmt_param_dev_alloc(env, env->total * env->esize, &p->compute_lowp,
                                "half-precision weight copy");
    if (!st) st = zero(env, p->moment1, held);
    if (!st) st = zero(env, p->moment2, held);
    if (zero_level >= 2) { /* the reducer and the gather join when the group starts (dp_zero.c) */
      if (!st) esmt_param_resident_views(p); /* the weights; the slots set the gradients' */
      if (!st) st = esmt_param_shard_grads(p, p->opt_lo, p->opt_hi, NULL, NULL);
      if (!st && shard_w) st = esmt_param_shard_weights(p, p->opt_lo, p->opt_hi, NULL, NULL);
      else if (!st && shard_m) st = esmt_param_shard_master(p, p->opt_lo, p->opt_hi);
      return st;
    }
  }
  if (!st) st = esmt_param_dev_alloc(env, grad_bytes, (void **)&p->grads, "gradients");
  if (!st) st = zero(env, p->grads, grad_bytes);
  if (!st) esmt_param_resident_views(p);
  return st;
}

