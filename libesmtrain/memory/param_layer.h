/* SPDX-License-Identifier: MIT */
/* The operations of the parameter memory (param_memory.h) that depend on
 * where the buffers live, as a table with two implementations:
 * esmt_device_layer (device_layer.c) and esmt_offload_layer (offload.c, a
 * layer over the device one). Callers dispatch through mem->layer and
 * never test which layer they have. */
#ifndef ESMTRAIN_PARAM_LAYER_H
#define ESMTRAIN_PARAM_LAYER_H

#include "esmtrain/esmtrain.h"
#include "optimizer.h"
#include "param_memory.h"

typedef struct esmt_param_layer {
  const char *name; /* "device", "offload" */
  /* The compute copy of the weights [off, off + count) from the master
   * (the half copy; under offload the upload, and the fp32 LayerNorm w/b). */
  esmt_status (*sync_compute)(esmt_param_memory *p, uint64_t off, uint64_t count);
  /* Copy `bytes` between host memory and `buf`, a point inside one of the
   * flat buffers (master, gradients, moments) wherever that lives. */
  esmt_status (*copy)(esmt_param_memory *p, void *host, void *buf, uint64_t bytes, int to_buf);
  /* The next ops read the compute weights [lo, hi) (a layer's, the
   * embedding's, the head's): a layer that keeps them elsewhere brings them
   * in now, in order on the compute stream. Forward, recompute, backward
   * and inference call it before each part; the device layer has them. */
  esmt_status (*weights_needed)(esmt_param_memory *p, uint64_t lo, uint64_t hi);
  /* The device gradients changed (zero_grad, backward, a write). */
  void (*grads_changed)(esmt_param_memory *p);
  /* Every gradient to zero (the start of an update). */
  esmt_status (*zero_grads)(esmt_param_memory *p);
  /* Backward: the gradients [from, env.total) are final. */
  esmt_status (*grads_ready)(esmt_param_memory *p, uint64_t from);
  /* The trainer's last micro-batch of an update: arm before its backward,
   * finish (or cancel, on an error) after it. */
  esmt_status (*arm)(esmt_param_memory *p);
  esmt_status (*finish)(esmt_param_memory *p);
  void (*cancel)(esmt_param_memory *p);
  /* Sum of squares of all gradients (fp32, deterministic). */
  esmt_status (*grad_sumsq)(esmt_param_memory *p, float *sum);
  /* One optimizer step (its kind and arguments: optim/optimizer.h) over
   * the held moments, the layer filling in the buffer pointers, and the
   * compute copy refreshed. */
  esmt_status (*step)(esmt_param_memory *p, esmt_optim_step *s);
  /* Free what the layer allocated (the device may be gone: env.dev NULL). */
  void (*release)(esmt_param_memory *p);
} esmt_param_layer;

ESMT_HIDDEN extern const esmt_param_layer esmt_device_layer;
ESMT_HIDDEN extern const esmt_param_layer esmt_offload_layer;
ESMT_HIDDEN extern const esmt_param_layer esmt_stream_layer;
ESMT_HIDDEN extern const esmt_param_layer esmt_grad_shard_layer;

/* The layer the options ask for (offload or the device), its buffers
 * allocated and the gradients and moments zeroed; NULL options: the device
 * layer. Allocation failures are ESMT_ERR_OUT_OF_MEMORY naming the buffer
 * and its size (the owner adds its advice). */
struct esmt_offload_options;
ESMT_HIDDEN esmt_status esmt_param_memory_setup(esmt_param_memory *p, const esmt_param_env *env,
                                                const struct esmt_offload_options *o);

/* After a layer's setup that keeps whole buffers on the device: the views
 * are the compute copy and the gradients themselves. */
ESMT_HIDDEN void esmt_param_resident_views(esmt_param_memory *p);

/* The device layer's zero_grads (the gradients on the device). */
ESMT_HIDDEN esmt_status esmt_param_zero_device_grads(esmt_param_memory *p);

/* A device allocation on the memory's device, failing with its name and size. */
ESMT_HIDDEN esmt_status esmt_param_dev_alloc(const esmt_param_env *env, uint64_t bytes,
                                             void **out, const char *what);

/* ZeRO-1: keep the optimizer moments of [lo, hi) only (their current
 * values are kept); the step then updates only those weights. Not with
 * offload. */
ESMT_HIDDEN esmt_status esmt_param_shard_optimizer(esmt_param_memory *p, uint64_t lo,
                                                   uint64_t hi);
/* Sum of squares of the gradients [lo, hi) (fp32 sum, as sumsq computes). */
ESMT_HIDDEN esmt_status esmt_param_grad_sumsq_range(esmt_param_memory *p, uint64_t lo,
                                                    uint64_t hi, float *sum);
/* ZeRO-2: zero the gradients outside [lo, hi) (partial sums of other
 * shards after a reduce-scatter), keeping the shard's accumulated sums;
 * queued on the compute stream. Not with offload. */
ESMT_HIDDEN esmt_status esmt_param_grads_keep_range(esmt_param_memory *p, uint64_t lo,
                                                    uint64_t hi);

/* ZeRO-2 with a half compute copy: keep the fp32 master of [lo, hi) only
 * (its current values), the kernels reading the half copy and the fp32
 * LayerNorm w/b in norm_dev; the optimizer then updates the shard and its
 * half copy, and the caller all-gathers both (dist/dp_zero.c). Needs the
 * ZeRO-2 gradient slots and a half compute dtype: ESMT_ERR_UNSUPPORTED
 * otherwise (in fp32 the kernels read the master itself). */
ESMT_HIDDEN esmt_status esmt_param_shard_master(esmt_param_memory *p, uint64_t lo, uint64_t hi);
/* Whether the master holds only a shard of the flat buffer. */
ESMT_HIDDEN int esmt_param_master_sharded(const esmt_param_memory *p);
/* norm_dev's fp32 LayerNorm w/b of the flat range [lo, hi) from the held
 * master (queued on the compute stream). */
ESMT_HIDDEN esmt_status esmt_param_norms_from_master(esmt_param_memory *p, uint64_t lo,
                                                     uint64_t hi);
/* Where a split of the flat buffer (off[0..world]) cuts norm_dev: the
 * LayerNorm elements below off[r] are norm_dev[0, norm_off[r]). */
ESMT_HIDDEN void esmt_param_norm_split(const esmt_param_memory *p, const uint64_t *off, int world,
                                       uint64_t *norm_off);
/* New master weights for the whole flat buffer from host memory under a
 * sharded master: the held shard, the whole half copy and norm_dev. */
ESMT_HIDDEN esmt_status esmt_param_master_upload(esmt_param_memory *p, const float *host);
/* The same for the flat range [off, off + n) from host[0, n): what this
 * rank holds of it (master shard, half copy, norm_dev, ZeRO-3's end parts)
 * written; synced. Model initialisation under a sharded master. */
/* A buffer every rank holds whole, for the data-parallel start's check
 * that the ranks agree: the fp32 master, the half copy under ZeRO-2's
 * sharded master, the device's compute copy under optimizer offload (the
 * master in host memory, a shard under ZeRO), ZeRO-3's end parts; the
 * host master under streaming. */
ESMT_HIDDEN void esmt_param_replicated(const esmt_param_memory *p, const void **buf,
                                       uint64_t *bytes);
ESMT_HIDDEN esmt_status esmt_param_write_host(esmt_param_memory *p, const float *host,
                                              uint64_t off, uint64_t n);
/* n fp32 weights from host memory to the device buffer dst in the compute
 * dtype (converted through a bounded staging buffer in half); synced. */
ESMT_HIDDEN esmt_status esmt_param_upload_converted(esmt_param_memory *p, void *dst,
                                                    const float *host, uint64_t n);

/* A frozen prefix in a half compute dtype (frozen_master.c): whether its
 * fp32 master stays in host memory (frozen_host), the device holding the
 * master of [opt_lo, total) only (no ZeRO: zero_level 0). */
ESMT_HIDDEN int esmt_param_frozen_on_host(const esmt_param_env *env, int zero_level);
/* The host master of the frozen prefix, the device master of what trains
 * and norm_dev allocated (values written later, esmt_param_write_host). */
ESMT_HIDDEN esmt_status esmt_param_frozen_setup(esmt_param_memory *p);
/* [off, off + n) of the fp32 master into host[0, n) from the host prefix
 * and the device master; synced. */
ESMT_HIDDEN esmt_status esmt_param_read_host(esmt_param_memory *p, float *host, uint64_t off,
                                             uint64_t n);
/* The part of host[0, n) (flat [off, off + n)) below master_lo into the
 * host prefix (esmt_param_write_host's host side). */
ESMT_HIDDEN void esmt_param_frozen_write(esmt_param_memory *p, const float *host, uint64_t off,
                                         uint64_t n);
ESMT_HIDDEN void esmt_param_frozen_release(esmt_param_memory *p);

#endif
