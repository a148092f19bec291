/* CPU kernels: residual add, GELU backward, bias gradient, scale, sum of
 * squares and dtype conversion. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

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

esmtb_status cpu_add(esmtb_device *dev, const esmtb_add_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || (a->n && (!a->a || !a->b || !a->y))) return cpu_fail(1, "cpu add: NULL argument");
  CPU_REQUIRE_F32(a->dtype, "add");
  const float *x = a->a, *z = a->b;
  float *y = a->y;
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
  CHUNKED(dev, a->n, k->add(x + b_, z + b_, y + b_, (long)(e_ - b_)));
  return 0;
}

esmtb_status cpu_gelu_backward(esmtb_device *dev, const esmtb_gelu_backward_args *a,
                               esmtb_stream *s) {
  (void)s;
  if (!a || (a->n && (!a->pre || !a->dout || !a->dpre)))
    return cpu_fail(1, "cpu gelu_backward: NULL argument");
  CPU_REQUIRE_F32(a->dtype, "gelu_backward");
  const float *pre = a->pre, *dout = a->dout;
  float *dpre = a->dpre;
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
  CHUNKED(dev, a->n, k->gelu_backward(pre + b_, dout + b_, dpre + b_, (long)(e_ - b_)));
  return 0;
}

/* Columns are split between threads, so each db[j] is summed by one thread
 * in row order: deterministic for any thread count. */
esmtb_status cpu_bias_grad(esmtb_device *dev, const esmtb_bias_grad_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || !a->dy || !a->db) return cpu_fail(1, "cpu bias_grad: NULL argument");
  CPU_REQUIRE_F32(a->dtype, "bias_grad");
  if (a->rows < 0 || a->cols <= 0) return cpu_fail(1, "cpu bias_grad: bad shape");
  const float *dy = a->dy;
  float *db = a->db;
  const int rows = a->rows, cols = a->cols;
  const int block = 64;
  const int nblocks = (cols + block - 1) / block;
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
  for (int bi = 0; bi < nblocks; bi++) {
    int c0 = bi * block, c1 = c0 + block < cols ? c0 + block : cols;
    float acc[64] = {0};
    for (int r = 0; r < rows; r++) {
      const float *row = dy + (size_t)r * cols;
#pragma omp simd
      for (int c = c0; c < c1; c++) acc[c - c0] += row[c];
    }
    for (int c = c0; c < c1; c++) db[c] += acc[c - c0];
  }
  return 0;
}

esmtb_status cpu_scale(esmtb_device *dev, const esmtb_scale_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || (a->n && !a->x)) return cpu_fail(1, "cpu scale: NULL argument");
  float *x = a->x;
  const float f = a->factor;
  const long n = (long)a->n;
#pragma omp parallel for simd num_threads(dev->num_threads) schedule(static)
  for (long i = 0; i < n; i++) x[i] *= f;
  return 0;
}

esmtb_status cpu_sumsq(esmtb_device *dev, const esmtb_sumsq_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || !a->out || (a->n && !a->x)) return cpu_fail(1, "cpu sumsq: NULL argument");
  const int parts = dev->num_threads;
  double *partial = calloc((size_t)parts, sizeof *partial);
  if (!partial) return cpu_fail(2, "cpu sumsq: out of memory");
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

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023, bits;
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f; /* subnormal: m * 2^-24 */
    return sign ? -v : v;
  }
  bits = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* Round to nearest even; overflow saturates to infinity like a cast. */
static uint16_t float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* >= 65520 rounds to inf */
  if (absx < 0x38800000u) { /* subnormal half */
    float v;
    memcpy(&v, &absx, 4);
    return (uint16_t)(sign | (uint32_t)lrintf(v * 16777216.0f));
  }
  uint32_t mant = absx & 0x7fffff, exp = (absx >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static float bf16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint16_t float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1); /* round to nearest even */
  return (uint16_t)(x >> 16);
}

static float load_as_float(const void *p, esmtb_dtype dt, size_t i) {
  switch (dt) {
    case ESMTB_F16: return half_to_float(((const uint16_t *)p)[i]);
    case ESMTB_BF16: return bf16_to_float(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
  }
}

static void store_float(void *p, esmtb_dtype dt, size_t i, float v) {
  switch (dt) {
    case ESMTB_F16: ((uint16_t *)p)[i] = float_to_half(v); break;
    case ESMTB_BF16: ((uint16_t *)p)[i] = float_to_bf16(v); break;
    default: ((float *)p)[i] = v; break;
  }
}

static size_t dtype_size(esmtb_dtype dt) { return dt == ESMTB_F32 ? 4 : 2; }

/* Elements [b, e) of a conversion: vector kernels where the variant has
 * them, the scalar helpers above otherwise. */
void cpu_convert_range(const esmtb_convert_args *a, size_t b, size_t e) {
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
  const esmtb_dtype sd = a->src_dtype, dd = a->dst_dtype;
  const size_t ss = dtype_size(sd), ds = dtype_size(dd);
  const void *src = (const char *)a->src + b * ss;
  void *dst = (char *)a->dst + b * ds;
  const long n = (long)(e - b);
  if (sd == dd) {
    memcpy(dst, src, (size_t)n * ss);
    return;
  }
  if (sd == ESMTB_F32 && dd == ESMTB_BF16) {
    k->f32_to_bf16(src, dst, n);
    return;
  }
  if (sd == ESMTB_BF16 && dd == ESMTB_F32) {
    k->bf16_to_f32(src, dst, n);
    return;
  }
  if (sd == ESMTB_F32 && dd == ESMTB_F16 && k->f32_to_f16(src, dst, n)) return;
  if (sd == ESMTB_F16 && dd == ESMTB_F32 && k->f16_to_f32(src, dst, n)) return;
  for (size_t i = b; i < e; i++) store_float(a->dst, dd, i, load_as_float(a->src, sd, i));
}

esmtb_status cpu_convert(esmtb_device *dev, const esmtb_convert_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || (a->n && (!a->src || !a->dst))) return cpu_fail(1, "cpu convert: NULL argument");
  if ((unsigned)a->src_dtype > ESMTB_BF16 || (unsigned)a->dst_dtype > ESMTB_BF16)
    return cpu_fail(8, "cpu convert: only f32, f16 and bf16 are supported");
  CHUNKED(dev, a->n, cpu_convert_range(a, b_, e_));
  return 0;
}
