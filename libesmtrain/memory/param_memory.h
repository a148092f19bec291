/* The model's parameter memory: where the fp32 master weights, the
 * gradients and the optimizer state live, the copy the kernels compute on,
 * and every transfer between them. The graph (model/), the optimizer, the
 * checkpoints, ZeRO-1 and the trainer reach these buffers only through
 * this struct and its layer's operations, never by asking where the bytes
 * are. Two layers implement the operations:
 *   device  (param_memory.c): everything in device memory; the kernels read
 *           the master itself (fp32) or a half copy refreshed from it;
 *   offload (offload.c), a layer over the device one: master weights and
 *           optimizer state in host memory, gradients streamed down to the
 *           host, the host optimizer, the compute weights pushed back up.
 * The layer is chosen once, at model creation (esmt_offload_options). */
#ifndef ESMTRAIN_PARAM_MEMORY_H
#define ESMTRAIN_PARAM_MEMORY_H

#include "internal.h"

struct esmt_offload;
struct esmt_param_layer;

typedef struct esmt_param_memory {
  float *master;          /* fp32 master weights, layout.total: device, or host (offload) */
  float *grads;           /* fp32 gradients, layout.total, device */
  /* The optimizer's state (optim/optimizer.h) of the elements [opt_lo,
   * opt_hi) only: all of them, except under ZeRO-1 where each rank keeps
   * its shard. moment1 is AdamW's and Lion's first moment, moment2 AdamW's
   * second (NULL for Lion). Device, or host (offload). */
  float *moment1, *moment2;
  uint64_t opt_lo, opt_hi;
  /* What the kernels read: compute32, device fp32 weights (the master
   * itself on the device layer), or compute_lowp, the same layout in the
   * model's F16/BF16 compute dtype (NULL in fp32), refreshed from the
   * master by every write and by the optimizer step. */
  float *compute32;
  void *compute_lowp;
  /* Offload in F16/BF16: the n_norm LayerNorm w/b (d floats each) the
   * kernels read in fp32, at norm_offs in the flat layout. */
  float *norm_dev;
  uint64_t *norm_offs;
  int n_norm;
  const struct esmt_param_layer *layer; /* the device or the offload layer */
  struct esmt_offload *offload;         /* the offload layer's state; NULL on the device layer */
} esmt_param_memory;

#endif
