/* SPDX-License-Identifier: MIT */
/* The stream layer of the parameter memory (param_layer.h:
 * esmt_stream_layer), over the offload layer's host side (offload.h):
 * master weights, moments, the fp32 gradients and the half staging image
 * stay in host memory, and the device keeps only what the part running now
 * needs. The parts are the model's (esmt_param_env.part_bounds): the
 * embedding, each layer, the head. The first and the last part stay on the
 * device (the tied embedding is read at both ends of a pass); each middle
 * part comes and goes through two device slots.
 *
 * Gradients (ESMT_STREAM_GRADIENTS and up). Backward produces a part's
 * gradients into a zeroed slot; when the part is final (grads_ready) an
 * event on the compute stream orders a D2H copy of the slot on the copy
 * stream into a pinned bounce buffer, and the slot is free again once that
 * copy is done: the compute stream waits for copied[a] before it zeroes
 * the slot for a later part (two parts later). A worker thread (host_sums.h)
 * waits for each copy and adds the bounce buffer into the fp32 gradients
 * with the host optimizer's add (all host threads; the first micro-batch
 * of an update copies it, so a one-micro-batch update equals the resident
 * run bit for bit), while the issuing thread goes on queueing backward; it
 * waits only to refill a bounce buffer whose sum is not done, and for all
 * sums when the gradients are read (norm, step, a copy). The end parts'
 * gradients accumulate on the device and are pulled when read.
 *
 *   compute:  [bwd part k -> slot a] rec done[a] wait copied[b]; [bwd k-1 -> slot b] ...
 *   copy:            wait done[a]; D2H a->bounce[a]; rec copied[a]      wait done[b] ...
 *   worker:                       sync copied[a]; acc += bounce[a]   sync copied[b] ...
 *
 * Weights (ESMT_STREAM_WEIGHTS). weights_needed(part) makes the compute
 * stream wait for that part's H2D copy into a slot (issued on the copy
 * stream, after the event that says the slot's previous part is no longer
 * read), then prefetches the next part in the pass's direction into the
 * other slot, so that a layer's upload overlaps the previous layer's
 * compute. The source is the host image the optimizer writes (the staging
 * image in half, the master in fp32); the LayerNorm w/b of every part stay
 * on the device in half (norm_dev), as under offload. An optimizer step or
 * a weight write waits for the copy stream and forgets the slots.
 *
 *   copy:     wait free[b]; H2D part k+1 -> slot b; rec loaded[b]
 *   compute:  wait loaded[a]; fwd part k (slot a); rec free[a]; wait loaded[b]; fwd k+1 ...
 */
#ifndef ESMTRAIN_STREAM_H
#define ESMTRAIN_STREAM_H

#include "esmtrain/backend.h"
#include "host_sums.h"
#include "offload.h"

typedef struct esmt_stream {
  int level;                 /* ESMT_STREAM_GRADIENTS or ESMT_STREAM_WEIGHTS */
  uint64_t first_n, last_lo, last_n; /* the resident end parts: [0, first_n), [last_lo, total) */
  uint64_t slot_n;           /* elements of the largest middle part */

  /* Weights (level WEIGHTS): the end parts, then two slots, compute dtype. */
  char *w_ends;
  char *w_slot[2];
  int w_part[2];             /* the part a slot holds or receives, -1: none */
  esmtb_event *w_loaded[2];  /* on the copy stream: the slot's upload is done */
  esmtb_event *w_free[2];    /* on the compute stream: the slot's part is no longer read */
  int w_free_set[2];         /* w_free recorded since the slot was last filled */
  int w_cur;                 /* the slot the compute stream reads, -1: none */
  int last_part;             /* the last part asked for, -1: none since the slots were filled */
  int dir;                   /* the pass's direction: +1 forward, -1 backward */

  /* Gradients: the end parts (fp32, device), two device slots, two
   * pinned bounce buffers. */
  float *g_ends;
  float *g_slot[2];
  float *g_bounce[2];
  int g_part[2];             /* the part whose gradients the slot holds, -1: none */
  int g_copying[2];          /* a copy out of the slot was issued (copied[] recorded) */
  esmtb_event *g_done[2];    /* on the compute stream: the part's backward is done */
  esmtb_event *g_copied[2];  /* on the copy stream: the slot is in the bounce buffer */
  int g_cur;                 /* the slot backward writes, -1: none */
  uint64_t g_final_from;     /* grads_ready's last `from` in this backward */
  unsigned char *g_fresh;    /* per part: the host gradients are zero (copy, not add) */
  int host_ends_valid;       /* the host end parts equal g_ends */

  esmt_host_sums sums;       /* the host's adds, on their own thread */

  /* Statistics. */
  uint64_t uploads, prefetch_hits, parts_streamed_down;
} esmt_stream;

/* Device bytes of the compute weights and of the gradients under a level,
 * and the extra host bytes (the bounce buffers), for `n_parts` parts of the
 * given bounds, `esize`-byte compute weights and n_norm x d LayerNorm
 * floats: the planner's figures, what setup allocates. */
typedef struct esmt_stream_bytes {
  uint64_t device_weights, device_grads, host_extra;
} esmt_stream_bytes;
ESMT_HIDDEN esmt_stream_bytes esmt_stream_sizes(int level, const uint64_t *part_bounds, int n_parts,
                                                int esize, int n_norm, int d);

/* Mutation switches for the checkers' tests (tests/gpu/emu/mutants.sh via
 * test_gpu_offload --mutant): 1 drops the compute stream's wait for a
 * weight slot's upload; 1 lets the host take a gradient bounce buffer and
 * reuse its slot without waiting for the slot's copy. Never set otherwise. */
ESMT_HIDDEN extern int esmt_test_stream_drop_weight_wait;
ESMT_HIDDEN extern int esmt_test_stream_drop_grad_wait;

/* During the memory's setup (param_setup.c), for options with `streamed`. */
ESMT_HIDDEN esmt_status esmt_stream_setup(esmt_param_memory *p, const esmt_offload_options *o);

#endif
