/* SPDX-License-Identifier: MIT */
/* Optimizer offload (issue #7), the parameter memory's offload layer
 * (param_layer.h: esmt_offload_layer, over the device layer): fp32 master
 * weights, the optimizer's moments and a
 * host copy of the fp32 gradients live in (pinned) host memory; the device
 * keeps the compute-dtype weights and the fp32 gradients. The host AdamW
 * is the cpu backend's (cpu.so loaded from the registry as a second "host"
 * ops table). Shared unchanged by every GPU backend: only the ABI's alloc
 * (ESMTB_MEM_PINNED_HOST), copy_async, streams and events are used.
 *
 * Schedule of one update (k micro-batches):
 *
 *   micro-batches 1..k-1   forward/backward, gradients accumulate on the device
 *   micro-batch k          esmt_offload_arm(); backward calls the memory's
 *                          grads_ready point as each bucket [from, end) of
 *                          gradients becomes final (LM head + final LN, each
 *                          layer top-down, the embedding last): we record an
 *                          event on the compute stream, make the copy stream
 *                          wait for it and queue the D2H copy of that bucket
 *                          there, so the copies overlap the rest of backward
 *   esmt_offload_finish()  waits for the copy stream: host gradients valid
 *   grad norm / clip       on the host copy (the cpu backend's sumsq)
 *   AdamW                  the cpu backend's adamw on the host buffers; in
 *                          F16/BF16 it also writes the compute-dtype weights
 *                          into a pinned staging buffer (followed by the fp32
 *                          LayerNorm w/b the kernels read)
 *   push                   one H2D copy of the new compute weights (the
 *                          staging buffer, or the fp32 master itself in fp32)
 *
 * A backward that was not armed (the public API used directly, or data
 * parallelism, whose all-reduce must finish before the copy) leaves the
 * host copy stale; the norm and AdamW then pull all gradients in one copy.
 *
 * Host memory is taken with ops->alloc(ESMTB_MEM_PINNED_HOST) while the
 * total stays within offload.pinned_memory_limit; a buffer past the cap (or
 * whose pinned allocation fails) falls back to pageable malloc, logged.
 * The buffers the copies use are allocated (so pinned) first: gradients,
 * the staging image, the master; then the moments (host-only). */
#ifndef ESMTRAIN_OFFLOAD_H
#define ESMTRAIN_OFFLOAD_H

#include "esmtrain/esmtrain.h"
#include "ops_table.h"
#include "optimizer.h"
#include "param_memory.h"

/* The memory policy a model is created with (offload.*, the device
 * budget); {0} is the plain model of esmt_model_create. */
typedef struct esmt_offload_options {
  int enabled;                /* 1: master weights and moments on the host */
  uint64_t pinned_limit;      /* bytes of page-locked memory at most; 0 = no cap */
  int recompute;              /* 1: activation recompute (esmt_model_set_recompute) */
  uint64_t device_memory_limit; /* the backend's allocation budget; 0 = the context's */
  /* With `enabled`, what else leaves the device (stream.h), an
   * esmt_stream_level: NONE, GRADIENTS (each layer's gradients go to the
   * host as backward produces them), WEIGHTS (that, and each layer's
   * compute weights come in as it runs). */
  int streamed;
  /* The ZeRO stage (dist/dp_zero.c) the data-parallel group of zero_world
   * ranks will run, this being zero_rank. From stage 1 the moments are
   * allocated for the rank's shard only, from stage 2 the gradients as
   * slots and the shard (grad_shard.h), so that the whole buffers are never
   * allocated; 0: whole. With `enabled` (stages 1 and 2, not streamed) the
   * host buffers hold the rank's shard: fp32 master, moments, gradients
   * and the staging image; the device keeps the whole compute copy, which
   * the ranks all-gather after each step. */
  int zero_level, zero_rank, zero_world;
} esmt_offload_options;

#define ESMT_OFFLOAD_MAX_BUFS 8

typedef struct esmt_offload esmt_offload;

struct esmt_offload {
  const esmtb_ops *hops;      /* the host optimizer: cpu.so's table */
  esmtb_device *hdev;
  esmtb_stream *copy;         /* device stream for the gradient D2H copies */
  esmtb_event *ready;         /* recorded on the compute stream per bucket */
  /* The flat elements the host buffers hold, [lo, hi): all of them, or
   * the rank's ZeRO shard (esmt_offload_options.zero_level). The master,
   * the moments, the gradients and the staging image start at lo. */
  uint64_t lo, hi;
  int zero_level;             /* the ZeRO stage the buffers were sized for; 0: none */
  float *grads;               /* host fp32 gradients of [lo, hi) */
  void *staging;              /* F16/BF16: host image of [lo, hi) of the device compute
                               * buffer, then the fp32 LayerNorm w/b (norm_dev's image) */
  uint64_t staging_bytes;
  struct {
    void *ptr;
    uint64_t bytes;
    int pinned;
  } bufs[ESMT_OFFLOAD_MAX_BUFS];
  int nbufs;
  uint64_t pinned_limit, pinned_bytes, pageable_bytes;
  int armed;                  /* streaming the current backward's buckets */
  uint64_t pending_end;       /* buckets [from, pending_end) not yet queued */
  int host_grads_valid;       /* host grads equal the device grads */
  uint64_t buckets_streamed;  /* statistics: copies queued from grads_ready */
  uint64_t full_pulls;        /* ... and whole-buffer pulls */
};

/* What the offload layer's buffers are sized by: the parameter count, the
 * LayerNorm tensors (n_norm of d floats), the optimizer and the compute
 * dtype's bytes. The planner fills it from a model configuration, the
 * setup from the memory's env, so that the plan is what is allocated. */
typedef struct esmt_offload_shape {
  uint64_t params;
  int n_norm, d;
  esmt_optimizer_kind optimizer;
  int esize;
} esmt_offload_shape;

/* Host bytes an offloaded model allocates (master weights, moments, host
 * gradients, and for F16/BF16 the staging image): the planner's figure. */
ESMT_HIDDEN uint64_t esmt_offload_host_bytes(const esmt_offload_shape *s);

/* The host bytes of one rank's shard under ZeRO (stage >= 1, `world`
 * ranks: the largest shard's), or of the whole buffer. */
ESMT_HIDDEN uint64_t esmt_offload_host_bytes_sharded(const esmt_offload_shape *s, int zero_level,
                                                     int world);

/* Whether the host buffers hold a shard only (ZeRO with offload). */
ESMT_HIDDEN int esmt_offload_sharded(const esmt_param_memory *p);

/* Bytes of the device compute-weight buffer under offload in F16/BF16:
 * the half weights (padded to 256 bytes) then the fp32 LayerNorm w/b. */
ESMT_HIDDEN uint64_t esmt_offload_compute_bytes(const esmt_offload_shape *s);

/* During the memory's setup: open the host optimizer, allocate the host
 * buffers (setting p->master, p->moment1, p->moment2) and the device
 * compute weights; logs the host RAM needed. */
ESMT_HIDDEN esmt_status esmt_offload_setup(esmt_param_memory *p, const esmt_offload_options *o);

/* The host side alone, for a layer built over it (stream.c): the host
 * optimizer, the copy stream and its event, and the host buffers (master,
 * moments, fp32 gradients, the staging image in half); logs the host RAM.
 * The device side is the caller's. */
ESMT_HIDDEN esmt_status esmt_offload_setup_host(esmt_param_memory *p,
                                                const esmt_offload_options *o);
/* ZeRO-3 with offload (offload_zero3.c): the host side for the rank's
 * shard, the device side ZeRO-3's (the shard's compute weights, the weight
 * and gradient slots, the shard's gradients), run by ZeRO-2's layer
 * (grad_shard.c), whose release hands the host side back through
 * esmt_offload_zero3_release_host (offload.c; with the fp32 compute shard). */
ESMT_HIDDEN esmt_status esmt_offload_setup_zero3(esmt_param_memory *p,
                                                 const esmt_offload_options *o);
ESMT_HIDDEN void esmt_offload_zero3_release_host(esmt_param_memory *p);
/* The offload layer's device side: the compute weights (fp32, or half
 * with the fp32 LayerNorm w/b after them in norm_dev). */
ESMT_HIDDEN esmt_status esmt_offload_setup_device(esmt_param_memory *p);
/* The whole compute copy to the device from the host image (after a host
 * step that wrote it), synchronised. */
ESMT_HIDDEN esmt_status esmt_offload_upload(esmt_param_memory *p);
/* One more host buffer on the same terms (pinned under the cap, released
 * with the rest). */
ESMT_HIDDEN esmt_status esmt_offload_host_alloc(esmt_param_memory *p, uint64_t bytes,
                                                const char *what, void **out);
/* F16/BF16: the staging image of elements [offset, offset+count) from the
 * master (the host conversion); and the fp32 LayerNorm w/b gathered after
 * the half weights, returned (what norm_dev receives). */
ESMT_HIDDEN esmt_status esmt_offload_stage(esmt_param_memory *p, uint64_t offset, uint64_t count);
ESMT_HIDDEN float *esmt_offload_gather_norms(esmt_param_memory *p);
/* The host gradients' sum of squares, and the host optimizer on the host
 * buffers (the staging image written in half), as they are: no pull, no
 * upload. */
ESMT_HIDDEN esmt_status esmt_offload_host_sumsq(esmt_param_memory *p, float *sum);
ESMT_HIDDEN esmt_status esmt_offload_host_step(esmt_param_memory *p, esmt_optim_step *s);
ESMT_HIDDEN void esmt_offload_destroy(esmt_param_memory *p);

/* 1 when buf points into a host buffer (master, moment1, moment2). */
ESMT_HIDDEN int esmt_offload_is_master(const esmt_param_memory *p, const void *buf);

/* Refresh the device compute weights from the host master (elements
 * [offset, offset+count); the fp32 LayerNorm copies always). */
ESMT_HIDDEN esmt_status esmt_offload_push_weights(esmt_param_memory *p, uint64_t offset, uint64_t count);

/* The offload layer's operations (esmt_offload_layer, param_layer.h): called
 * only on a model that has this layer. */
/* Stream the next backward's gradients to the host bucket by bucket. */
ESMT_HIDDEN esmt_status esmt_offload_arm(esmt_param_memory *p);
/* The backward's grads_ready point: [from, total) are final. */
ESMT_HIDDEN esmt_status esmt_offload_grads_ready(esmt_param_memory *p, uint64_t from);
/* Wait for the streamed copies (after an armed backward); cancel on error. */
ESMT_HIDDEN esmt_status esmt_offload_finish(esmt_param_memory *p);
ESMT_HIDDEN void esmt_offload_cancel(esmt_param_memory *p);
/* The device gradients changed (zero_grad, backward, a write). */
ESMT_HIDDEN void esmt_offload_grads_changed(esmt_param_memory *p);
/* Make the host gradients current (one D2H copy unless streamed). */
ESMT_HIDDEN esmt_status esmt_offload_pull_grads(esmt_param_memory *p);

/* Global gradient sum of squares on the host copy. */
ESMT_HIDDEN esmt_status esmt_offload_grad_sumsq(esmt_param_memory *p, float *sum);
/* The host optimizer (the step's kind) on the host buffers, through the
 * cpu backend's op, then the compute weights to the device. */
ESMT_HIDDEN esmt_status esmt_offload_step(esmt_param_memory *p, esmt_optim_step *s);

#endif
