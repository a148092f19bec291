/* CPU kernels: ESM-2 self-attention core, forward and backward. This file
 * checks arguments and spreads the (row, head) pairs over threads, each
 * with its own scratch; the head kernels are per instruction set
 * (isa_attention.c, which describes the algorithm). */
#include <stdlib.h>

#include "cpu_half.h"
#include "isa_kernels.h"

static int check(const esmtb_attention_args *a, int backward, const char *op) {
  if (!a || !a->qkv || !a->seq_len || !a->rope_cos || !a->rope_sin || !a->out || !a->lse)
    return cpu_fail(1, "cpu %s: NULL argument", op);
  if (backward && (!a->dout || !a->dqkv)) return cpu_fail(1, "cpu %s: NULL gradient", op);
  CPU_REQUIRE_ACT(a->dtype, op);
  if (a->B <= 0 || a->T <= 0 || a->H <= 0 || a->hd <= 0 || a->hd % 2)
    return cpu_fail(1, "cpu %s: bad shape B=%d T=%d H=%d hd=%d (hd even)", op, a->B, a->T, a->H,
                    a->hd);
  for (int b = 0; b < a->B; b++)
    if (a->seq_len[b] < 1 || a->seq_len[b] > a->T)
      return cpu_fail(1, "cpu %s: seq_len[%d] = %d outside [1, %d]", op, b, a->seq_len[b], a->T);
  return 0;
}

/* Every (row, head) pair is one task; each thread owns its scratch. */
static esmtb_status run_heads(esmtb_device *dev, const esmtb_attention_args *a, int backward) {
  const char *op = backward ? "attention_backward" : "attention_forward";
  esmtb_status rc = check(a, backward, op);
  if (rc) return rc;
  const cpu_isa_attention *k = cpu_isa()->attention;
  const size_t bytes = (k->scratch_floats(a->T, a->hd) * sizeof(float) + 63) / 64 * 64;
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
    for (int task = 0; task < a->B * a->H; task++) {
      if (!scratch) continue;
      if (backward) k->backward_head(a, task, scratch);
      else k->forward_head(a, task, scratch);
    }
    free(scratch);
  }
  return failed ? cpu_fail(2, "cpu %s: out of memory for scratch", op) : 0;
}

esmtb_status cpu_attention_forward(esmtb_device *dev, const esmtb_attention_args *a,
                                   esmtb_stream *st) {
  (void)st;
  return run_heads(dev, a, 0);
}

esmtb_status cpu_attention_backward(esmtb_device *dev, const esmtb_attention_args *a,
                                    esmtb_stream *st) {
  (void)st;
  return run_heads(dev, a, 1);
}
