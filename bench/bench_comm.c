/* SPDX-License-Identifier: MIT */
/* All-reduce bandwidth of the host communicator (issue #23): a 30 MB fp32
 * bucket, as the CPU data-parallel path sends it, summed over every rank
 * N times. Started by any launcher; the transport is what training would
 * pick (ESMTRAIN_COMM=tcp|mpi to force one), so
 *   mpirun -np 2 -x ESMTRAIN_COMM=mpi bench_comm
 *   mpirun -np 2 -x ESMTRAIN_COMM=tcp -x ESMTRAIN_RENDEZVOUS_FILE=/tmp/r bench_comm
 * compare the two under the same launcher (bench/bench_comm.sh does).
 * Rank 0 prints one line: the transport, the median time, algorithm
 * bandwidth (bytes / time) and bus bandwidth (2 (W-1)/W bytes / time, what
 * each rank's links carry in a ring or a reduce-scatter + all-gather). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  double mb = 30;
  int iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--mb") == 0) mb = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--iters") == 0) iters = atoi(argv[i + 1]);
  }
  if (!(mb > 0) || iters < 1) {
    fprintf(stderr, "usage: bench_comm [--mb 30] [--iters 20]\n");
    return 2;
  }
  esmt_dist_env env;
  esmt_comm *c = NULL;
  if (esmt_dist_env_detect(&env) || esmt_comm_create_from_env(&c, &env, ESMT_COMM_AUTO)) {
    fprintf(stderr, "bench_comm: %s\n", esmt_last_error());
    return 1;
  }
  const size_t n = (size_t)(mb * 1e6 / sizeof(float));
  float *buf = malloc(n * sizeof *buf);
  double *t = malloc((size_t)iters * sizeof *t);
  if (!buf || !t) return 1;
  const int rank = esmt_comm_rank(c), world = esmt_comm_world_size(c);
  esmt_status st = ESMT_OK;
  for (int it = -2; it < iters && !st; it++) { /* two warm-up rounds */
    for (size_t i = 0; i < n; i++) buf[i] = (float)((i % 1024) * 1e-3 + rank);
    st = esmt_comm_barrier(c);
    double t0 = esmt_now_s();
    if (!st) st = esmt_comm_allreduce_sum(c, buf, n, ESMT_COMM_F32);
    if (it >= 0) t[it] = esmt_now_s() - t0;
  }
  if (st) {
    fprintf(stderr, "bench_comm rank %d: %s\n", rank, esmt_last_error());
    esmt_comm_destroy(c);
    return 1;
  }
  qsort(t, (size_t)iters, sizeof *t, cmp_double);
  const double med = t[iters / 2], bytes = (double)n * sizeof(float);
  if (rank == 0) {
    char how[640];
    esmt_comm_describe(c, how, sizeof how);
    printf("%-40.40s %d ranks, %.1f MB f32 all-reduce x %d: median %.2f ms (best %.2f), "
           "algbw %.0f MB/s, busbw %.0f MB/s\n",
           how, world, bytes / 1e6, iters, med * 1e3, t[0] * 1e3, bytes / med / 1e6,
           2.0 * (world - 1) / world * bytes / med / 1e6);
  }
  free(buf);
  free(t);
  esmt_comm_destroy(c);
  return 0;
}
