/* SPDX-License-Identifier: MIT */
/* A GPU backend driven from a thread that never called cudaSetDevice: the
 * device is opened with index 1 on the main thread, then a second thread
 * creates a stream, allocates, uploads, runs a GEMM (cuBLASLt) and an add
 * (a kernel), downloads and synchronises. Every entry point must make the
 * backend's device current itself; the results must be right and the
 * memory must be on device 1 (device 0 untouched). Then scratch past a
 * device_memory_limit must be refused. Needs two GPUs (the
 * emulated build runs it with ESMT_EMU_DEVICES=2); exits 77 otherwise. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/backend.h"
#include "ops_table.h"

static char g_err[512];
static void host_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_err, sizeof g_err, fmt, ap);
  va_end(ap);
}
static void host_log(int level, const char *fmt, ...) {
  (void)level;
  (void)fmt;
}
static const esmtb_host g_host = {sizeof(esmtb_host), ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR,
                                  host_set_error, host_log};

static const esmtb_ops *ops;
static esmtb_device *dev1;
enum { N = 64 };
static float a[N * N], b[N * N], c[N * N];
static int g_ok;

#define TRY(call, what)                                                  \
  do {                                                                   \
    if ((call) != 0) {                                                   \
      fprintf(stderr, "FAIL: %s: %s\n", what, g_err);                    \
      return NULL;                                                       \
    }                                                                    \
  } while (0)

static void *worker(void *arg) {
  (void)arg;
  esmtb_stream *st = NULL;
  void *da = NULL, *db = NULL, *dc = NULL;
  const size_t bytes = sizeof a;
  TRY(ops->stream_create(dev1, &st), "stream_create");
  TRY(ops->alloc(dev1, ESMTB_MEM_DEVICE, bytes, &da), "alloc a");
  TRY(ops->alloc(dev1, ESMTB_MEM_DEVICE, bytes, &db), "alloc b");
  TRY(ops->alloc(dev1, ESMTB_MEM_DEVICE, bytes, &dc), "alloc c");
  TRY(ops->copy_async(dev1, da, a, bytes, ESMTB_COPY_H2D, st), "copy a");
  TRY(ops->copy_async(dev1, db, b, bytes, ESMTB_COPY_H2D, st), "copy b");
  esmtb_gemm_args g;
  memset(&g, 0, sizeof g);
  g.struct_size = sizeof g;
  g.dtype = ESMTB_F32;
  g.m = g.n = g.k = N;
  g.a = da; g.lda = N;
  g.b = db; g.ldb = N;
  g.c = dc; g.ldc = N;
  g.alpha = 1.0f;
  g.epilogue = ESMTB_EPI_NONE;
  TRY(ops->gemm(dev1, &g, st), "gemm");
  esmtb_add_args ad;
  memset(&ad, 0, sizeof ad);
  ad.struct_size = sizeof ad;
  ad.dtype = ESMTB_F32;
  ad.n = N * N;
  ad.a = dc;
  ad.b = da;
  ad.y = dc;
  TRY(ops->add(dev1, &ad, st), "add");
  TRY(ops->copy_async(dev1, c, dc, bytes, ESMTB_COPY_D2H, st), "copy c");
  TRY(ops->stream_sync(dev1, st), "stream_sync");
  double worst = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      double r = a[i * N + j];
      for (int k = 0; k < N; k++) r += (double)a[i * N + k] * b[k * N + j];
      const double e = fabs(c[i * N + j] - r) / (fabs(r) + 1.0);
      if (e > worst) worst = e;
    }
  printf("gemm + add on device 1 from a second thread: worst relative error %.2e\n", worst);
  g_ok = worst < 1e-2;  /* TF32 inputs */
  ops->free(dev1, ESMTB_MEM_DEVICE, da);
  ops->free(dev1, ESMTB_MEM_DEVICE, db);
  ops->free(dev1, ESMTB_MEM_DEVICE, dc);
  ops->stream_destroy(dev1, st);
  return NULL;
}

int main(void) {
  const char *dir = getenv("ESMT_TEST_BACKEND_DIR");
  if (!dir) return 77;
  char path[1024];
  snprintf(path, sizeof path, "%s/ampere_bf16.so", dir);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  esmtb_init_fn init = h ? (esmtb_init_fn)(uintptr_t)dlsym(h, ESMTB_INIT_SYMBOL) : NULL;
  char why[256];
  ops = esmt_ops_from_init(init, &g_host, why, sizeof why);
  if (!ops) {
    printf("SKIP: cannot load %s\n", path);
    return 77;
  }
  esmtb_job job;
  memset(&job, 0, sizeof job);
  job.struct_size = sizeof job;
  esmtb_probe pr;
  memset(&pr, 0, sizeof pr);
  pr.struct_size = sizeof pr;
  ops->probe(&job, &pr);
  if (!pr.available || pr.device_count < 2) {
    printf("SKIP: needs two usable GPUs (%d found%s%s)\n", pr.device_count,
           pr.reason[0] ? ": " : "", pr.reason);
    return 77;
  }
  for (int i = 0; i < N * N; i++) {
    a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  }
  esmtb_open_options o1, o0;
  memset(&o1, 0, sizeof o1);
  memset(&o0, 0, sizeof o0);
  o1.struct_size = o0.struct_size = sizeof o1;
  o1.device_index = 1;
  esmtb_device *dev0 = NULL;
  if (ops->open(&o1, &dev1) || ops->open(&o0, &dev0)) {  /* device 0 is current now */
    fprintf(stderr, "FAIL: open: %s\n", g_err);
    return 1;
  }
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  pthread_join(t, NULL);
  uint64_t free0 = 0, total0 = 0;
  ops->mem_info(dev0, &free0, &total0);
  printf("device 0: %llu of %llu bytes free after the run\n", (unsigned long long)free0,
         (unsigned long long)total0);
  const int untouched = free0 == total0;
  ops->close(dev0);
  ops->close(dev1);

  /* Stream-ordered scratch counts against device_memory_limit: a budget
   * that holds the input buffer exactly leaves no room for sumsq's
   * partial sums, which must fail with the out-of-memory status (2) and a
   * message, not allocate past the budget. */
  esmtb_open_options ob = o0;
  ob.device_memory_limit = sizeof a;
  esmtb_device *devb = NULL;
  void *x = NULL, *out = NULL;
  int budget_ok = 0;
  if (!ops->open(&ob, &devb) && !ops->alloc(devb, ESMTB_MEM_DEVICE, sizeof a - 64, &x)) {
    out = x;
    esmtb_sumsq_args sa;
    memset(&sa, 0, sizeof sa);
    sa.struct_size = sizeof sa;
    sa.n = 1024;
    sa.x = x;
    sa.out = out;
    g_err[0] = 0;
    const esmtb_status st = ops->sumsq(devb, &sa, NULL);
    budget_ok = st == 2 && strstr(g_err, "would exceed device_memory_limit") != NULL;
    printf("scratch past the budget: status %d, \"%s\"\n", (int)st, g_err);
    ops->free(devb, ESMTB_MEM_DEVICE, x);
  }
  if (devb) ops->close(devb);
  const int ok = g_ok && untouched && budget_ok;
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
