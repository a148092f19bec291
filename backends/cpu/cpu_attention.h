/* Shared between the attention entry points (ops_attention.c) and the
 * per-ISA head kernels (isa_attention.c). */
#ifndef ESMTRAIN_CPU_ATTENTION_H
#define ESMTRAIN_CPU_ATTENTION_H

#include "cpu_ops.h"

#define RB 4   /* query rows per block */
#define JB 16  /* key columns per register tile */

/* Per-thread scratch for one (row, head): contiguous rotated Q/K, K^T,
 * V, V^T, gradients, and RB x (T + JB) score blocks. */
typedef struct head_scratch {
  float *Q, *K, *Kt, *V, *Vt, *dO, *dQ, *dK, *dV, *S, *P, *dS, *D;
} head_scratch;


#endif
