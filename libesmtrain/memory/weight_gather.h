/* SPDX-License-Identifier: MIT */
/* ZeRO-3's weight gathering (FSDP-style), over ZeRO-2's gradient slots
 * (grad_shard.h): a rank keeps the compute weights of its shard [lo, hi)
 * only (the fp32 master shard in fp32, a half shard beside it in fp16/
 * bf16), and a part's whole weights are all-gathered into one of two
 * device slots just before the graph reads it (weights_needed: forward,
 * recompute, backward), the next part in the pass's direction prefetched
 * into the other slot. The end parts (the embedding, the head: read at
 * both ends of a pass) stay whole on the device, gathered after each
 * update; in half the fp32 LayerNorm w/b stay whole in norm_dev.
 *
 *   compute: piece k+1 -> slot b; rec ready    | wait loaded[a]; fwd part k (slot a) ...
 *   comm:                 wait ready; all-gather slot b; rec loaded[b]
 *
 * The slot's previous part was read by kernels queued on the compute
 * stream before the piece copy, so the all-gather (after `ready`) never
 * overwrites weights still being read, and the compute stream waits for
 * loaded[] before it reads a slot. The owner (dist/dp_zero.c) queues the
 * all-gather and says on which stream its result is ready: the device
 * communicator's stream, or the compute stream when it ran on the host
 * (TCP). Every rank asks for the same parts in the same order (the same
 * graph), so the collectives match. */
#ifndef ESMTRAIN_WEIGHT_GATHER_H
#define ESMTRAIN_WEIGHT_GATHER_H

#include "esmtrain/backend.h"
#include "param_memory.h"

/* All-gather the compute weights of the flat elements [lo, lo + n) into
 * buf (compute dtype), this rank's piece already in place, in order after
 * what the compute stream has queued; *on: where buf is complete. */
typedef esmt_status (*esmt_weight_gather_fn)(void *user, void *buf, uint64_t lo, uint64_t n,
                                             esmtb_stream **on);

typedef struct esmt_weight_gather {
  uint64_t lo, hi;             /* this rank's shard of the compute weights */
  esmt_weight_gather_fn gather;
  void *user;
  uint64_t first_n, last_lo, last_n, slot_n;
  char *ends;                  /* the end parts, whole: [0, first_n), then [last_lo, total) */
  char *slot[2];
  int part[2];                 /* the part a slot holds or receives, -1: none */
  esmtb_event *loaded[2];      /* on the gather's stream: the slot is complete */
  esmtb_event *ends_loaded;
  int cur;                     /* the slot the compute stream reads, -1: none */
  int last_part, dir;          /* the pass's direction: +1 forward, -1 backward */
  uint64_t gathers, gathered_elems, prefetch_hits; /* statistics */
} esmt_weight_gather;

/* Mutation switches for the checkers' tests (tests/gpu/emu/mutants.sh via
 * test_gpu_nccl_dp --mutant): 1 lets the compute stream read a slot
 * without waiting for its all-gather; 1 lets it read the end parts
 * without waiting for theirs. Never set otherwise. */
ESMT_HIDDEN extern int esmt_test_zero3_drop_loaded_wait;
ESMT_HIDDEN extern int esmt_test_zero3_drop_ends_wait;

/* Device bytes of ZeRO-3's gathered weights per rank: the end parts and
 * two slots of the largest middle part, `esize` bytes an element. */
ESMT_HIDDEN uint64_t esmt_weight_gather_bytes(const uint64_t *part_bounds, int n_parts,
                                              int esize);
/* All-gathered elements per update with k micro-batches a rank: the end
 * parts once, the first forward's middle parts, then L - 2 parts every
 * later pass (the two slots still hold the parts at each turn). */
ESMT_HIDDEN uint64_t esmt_weight_gather_elems(const uint64_t *part_bounds, int n_parts,
                                              int micro_batches);

/* Switch memory with ZeRO-2's slots (and, in half, the sharded master) to
 * ZeRO-3: the master and the compute weights kept for [lo, hi) only, the
 * end parts and two slots allocated; the gather joins. Then
 * esmt_weight_gather_refresh fills the end parts (collective). */
ESMT_HIDDEN esmt_status esmt_param_shard_weights(esmt_param_memory *p, uint64_t lo, uint64_t hi,
                                                 esmt_weight_gather_fn gather, void *user);
/* weights_needed under ZeRO-3 (param_layer.h). */
ESMT_HIDDEN esmt_status esmt_weight_gather_needed(esmt_param_memory *p, uint64_t lo, uint64_t hi);
/* The shard changed (an update, a load): the slots are stale and the end
 * parts are gathered again (collective: every rank calls it). */
ESMT_HIDDEN esmt_status esmt_weight_gather_refresh(esmt_param_memory *p);
/* The weights [off, off + n) were written from host[0, n) (a load or the
 * initialisation, on every rank): the slots are stale and the end parts
 * take their piece of it. */
ESMT_HIDDEN esmt_status esmt_weight_gather_write_ends(esmt_param_memory *p, const float *host,
                                                      uint64_t off, uint64_t n);
ESMT_HIDDEN void esmt_weight_gather_release(esmt_param_memory *p);

#endif
