/* SPDX-License-Identifier: MIT */
/* Times the MPI plugin's allreduce_sum: a 30 MB f32 buffer, 20 times (after
 * 2 warm-up calls), and prints the algorithm bandwidth (bytes / time) and the
 * bus bandwidth (2 (W - 1) / W x that: what each rank's link carries in a
 * reduce-scatter + all-gather). Run under mpirun with $ESMT_MPI_COMM_PLUGIN
 * set to the plugin; optional arguments: bytes, iterations. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "esmtrain/comm_plugin.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  const char *path = getenv("ESMT_MPI_COMM_PLUGIN");
  size_t bytes = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 30000000u;
  int iters = argc > 2 ? atoi(argv[2]) : 20;
  if (!path || !*path || iters < 1 || bytes < 4) {
    fprintf(stderr, "usage: ESMT_MPI_COMM_PLUGIN=<mpi_comm.so> mpirun -np N %s [bytes] [iters]\n",
            argv[0]);
    return 2;
  }
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const esmt_comm_plugin *(*get)(void) =
      dl ? (const esmt_comm_plugin *(*)(void))dlsym(dl, ESMT_COMM_PLUGIN_SYMBOL) : NULL;
  const esmt_comm_plugin *P = get ? get() : NULL;
  if (!P) {
    fprintf(stderr, "cannot load %s: %s\n", path, dl ? "no plugin table" : dlerror());
    return 1;
  }
  char err[1024] = "";
  void *c = P->create(60.0, err, sizeof err);
  if (!c) {
    fprintf(stderr, "create: %s\n", err);
    return 1;
  }
  int rank = P->rank(c), world = P->world_size(c);
  size_t count = bytes / 4;
  float *buf = malloc(count * sizeof *buf);
  double *times = malloc((size_t)world * sizeof *times);
  if (!buf || !times) return 1;
  for (size_t i = 0; i < count; i++) buf[i] = (float)(i % 1000) * 1e-3f;
  int st = 0;
  for (int i = 0; st == 0 && i < 2; i++) st = P->allreduce_sum(c, buf, count, 1);
  if (st == 0) st = P->barrier(c);
  double t0 = now_s();
  for (int i = 0; st == 0 && i < iters; i++) st = P->allreduce_sum(c, buf, count, 1);
  double dt = now_s() - t0;
  if (st == 0) st = P->allgather(c, &dt, sizeof dt, times);
  if (st != 0) {
    fprintf(stderr, "rank %d: %s\n", rank, P->last_error(c));
    P->destroy(c);
    return 1;
  }
  double slowest = 0;
  for (int k = 0; k < world; k++) slowest = times[k] > slowest ? times[k] : slowest;
  if (rank == 0) {
    double per = slowest / iters, alg = (double)(count * 4) / per / 1e6;
    printf("allreduce_sum f32 %zu bytes x %d on %d ranks (%s): %.2f ms per call, "
           "algbw %.0f MB/s, busbw %.0f MB/s\n",
           count * 4, iters, world, P->describe(), per * 1e3, alg,
           alg * 2.0 * (world - 1) / world);
  }
  free(buf);
  free(times);
  P->destroy(c);
  return 0;
}
