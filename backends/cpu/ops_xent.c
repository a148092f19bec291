/* CPU kernel: fused softmax cross-entropy forward and dlogits. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu_math.h"
#include "cpu_ops.h"

esmtb_status cpu_xent(esmtb_device *dev, const esmtb_xent_args *a, esmtb_stream *s) {
  (void)s;
  if (!a || !a->logits || !a->labels || !a->loss_sum || a->N < 0 || a->V <= 0)
    return cpu_fail(1, "cpu xent: bad arguments");
  CPU_REQUIRE_F32(a->dtype, "xent");
  const int N = a->N, V = a->V, nt = dev->num_threads;
  double *partial = calloc((size_t)nt, sizeof *partial);
  if (!partial) return cpu_fail(2, "cpu xent: out of memory");
  const float *logits = a->logits;
  float *dl = a->dlogits;
  int bad_label = -1;
#pragma omp parallel num_threads(nt)
  {
    /* Chunk by the threads OpenMP actually gave us (never more than nt). */
    int t = omp_get_thread_num();
    size_t r0, r1;
    cpu_chunk((size_t)N, omp_get_num_threads(), t, &r0, &r1);
    double acc = 0.0;
    for (size_t r = r0; r < r1; r++) {
      const float *z = logits + r * V;
      float *g = dl ? dl + r * V : NULL;
      int32_t y = a->labels[r];
      if (y < 0) {
        if (g)
          for (int v = 0; v < V; v++) g[v] = 0.0f;
        continue;
      }
      if (y >= V) {
        bad_label = (int)r;
        continue;
      }
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
      }
    }
    partial[t] = acc;
  }
  double total = 0.0;
  for (int t = 0; t < nt; t++) total += partial[t];
  free(partial);
  if (bad_label >= 0)
    return cpu_fail(1, "cpu xent: row %d has label %d outside [0, %d)", bad_label,
                    a->labels[bad_label], V);
  *a->loss_sum += (float)total;
  return 0;
}
