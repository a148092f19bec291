/* SPDX-License-Identifier: MIT */
/* ZeRO-2's gradient layer (param_layer.h: esmt_grad_shard_layer), over the
 * device layer: a rank keeps fp32 gradients for its shard [lo, hi) of the
 * flat buffer only, never the whole buffer. Backward writes a part's
 * gradients (env.part_bounds: the embedding, each layer, the head) into a
 * zeroed slot; when the part is final (grads_ready) the owner's reducer
 * reduce-scatters the slot onto the ranks that own its elements, and this
 * rank's piece is added into its shard (copied at the update's first
 * micro-batch, so that one micro-batch per rank gives ZeRO-1's bits). The
 * end parts (the tied embedding is written at both ends of backward) keep
 * whole buffers for one backward and are cleared after their reduction.
 *
 *   compute: [bwd part k -> slot a] ready; wait reduced[b]; zero b; [bwd k-1 -> b] ...
 *   reducer:        wait ready; reduce-scatter slot a; shard += piece; rec reduced[a]
 *
 * The reducer (dist/dp_zero.c) queues the reduce-scatter and says on which
 * stream its result is ready: the device communicator's stream, or the
 * compute stream itself when it ran on the host (TCP). The last part of a
 * backward (the embedding) makes the compute stream wait for the shard. */
#ifndef ESMTRAIN_GRAD_SHARD_H
#define ESMTRAIN_GRAD_SHARD_H

#include "esmtrain/backend.h"
#include "param_memory.h"

/* Reduce-scatter the local gradients `buf` of the flat elements [lo, lo +
 * n) onto their owners, in order after what the compute stream has
 * queued; *on: the stream on which the summed shard pieces are ready. */
typedef esmt_status (*esmt_grad_reduce_fn)(void *user, float *buf, uint64_t lo, uint64_t n,
                                           esmtb_stream **on);

typedef struct esmt_grad_shard {
  uint64_t lo, hi;                 /* this rank's shard */
  esmt_grad_reduce_fn reduce;      /* NULL once the reducer is gone */
  void *user;
  uint64_t first_n, last_lo, last_n, slot_n;
  float *ends;                     /* the end parts: [0, first_n), then [last_lo, total) */
  float *slot[2];
  int part[2];                     /* the part a slot holds, -1: none */
  int pending[2];                  /* reduced[i] recorded since the slot was filled */
  esmtb_event *reduced[2];         /* on the reducer's stream: slot i is free again */
  esmtb_event *tail;               /* on the reducer's stream: the last piece is in the shard */
  int tail_set;
  int cur;                         /* the slot backward writes, -1: none */
  uint64_t final_from;             /* grads_ready's last `from` in this backward */
  unsigned char *fresh;            /* per part: its shard piece is zero (copy, not add) */
  uint64_t parts_reduced;          /* statistics */
} esmt_grad_shard;

/* Mutation switches for the checkers' tests (tests/gpu/emu/mutants.sh via
 * test_gpu_nccl_dp --mutant): 1 lets backward zero a slot without waiting
 * for its previous part's reduction; 1 lets the compute stream read the
 * shard without waiting for the last piece. Never set otherwise. */
ESMT_HIDDEN extern int esmt_test_zero_drop_slot_wait;
ESMT_HIDDEN extern int esmt_test_zero_drop_shard_wait;

/* Device bytes of the gradients per rank under ZeRO-2's slots: the end
 * parts, two slots of the largest middle part and the shard of `shard_n`
 * elements (the planner's figure, what setup allocates). */
ESMT_HIDDEN uint64_t esmt_grad_shard_bytes(const uint64_t *part_bounds, int n_parts,
                                           uint64_t shard_n);

/* Switch the device layer's whole gradient buffer (if any) for ZeRO-2's
 * slots and the shard [lo, hi); the gradients so far are lost (call
 * between updates). Memory set up with the slots for that shard already
 * (esmt_offload_options.zero_level) only takes the reducer. Not with
 * offload or streaming: ESMT_ERR_UNSUPPORTED. */
ESMT_HIDDEN esmt_status esmt_param_shard_grads(esmt_param_memory *p, uint64_t lo, uint64_t hi,
                                               esmt_grad_reduce_fn reduce, void *user);
/* The reducer is gone: a later backward fails with a message. */
ESMT_HIDDEN void esmt_param_shard_grads_unhook(esmt_param_memory *p);

#endif
