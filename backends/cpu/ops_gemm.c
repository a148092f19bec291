/* SPDX-License-Identifier: MIT */
/* CPU kernels: GEMM through OpenBLAS sgemm with bias and GELU epilogues.
 * F16/BF16 operands are widened into compact fp32 copies first (whole
 * matrices: simple, and the O(mnk) sgemm dwarfs the O(mk + kn + mn)
 * conversions); a half C is computed in an fp32 copy and rounded at the
 * end. With c_f32 (ABI 1.1) C is fp32 whatever dtype a and b have. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_half.h"
#include "isa_kernels.h"

/* c_f32 is read only from callers whose struct has it (ABI 1.0 ones do not). */
static int c_is_f32(const esmtb_gemm_args *a) {
  return a->struct_size >= offsetof(esmtb_gemm_args, c_f32) + sizeof a->c_f32 && a->c_f32;
}

static esmtb_status check(const esmtb_gemm_args *a) {
  if (!a || !a->a || !a->b || !a->c) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu gemm: NULL argument");
  CPU_REQUIRE_ACT(a->dtype, "gemm");
  if (a->m <= 0 || a->n <= 0 || a->k <= 0)
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu gemm: sizes m=%d n=%d k=%d must be positive", a->m, a->n, a->k);
  if (a->lda < (a->trans_a ? a->m : a->k) || a->ldb < (a->trans_b ? a->k : a->n) || a->ldc < a->n)
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT,
                    "cpu gemm: leading dimensions lda=%d ldb=%d ldc=%d too small for "
                    "m=%d n=%d k=%d",
                    a->lda, a->ldb, a->ldc, a->m, a->n, a->k);
  if (a->bias && a->beta != 0.0f)
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu gemm: a bias needs beta == 0");
  if (a->epilogue != ESMTB_EPI_NONE && a->epilogue != ESMTB_EPI_GELU)
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu gemm: unknown epilogue %d", (int)a->epilogue);
  if (c_is_f32(a) && (a->bias || a->epilogue != ESMTB_EPI_NONE))
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu gemm: c_f32 (fp32 C) allows no bias and no epilogue");
  return 0;
}

/* rows x cols of p (leading dim ld) as a compact fp32 copy; NULL when out of memory. */
static float *widen(esmtb_device *dev, const void *p, esmtb_dtype dt, int rows, int cols, int ld) {
  float *w = malloc((size_t)rows * (size_t)cols * sizeof *w);
  if (!w) return NULL;
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
  for (int r = 0; r < rows; r++) cpu_half_load(p, dt, (size_t)r * ld, w + (size_t)r * cols, cols);
  return w;
}

/* C (fp32, leading dim ldc) = alpha op(A) op(B) + beta C, or from the bias
 * (fp32) with beta = 1; then GELU, the pre-activation rounded into a->pre
 * (a->dtype, leading dim a->ldc) when asked. */
static void sgemm_epilogue(esmtb_device *dev, const esmtb_gemm_args *a, const float *A, int lda,
                           const float *B, int ldb, float *C, int ldc, const float *bias) {
  const int m = a->m, n = a->n;
  float beta = a->beta;
  if (bias) { /* start C from the bias and accumulate onto it */
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
    for (int i = 0; i < m; i++) memcpy(C + (size_t)i * ldc, bias, (size_t)n * sizeof(float));
    beta = 1.0f;
  }
  cpu_blas_set_threads(dev->num_threads);
  cpu_sgemm(CblasRowMajor, a->trans_a ? CblasTrans : CblasNoTrans,
            a->trans_b ? CblasTrans : CblasNoTrans, m, n, a->k, a->alpha, A, lda, B, ldb, beta, C,
            ldc);
  if (a->epilogue == ESMTB_EPI_GELU) {
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
    for (int i = 0; i < m; i++) {
      float *row = C + (size_t)i * ldc;
      if (a->pre) cpu_half_store(row, a->pre, a->dtype, (size_t)i * a->ldc, n);
      cpu_isa()->elementwise->gelu(row, NULL, n);
    }
  }
}

esmtb_status cpu_gemm(esmtb_device *dev, const esmtb_gemm_args *a, esmtb_stream *s) {
  (void)s;
  esmtb_status st = check(a);
  if (st) return st;
  const esmtb_dtype dt = a->dtype;
  const int c32 = dt == ESMTB_F32 || c_is_f32(a);
  if (dt == ESMTB_F32) {
    sgemm_epilogue(dev, a, a->a, a->lda, a->b, a->ldb, a->c, a->ldc, a->bias);
    return 0;
  }
  const int m = a->m, n = a->n, k = a->k;
  const int ar = a->trans_a ? k : m, ac = a->trans_a ? m : k;
  const int br = a->trans_b ? n : k, bc = a->trans_b ? k : n;
  float *A = widen(dev, a->a, dt, ar, ac, a->lda), *B = widen(dev, a->b, dt, br, bc, a->ldb);
  float *bias = a->bias ? widen(dev, a->bias, dt, 1, n, n) : NULL;
  float *C = NULL;
  if (!c32) /* half C: an fp32 copy (holding the old C when beta accumulates onto it) */
    C = a->beta != 0.0f && !a->bias ? widen(dev, a->c, dt, m, n, a->ldc)
                                    : malloc((size_t)m * (size_t)n * sizeof *C);
  if (!A || !B || (a->bias && !bias) || (!c32 && !C)) {
    st = cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu gemm: out of memory for fp32 copies of %s operands",
                  dt == ESMTB_F16 ? "f16" : "bf16");
  } else if (c32) {
    sgemm_epilogue(dev, a, A, ac, B, bc, a->c, a->ldc, NULL);
  } else {
    sgemm_epilogue(dev, a, A, ac, B, bc, C, n, bias);
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
    for (int i = 0; i < m; i++) cpu_half_store(C + (size_t)i * n, a->c, dt, (size_t)i * a->ldc, n);
  }
  free(A);
  free(B);
  free(bias);
  free(C);
  return st;
}
