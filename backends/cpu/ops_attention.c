/* SPDX-License-Identifier: MIT */
/* CPU kernels: ESM-2 self-attention core, forward and backward. This file
 * checks arguments and spreads the (sequence, head) pairs over threads,
 * each with its own scratch; the head kernels are per instruction set
 * (isa_attention.c, which describes the algorithm). A packed segment
 * (ABI 1.3) runs through the same head kernel as a right-padded row.
 * attention_probs (ABI 2.2, inference) shares the checks and threading. */
#include <stdlib.h>
#include <string.h>

#include "cpu_half.h"
#include "cpu_segs.h"
#include "isa_kernels.h"

enum { FORWARD, BACKWARD, PROBS };

static int check(const esmtb_attention_args *a, int mode, const char *op) {
  const int packed = a->segs.nseg > 0;
  if (!a->qkv || (!packed && !a->seq_len) || !a->rope_cos || !a->rope_sin ||
      (mode == PROBS ? !a->probs : !a->out || !a->lse))
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: NULL argument", op);
  if (mode == BACKWARD && (!a->dout || !a->dqkv)) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: NULL gradient", op);
  CPU_REQUIRE_ACT(a->dtype, op);
  if (a->B <= 0 || a->T <= 0 || a->H <= 0 || a->hd <= 0 || a->hd % 2)
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: bad shape B=%d T=%d H=%d hd=%d (hd even)", op, a->B, a->T, a->H,
                    a->hd);
  if (packed) return cpu_segs_check(&a->segs, a->B, a->T, op);
  for (int b = 0; b < a->B; b++)
    if (a->seq_len[b] < 1 || a->seq_len[b] > a->T)
      return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: seq_len[%d] = %d outside [1, %d]", op, b, a->seq_len[b], a->T);
  return 0;
}

/* Packed rows: tokens in no segment get out = 0, lse = 0 (every head) and,
 * in backward, dqkv = 0. The head kernels zero only right padding. */
static void zero_gaps(const esmtb_attention_args *a, int backward) {
  const int T = a->T, H = a->H, D = H * a->hd;
  long next = 0; /* first token not yet accounted for */
  for (int i = 0; i <= a->segs.nseg; i++) {
    const long end = i < a->segs.nseg ? a->segs.start[i] : (long)a->B * T;
    for (long r = next; r < end; r++) {
      const long b = r / T, t = r % T;
      if (backward) {
        cpu_zero(a->dqkv, a->dtype, (size_t)r * 3 * D, 3 * (size_t)D);
        continue;
      }
      cpu_zero(a->out, a->dtype, (size_t)r * D, (size_t)D);
      for (int h = 0; h < H; h++) a->lse[((size_t)b * H + h) * T + t] = 0.0f;
    }
    if (i < a->segs.nseg) next = (long)a->segs.start[i] + a->segs.len[i];
  }
}

/* Every (sequence, head) pair is one task; each thread owns its scratch. */
static esmtb_status run_heads(esmtb_device *dev, const esmtb_attention_args *user, int mode) {
  static const char *const names[] = {"attention_forward", "attention_backward",
                                      "attention_probs"};
  const char *op = names[mode];
  const int backward = mode == BACKWARD;
  if (!user) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: NULL argument", op);
  esmtb_attention_args args;
  cpu_args_copy(&args, sizeof args, user, user->struct_size);
  const esmtb_attention_args *a = &args;
  esmtb_status rc = check(a, mode, op);
  if (rc) return rc;
  if (mode == PROBS) /* the heads write only their blocks */
    memset(a->probs, 0, (size_t)a->B * a->H * a->T * a->T * sizeof(float));
  const cpu_isa_attention *k = cpu_isa()->attention;
  const size_t bytes = (k->scratch_floats(a->T, a->hd) * sizeof(float) + 63) / 64 * 64;
  const int tasks = (a->segs.nseg > 0 ? a->segs.nseg : a->B) * a->H;
  int failed = 0;
#pragma omp parallel num_threads(dev->num_threads)
  {
    float *scratch = aligned_alloc(64, bytes);
    if (!scratch) {
#pragma omp atomic write
      failed = 1;
    } else {
      k->begin(a, scratch);
    }
#pragma omp for schedule(dynamic, 1)
    for (int task = 0; task < tasks; task++) {
      if (!scratch) continue;
      if (mode == PROBS) k->probs_head(a, task, scratch);
      else if (backward) k->backward_head(a, task, scratch);
      else k->forward_head(a, task, scratch);
    }
    free(scratch);
  }
  if (failed) return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu %s: out of memory for scratch", op);
  if (a->segs.nseg > 0 && mode != PROBS) zero_gaps(a, backward);
  return 0;
}

esmtb_status cpu_attention_forward(esmtb_device *dev, const esmtb_attention_args *a,
                                   esmtb_stream *st) {
  (void)st;
  return run_heads(dev, a, FORWARD);
}

esmtb_status cpu_attention_backward(esmtb_device *dev, const esmtb_attention_args *a,
                                    esmtb_stream *st) {
  (void)st;
  return run_heads(dev, a, BACKWARD);
}

esmtb_status cpu_attention_probs(esmtb_device *dev, const esmtb_attention_args *a,
                                 esmtb_stream *st) {
  (void)st;
  return run_heads(dev, a, PROBS);
}
