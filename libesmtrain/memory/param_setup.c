/* SPDX-License-Identifier: MIT */
/* The parameter memory's setup: the layer the options ask for, its
 * buffers allocated, the gradients and moments zeroed. The device layer's
 * buffers are allocated here; the offload layer allocates its own. */
#include "esmtrain/backend.h"
#include "param_layer.h"

#include <string.h>

#include "stream.h"

static esmt_status zero(const esmt_param_env *env, void *buf, uint64_t bytes) {
  esmtb_status bs = buf ? env->ops->memset_async(env->dev, buf, 0, bytes, env->stream) : 0;
  return bs ? esmt_fail_prefix((esmt_status)bs, "esmt_model_create: ") : ESMT_OK;
}

esmt_status esmt_param_memory_setup(esmt_param_memory *p, const esmt_param_env *env,
                                    const esmt_offload_options *o) {
  memset(p, 0, sizeof *p);
  p->env = *env;
  const uint64_t bytes = env->total * sizeof(float);
  p->opt_lo = 0;
  p->opt_hi = env->total;
  p->grads_lo = 0;
  p->grads_hi = env->total;
  const int streamed = o && o->enabled && o->streamed != ESMT_STREAM_NONE;
  p->layer = streamed ? &esmt_stream_layer : o && o->enabled ? &esmt_offload_layer
                                                             : &esmt_device_layer;
  esmt_status st = ESMT_OK;
  if (streamed) /* parts of the gradients and weights leave the device (stream.c) */
    return esmt_stream_setup(p, o);
  if (o && o->enabled) { /* host master and moments, device compute weights (offload.c) */
    st = esmt_offload_setup(p, o);
  } else {
    const int nstate = esmt_optimizer_state_count(env->optimizer);
    st = esmt_param_dev_alloc(env, bytes, (void **)&p->master, "parameters");
    p->compute32 = p->master;
    if (!st) st = esmt_param_dev_alloc(env, bytes, (void **)&p->moment1, "optimizer first moments");
    if (!st && nstate > 1)
      st = esmt_param_dev_alloc(env, bytes, (void **)&p->moment2, "AdamW second moments");
    if (!st && env->dtype != ESMTB_F32)
      st = esmt_param_dev_alloc(env, env->total * env->esize, &p->compute_lowp,
                                "half-precision weight copy");
    if (!st) st = zero(env, p->moment1, bytes);
    if (!st) st = zero(env, p->moment2, bytes);
  }
  if (!st) st = esmt_param_dev_alloc(env, bytes, (void **)&p->grads, "gradients");
  if (!st) st = zero(env, p->grads, bytes);
  if (!st) esmt_param_resident_views(p);
  return st;
}

