/* SPDX-License-Identifier: MIT */
/* The model's parameter memory: where the fp32 master weights, the
 * gradients and the optimizer state live, the copy the kernels compute on,
 * and every transfer between them. The graph (model/), the optimizer, the
 * checkpoints, ZeRO-1 and the trainer reach these buffers only through
 * this struct and its layer's operations (param_layer.h), never by asking
 * where the bytes are. Two layers implement the operations:
 *   device  (device_layer.c): everything in device memory; the kernels read
 *           the master itself (fp32) or a half copy refreshed from it;
 *   offload (offload.c), a layer over the device one: master weights and
 *           optimizer state in host memory, gradients streamed down to the
 *           host, the host optimizer, the compute weights pushed back up.
 * The layer is chosen once, at setup (esmt_offload_options).
 *
 * The memory knows nothing of the model that owns it: its owner describes
 * what it needs in an esmt_param_env (the backend, the stream, the flat
 * buffer's length, the compute dtype, where the LayerNorm tensors are),
 * so that a memory level is added here without touching the model's graph
 * beyond the hooks it already calls. */
#ifndef ESMTRAIN_PARAM_MEMORY_H
#define ESMTRAIN_PARAM_MEMORY_H

#include "ops_table.h"
#include "context.h"

struct esmt_offload;
struct esmt_stream;
struct esmt_grad_shard;
struct esmt_weight_gather;
struct esmt_param_layer;

/* What the owner gives the parameter memory. Pointers are borrowed: they
 * outlive the memory. */
typedef struct esmt_param_env {
  esmt_context *ctx;             /* the host optimizer's backend (registry), logger, threads */
  const esmtb_ops *ops;
  esmtb_device *dev;             /* NULL after the device is gone (release: host side only) */
  esmtb_stream *stream;          /* the compute stream (NULL: the device's default) */
  uint64_t total;                /* elements in each flat buffer */
  esmtb_dtype dtype;             /* the kernels' compute dtype */
  size_t esize;                  /* bytes per element of dtype */
  esmt_optimizer_kind optimizer; /* whose state the moments hold */
  float *scratch;                /* a device fp32 word for reductions */
  /* The LayerNorm w/b the kernels read in fp32 whatever the dtype: n_norm
   * tensors of d floats each at these flat offsets. */
  const uint64_t *norm_offs;
  int n_norm, d;
  /* The parts the graph runs in (weights_needed asks for one at a time):
   * part i is [part_bounds[i], part_bounds[i + 1]), n_parts + 1 bounds
   * from 0 to total. The first and the last part are read at both ends of
   * a pass (the tied embedding): a streaming layer keeps them resident. */
  const uint64_t *part_bounds;
  int n_parts;
  /* A failed device allocation's status, which the owner may extend with
   * its advice (what to change so that it fits); NULL: as it is. */
  esmt_status (*device_oom)(void *owner, esmt_status st);
  void *owner;
  /* The first element the optimizer updates: the elements below it are
   * frozen and the device layer holds no moments for them (0: all train). */
  uint64_t opt_lo;
} esmt_param_env;

/* Where flat elements are on the device for the kernels: `base` + off *
 * `esize`, or, when a layer streams, inside one of `n` windows (a part's
 * range [lo, hi) at ptr). An element in no window has no device address
 * now (NULL: the backend reports it as a missing argument). */
#define ESMT_PARAM_WINDOWS 3
typedef struct esmt_param_view {
  char *base;
  size_t esize;
  int n;
  struct {
    uint64_t lo, hi;
    char *ptr;
  } win[ESMT_PARAM_WINDOWS];
} esmt_param_view;

static inline void *esmt_param_view_at(const esmt_param_view *v, uint64_t off) {
  if (v->base) return v->base + off * v->esize;
  for (int i = 0; i < v->n; i++)
    if (off >= v->win[i].lo && off < v->win[i].hi)
      return v->win[i].ptr + (off - v->win[i].lo) * v->esize;
  return NULL;
}

/* Part k of env's bounds: its first flat element and its size. Parts 0
 * and n_parts - 1 are the end parts (the embedding's and the head's, read
 * at both ends of a pass), the others one layer each. */
static inline uint64_t esmt_param_part_lo(const esmt_param_env *e, int k) {
  return e->part_bounds[k];
}
static inline uint64_t esmt_param_part_n(const esmt_param_env *e, int k) {
  return e->part_bounds[k + 1] - e->part_bounds[k];
}
static inline int esmt_param_part_is_end(const esmt_param_env *e, int k) {
  return k == 0 || k == e->n_parts - 1;
}

/* The largest middle part (layer) of bounds b[0..n_parts]: what a slot holds. */
static inline uint64_t esmt_param_largest_layer(const uint64_t *b, int n_parts) {
  uint64_t slot = 0;
  for (int k = 1; k + 1 < n_parts; k++)
    if (b[k + 1] - b[k] > slot) slot = b[k + 1] - b[k];
  return slot;
}

/* The part of env's bounds that starts at flat element `lo`, or -1. */
static inline int esmt_param_part_at(const esmt_param_env *e, uint64_t lo) {
  int a = 0, b = e->n_parts - 1;
  while (a <= b) {
    const int mid = (a + b) / 2;
    if (e->part_bounds[mid] == lo) return mid;
    if (e->part_bounds[mid] < lo) a = mid + 1;
    else b = mid - 1;
  }
  return -1;
}

typedef struct esmt_param_memory {
  esmt_param_env env;
  /* What the kernels read and write: the compute weights (compute dtype)
   * and the gradients (fp32), by flat offset. */
  esmt_param_view weights, grad_view;
  float *master;          /* fp32 master weights: device, or host (offload) */
  /* The flat elements `master` holds: [master_lo, master_hi), element o at
   * master[o - master_lo]: all of them, except under ZeRO-2 with a half
   * compute copy, where each rank keeps its shard (param_shard.c) and the
   * kernels read the half copy and norm_dev. */
  uint64_t master_lo, master_hi;
  float *grads;           /* fp32 gradients: device, or host (streamed) */
  /* The flat elements `grads` holds: [grads_lo, grads_hi), element o at
   * grads[o - grads_lo]: all of them, except past a frozen prefix
   * (env.opt_lo > 0, device layer: [opt_lo, total)) and under ZeRO-2's
   * sharded gradients (grad_shard.c: the rank's shard). */
  uint64_t grads_lo, grads_hi;
  /* The optimizer's state (optim/optimizer.h) of the elements [opt_lo,
   * opt_hi) only: all of them, except under ZeRO-1 where each rank keeps
   * its shard. moment1 is AdamW's and Lion's first moment, moment2 AdamW's
   * second (NULL for Lion). Device, or host (offload). */
  float *moment1, *moment2;
  uint64_t opt_lo, opt_hi;
  /* What the kernels read: compute32, device fp32 weights (the master
   * itself on the device layer), or compute_lowp, the same layout in the
   * compute dtype (NULL in fp32), refreshed from the master by every write
   * and by the optimizer step. */
  float *compute32;
  void *compute_lowp;
  uint64_t compute_lo;    /* the flat element at compute_lowp[0]: 0, or ZeRO-3's shard start */
  /* Offload in F16/BF16, and a sharded master: the env's LayerNorm w/b in
   * fp32 on the device, n_norm x d floats in the order of env.norm_offs. */
  float *norm_dev;
  /* A frozen prefix in half: the fp32 master of [0, master_lo) in host
   * memory (frozen_master.c); NULL elsewhere. */
  float *frozen_host;
  const struct esmt_param_layer *layer; /* the device or the offload layer */
  struct esmt_offload *offload;         /* the offload layer's state; NULL on the device layer */
  struct esmt_stream *stream;           /* the stream layer's device side; NULL elsewhere */
  struct esmt_grad_shard *gshard;       /* ZeRO-2's gradient slots; NULL elsewhere */
  struct esmt_weight_gather *wgather;   /* ZeRO-3's gathered weights; NULL elsewhere */
} esmt_param_memory;

#endif
