/* SPDX-License-Identifier: MIT */
/* CPU kernel: fused softmax cross-entropy forward and dlogits. Logits and
 * dlogits are in the args' dtype (half rows through fp32 scratch,
 * cpu_half.h); the loss is summed in double and added to fp32 loss_sum. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu_half.h"
#include "cpu_math.h"

esmtb_status cpu_xent(esmtb_device *dev, const esmtb_xent_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || !a->logits || !a->labels || !a->loss_sum || a->N < 0 || a->V <= 0)
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu xent: bad arguments");
  CPU_REQUIRE_ACT(a->dtype, "xent");
  const int N = a->N, V = a->V, nt = dev->num_threads;
  const esmtb_dtype dt = a->dtype;
  const size_t per = 2 * (size_t)V; /* a row of logits and one of dlogits */
  double *partial = calloc((size_t)nt, sizeof *partial);
  float *scratch = dt == ESMTB_F32 ? NULL : cpu_scratch_alloc(nt, per);
  if (!partial || (dt != ESMTB_F32 && !scratch)) {
    free(partial);
    free(scratch);
    return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu xent: out of memory");
  }
  int bad_label = -1;
#pragma omp parallel num_threads(nt)
  {
    /* Chunk by the threads OpenMP actually gave us (never more than nt). */
    int t = omp_get_thread_num();
    size_t r0, r1;
    cpu_chunk((size_t)N, omp_get_num_threads(), t, &r0, &r1);
    float *tz = scratch ? cpu_scratch_slice(scratch, per, t) : NULL, *tg = tz ? tz + V : NULL;
    double acc = 0.0;
    for (size_t r = r0; r < r1; r++) {
      int32_t y = a->labels[r];
      if (y < 0) {
        if (a->dlogits) cpu_zero(a->dlogits, dt, r * V, (size_t)V);
        continue;
      }
      if (y >= V) {
        bad_label = (int)r;
        continue;
      }
      /* read the row before dlogits (which may alias it) is written */
      const float *z = cpu_in(a->logits, dt, r * V, V, tz);
      float *g = a->dlogits ? cpu_out(a->dlogits, dt, r * V, tg) : NULL;
      float mx = z[0];
      for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
      double sum = 0.0;
      for (int v = 0; v < V; v++) sum += exp((double)z[v] - mx);
      double lse = mx + log(sum);
      acc += lse - z[y];
      if (g) {
        for (int v = 0; v < V; v++) {
          float p = (float)exp((double)z[v] - lse);
          g[v] = (p - (v == y ? 1.0f : 0.0f)) * a->grad_scale;
        }
        cpu_out_done(a->dlogits, dt, r * V, tg, V);
      }
    }
    partial[t] = acc;
  }
  double total = 0.0;
  for (int t = 0; t < nt; t++) total += partial[t];
  free(partial);
  free(scratch);
  if (bad_label >= 0)
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu xent: row %d has label %d outside [0, %d)", bad_label,
                    a->labels[bad_label], V);
  *a->loss_sum += (float)total;
  return 0;
}
