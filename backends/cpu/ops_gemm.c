/* CPU kernels: GEMM through OpenBLAS with bias and GELU epilogues. */
#include <string.h>

#include "cpu_ops.h"
#include "isa_kernels.h"

esmtb_status cpu_gemm(esmtb_device *dev, const esmtb_gemm_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || !a->a || !a->b || !a->c) return cpu_fail(1, "cpu gemm: NULL argument");
  CPU_REQUIRE_F32(a->dtype, "gemm");
  if (a->m <= 0 || a->n <= 0 || a->k <= 0)
    return cpu_fail(1, "cpu gemm: sizes m=%d n=%d k=%d must be positive", a->m, a->n, a->k);
  if (a->lda < (a->trans_a ? a->m : a->k) || a->ldb < (a->trans_b ? a->k : a->n) || a->ldc < a->n)
    return cpu_fail(1,
                    "cpu gemm: leading dimensions lda=%d ldb=%d ldc=%d too small for "
                    "m=%d n=%d k=%d",
                    a->lda, a->ldb, a->ldc, a->m, a->n, a->k);
  if (a->bias && a->beta != 0.0f)
    return cpu_fail(1, "cpu gemm: a bias needs beta == 0");
  if (a->epilogue != ESMTB_EPI_NONE && a->epilogue != ESMTB_EPI_GELU)
    return cpu_fail(1, "cpu gemm: unknown epilogue %d", (int)a->epilogue);
  const int m = a->m, n = a->n;
  float *c = a->c;
  const float *bias = a->bias;
  float beta = a->beta;
  if (bias) { /* start C from the bias and accumulate onto it */
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
    for (int i = 0; i < m; i++) memcpy(c + (size_t)i * a->ldc, bias, (size_t)n * sizeof(float));
    beta = 1.0f;
  }
  cpu_blas_set_threads(dev->num_threads);
  cpu_sgemm(CblasRowMajor, a->trans_a ? CblasTrans : CblasNoTrans,
              a->trans_b ? CblasTrans : CblasNoTrans, m, n, a->k, a->alpha, a->a, a->lda, a->b,
              a->ldb, beta, c, a->ldc);
  if (a->epilogue == ESMTB_EPI_GELU) {
    float *pre = a->pre;
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
    for (int i = 0; i < m; i++) {
      float *row = c + (size_t)i * a->ldc;
      cpu_isa()->elementwise->gelu(row, pre ? pre + (size_t)i * a->ldc : NULL, n);
    }
  }
  return 0;
}
