/* SPDX-License-Identifier: MIT */
/* CPU kernel: inverted dropout with the Philox mask (esmtb_dropout_args,
 * esmtrain/philox.h), drawn in place over fp32 blocks, threads splitting
 * the elements. */
#include <omp.h>

#include "cpu_half.h"
#include "cpu_math.h"
#include "cpu_ops.h"
#include "isa_kernels.h"

static void dropout_range(const esmtb_dropout_args *a, size_t b, size_t e) {
  const cpu_isa_elementwise *k = cpu_isa()->elementwise;
  const esmtb_dtype dt = a->dtype;
  float tx[CPU_BLOCK], ty[CPU_BLOCK];
  for (size_t i = b; i < e; i += CPU_BLOCK) {
    const long n = (long)(e - i < CPU_BLOCK ? e - i : CPU_BLOCK);
    const float *x = cpu_in(a->x, dt, i, n, tx);
    float *y = cpu_out(a->y, dt, i, ty);
    if (a->accumulate && dt != ESMTB_F32) cpu_half_load(a->y, dt, i, ty, n);
    k->dropout(x, y, n, (uint64_t)i, a);
    cpu_out_done(a->y, dt, i, ty, n);
  }
}

esmtb_status cpu_dropout(esmtb_device *dev, const esmtb_dropout_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || (a->n && (!a->x || !a->y)))
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu dropout: NULL argument");
  CPU_REQUIRE_ACT(a->dtype, "dropout");
#pragma omp parallel num_threads(dev->num_threads)
  {
    size_t b, e; /* whole groups of four a thread (philox.h's words) */
    cpu_chunk((a->n + 3) / 4, omp_get_num_threads(), omp_get_thread_num(), &b, &e);
    dropout_range(a, 4 * b, 4 * e < a->n ? 4 * e : a->n);
  }
  return 0;
}
