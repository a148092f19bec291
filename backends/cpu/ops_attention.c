/* CPU kernels: ESM-2 self-attention core, forward and backward, per
 * (row, head) with blocks of RB query rows. Nothing of size T x T is kept:
 * a block's scores live in an RB x T scratch, and backward recomputes the
 * probabilities from the saved log-sum-exp (flash-attention style).
 * Rotary (split-half) and the q scale are applied while gathering a head
 * into contiguous scratch, and undone on the gradients at the end. The
 * head kernels are per instruction set (isa_attention.c). */
#include <stdlib.h>

#include "cpu_attention.h"
#include "isa_kernels.h"

static float *scratch_alloc(head_scratch *h, int T, int hd) {
  size_t th = (size_t)(T + RB) * hd, blk = (size_t)RB * (T + JB);
  float *base = malloc((9 * th + 3 * blk + (size_t)T + RB) * sizeof(float));
  if (!base) return NULL;
  float *p = base;
  float **slots[] = {&h->Q, &h->K, &h->Kt, &h->V, &h->Vt, &h->dO, &h->dQ, &h->dK, &h->dV};
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++, p += th) *slots[i] = p;
  h->S = p; p += blk;
  h->P = p; p += blk;
  h->dS = p; p += blk;
  h->D = p;
  return base;
}

static int check(const esmtb_attention_args *a, int backward, const char *op) {
  if (!a || !a->qkv || !a->seq_len || !a->rope_cos || !a->rope_sin || !a->out || !a->lse)
    return cpu_fail(1, "cpu %s: NULL argument", op);
  if (backward && (!a->dout || !a->dqkv)) return cpu_fail(1, "cpu %s: NULL gradient", op);
  if (a->dtype != ESMTB_F32) return cpu_fail(8, "cpu backend: %s supports only fp32", op);
  if (a->B <= 0 || a->T <= 0 || a->H <= 0 || a->hd <= 0 || a->hd % 2 || a->hd > 128)
    return cpu_fail(1, "cpu %s: bad shape B=%d T=%d H=%d hd=%d (hd even, <= 128)", op, a->B, a->T,
                    a->H, a->hd);
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
  int failed = 0;
#pragma omp parallel num_threads(dev->num_threads)
  {
    head_scratch s;
    float *base = scratch_alloc(&s, a->T, a->hd);
    float obuf[RB * 128];
    if (!base) failed = 1;
#pragma omp for schedule(dynamic, 1)
    for (int task = 0; task < a->B * a->H; task++) {
      if (!base) continue;
      if (backward) k->backward_head(a, task / a->H, task % a->H, &s);
      else k->forward_head(a, task / a->H, task % a->H, &s, obuf);
    }
    free(base);
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
