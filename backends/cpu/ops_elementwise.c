/* SPDX-License-Identifier: MIT */
/* CPU kernels: residual add, GELU backward, bias gradient, scale, sum of
 * squares and dtype conversion. Activations may be F32, F16 or BF16; scale
 * and sumsq work on fp32 buffers only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "cpu_half.h"
#include "cpu_math.h"
#include "cpu_ops.h"
#include "isa_kernels.h"

/* Run kern over [0, n) in one contiguous chunk per thread. */
#define CHUNKED(dev, n, body)                                            \
  _Pragma("omp parallel num_threads((dev)->num_threads)") {              \
    size_t b_, e_;                                                       \
    cpu_chunk((size_t)(n), omp_get_num_threads(), omp_get_thread_num(), &b_, &e_); \
    body;                                                                \
  }

/* The elementwise ops go through fp32 stack blocks (cpu_half.h); an
 * output may alias an input: each block is read before it is written. */
static long block_len(size_t i, size_t e) { return (long)(e - i < CPU_BLOCK ? e - i : CPU_BLOCK); }

static void add_range(const esmtb_add_args *a, size_t b, size_t e) {
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
  const esmtb_dtype dt = a->dtype;
  float ta[CPU_BLOCK], tb[CPU_BLOCK], ty[CPU_BLOCK];
  for (size_t i = b; i < e; i += CPU_BLOCK) {
    const long n = block_len(i, e);
    float *y = cpu_out(a->y, dt, i, ty);
    k->add(cpu_in(a->a, dt, i, n, ta), cpu_in(a->b, dt, i, n, tb), y, n);
    cpu_out_done(a->y, dt, i, ty, n);
  }
}

esmtb_status cpu_add(esmtb_device *dev, const esmtb_add_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || (a->n && (!a->a || !a->b || !a->y))) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu add: NULL argument");
  CPU_REQUIRE_ACT(a->dtype, "add");
  CHUNKED(dev, a->n, add_range(a, b_, e_));
  return 0;
}

static void gelu_backward_range(const esmtb_gelu_backward_args *a, size_t b, size_t e) {
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
  const esmtb_dtype dt = a->dtype;
  float tp[CPU_BLOCK], td[CPU_BLOCK], ty[CPU_BLOCK];
  for (size_t i = b; i < e; i += CPU_BLOCK) {
    const long n = block_len(i, e);
    float *dpre = cpu_out(a->dpre, dt, i, ty);
    k->gelu_backward(cpu_in(a->pre, dt, i, n, tp), cpu_in(a->dout, dt, i, n, td), dpre, n);
    cpu_out_done(a->dpre, dt, i, ty, n);
  }
}

esmtb_status cpu_gelu_backward(esmtb_device *dev, const esmtb_gelu_backward_args *a,
                               esmtb_stream *s) {
  (void)s;
  if (!a || (a->n && (!a->pre || !a->dout || !a->dpre)))
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu gelu_backward: NULL argument");
  CPU_REQUIRE_ACT(a->dtype, "gelu_backward");
  CHUNKED(dev, a->n, gelu_backward_range(a, b_, e_));
  return 0;
}

/* Columns are split between threads, so each db[j] is summed by one thread
 * in row order: deterministic for any thread count (and block size). Half
 * dy takes wider blocks: fewer, longer conversions. */
CPU_FORCE_INLINE void bias_grad_cols(esmtb_dtype dt, const esmtb_bias_grad_args *a, int c0,
                                     int c1) {
  enum { MAXB = 64 };
  float acc[MAXB] = {0}, tmp[MAXB];
  for (int r = 0; r < a->rows; r++) {
    const float *row = cpu_in(a->dy, dt, (size_t)r * a->cols + c0, c1 - c0, tmp);
#pragma omp simd
    for (int c = 0; c < c1 - c0; c++) acc[c] += row[c];
  }
  for (int c = c0; c < c1; c++) a->db[c] += acc[c - c0];
}

esmtb_status cpu_bias_grad(esmtb_device *dev, const esmtb_bias_grad_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || !a->dy || !a->db) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu bias_grad: NULL argument");
  CPU_REQUIRE_ACT(a->dtype, "bias_grad");
  if (a->rows < 0 || a->cols <= 0) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu bias_grad: bad shape");
  const esmtb_dtype dt = a->dtype;
  const int cols = a->cols, block = 64;
  const int nblocks = (cols + block - 1) / block;
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
  for (int bi = 0; bi < nblocks; bi++) {
    const int c0 = bi * block, c1 = c0 + block < cols ? c0 + block : cols;
    CPU_BY_DTYPE(dt, bias_grad_cols, a, c0, c1);
  }
  return 0;
}

esmtb_status cpu_scale(esmtb_device *dev, const esmtb_scale_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || (a->n && !a->x)) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu scale: NULL argument");
  float *x = a->x;
  const float f = a->factor;
  const long n = (long)a->n;
#pragma omp parallel for simd num_threads(dev->num_threads) schedule(static)
  for (long i = 0; i < n; i++) x[i] *= f;
  return 0;
}

esmtb_status cpu_sumsq(esmtb_device *dev, const esmtb_sumsq_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || !a->out || (a->n && !a->x)) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu sumsq: NULL argument");
  const int parts = dev->num_threads;
  double *partial = calloc((size_t)parts, sizeof *partial);
  if (!partial) return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu sumsq: out of memory");
  const float *x = a->x;
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
  /* Fixed chunks per part, each summed in a fixed order, then the parts in
   * order: the same bits for a given thread count. */
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int t = 0; t < parts; t++) {
    size_t b, e;
    cpu_chunk(a->n, parts, t, &b, &e);
    partial[t] = k->sumsq(x + b, (long)(e - b));
  }
  double total = 0;
  for (int t = 0; t < parts; t++) total += partial[t];
  free(partial);
  *a->out += (float)total;
  return 0;
}

/* Elements [b, e) of a conversion, through fp32 (exact for the widening
 * steps) in stack blocks when neither side is fp32. */
static void convert_range(const esmtb_convert_args *a, size_t b, size_t e) {
  const esmtb_dtype sd = a->src_dtype, dd = a->dst_dtype;
  if (sd == dd) {
    const size_t es = cpu_dtype_size(sd);
    memcpy((char *)a->dst + b * es, (const char *)a->src + b * es, (e - b) * es);
  } else if (sd == ESMTB_F32) {
    cpu_half_store((const float *)a->src + b, a->dst, dd, b, (long)(e - b));
  } else if (dd == ESMTB_F32) {
    cpu_half_load(a->src, sd, b, (float *)a->dst + b, (long)(e - b));
  } else {
    float t[CPU_BLOCK];
    for (size_t i = b; i < e; i += CPU_BLOCK) {
      const long n = (long)(e - i < CPU_BLOCK ? e - i : CPU_BLOCK);
      cpu_half_load(a->src, sd, i, t, n);
      cpu_half_store(t, a->dst, dd, i, n);
    }
  }
}

esmtb_status cpu_convert(esmtb_device *dev, const esmtb_convert_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || (a->n && (!a->src || !a->dst))) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu convert: NULL argument");
  if (!cpu_act_dtype(a->src_dtype) || !cpu_act_dtype(a->dst_dtype))
    return cpu_fail(ESMTB_ERR_UNSUPPORTED, "cpu convert: only f32, f16 and bf16 are supported");
  CHUNKED(dev, a->n, convert_range(a, b_, e_));
  return 0;
}
