/* SPDX-License-Identifier: MIT */
/* Hot loops compiled once per instruction set: isa_*.c are built three
 * times (generic x86-64, AVX2+FMA, AVX-512) with CPU_ISA set to the
 * variant's name, each defining its tables with a suffixed name; cpu_isa()
 * picks the best the CPU supports at run time. The ops_*.c files keep
 * argument checks and threading, and call through these tables. */
#ifndef ESMTRAIN_ISA_KERNELS_H
#define ESMTRAIN_ISA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_ops.h"

#define ISA_CAT2(a, b) a##_##b
#define ISA_CAT(a, b) ISA_CAT2(a, b)
#define ISA_SYMBOL(name) ISA_CAT(name, CPU_ISA)

/* One (row b, head h) of attention per call, task = b * H + h; with packed
 * segments (a->segs.nseg > 0, args already size-checked) one (segment s,
 * head h), task = s * H + h. `scratch`
 * is per-thread, 64-byte aligned, scratch_floats(T, hd) floats long, and
 * set up by begin() once per call of the op in each thread. */
typedef struct cpu_isa_attention {
  size_t (*scratch_floats)(int T, int hd);
  void (*begin)(const esmtb_attention_args *a, float *scratch);
  void (*forward_head)(const esmtb_attention_args *a, int task, float *scratch);
  void (*backward_head)(const esmtb_attention_args *a, int task, float *scratch);
  /* The task's softmax probabilities into a->probs (attention_probs). */
  void (*probs_head)(const esmtb_attention_args *a, int task, float *scratch);
} cpu_isa_attention;

typedef struct cpu_adamw_consts {
  float b1, b2, eps, gs, step_size, inv_sqrt_bc2, decay;
} cpu_adamw_consts;

typedef struct cpu_isa_elementwise {
  /* x = gelu(x) over n values; the input is copied to pre first if non-NULL. */
  void (*gelu)(float *x, float *pre, long n);
  void (*gelu_backward)(const float *pre, const float *dout, float *dpre, long n);
  void (*add)(const float *a, const float *b, float *y, long n);
  void (*layernorm_row)(const float *x, const float *w, const float *b, float *out, int d,
                        float eps, float *mean, float *rstd);
  /* One row of LayerNorm backward; dw/db (per-thread partials) accumulate. */
  void (*layernorm_back_row)(const float *x, const float *w, const float *dout, float mean,
                             float rstd, float *dx, int accumulate, float *dw, float *db, int d);
  void (*adamw)(float *p, const float *g, float *m, float *v, long n, const cpu_adamw_consts *k);
  /* sum of x[i]^2 in double, in an order fixed by n alone */
  double (*sumsq)(const float *x, long n);
  void (*f32_to_bf16)(const float *src, uint16_t *dst, long n);
  void (*bf16_to_f32)(const uint16_t *src, float *dst, long n);
  /* 0 when the variant has no hardware fp16 conversion (the caller falls back) */
  int (*f32_to_f16)(const float *src, uint16_t *dst, long n);
  int (*f16_to_f32)(const uint16_t *src, float *dst, long n);
  /* Elements [first, first + n) of esmtb_dropout_args a (n <= CPU_BLOCK):
   * y = (a->accumulate ? y : 0) + mask * a->scale * x on fp32 views. */
  void (*dropout)(const float *x, float *y, long n, uint64_t first, const esmtb_dropout_args *a);
} cpu_isa_elementwise;

typedef struct cpu_isa_table {
  const char *name;
  const cpu_isa_attention *attention;
  const cpu_isa_elementwise *elementwise;
} cpu_isa_table;

/* The variant for this CPU ("avx512", "avx2" or "generic"); ESMT_CPU_ISA
 * in the environment may lower it (for tests and comparisons). */
CPU_HIDDEN const cpu_isa_table *cpu_isa(void);

#endif
