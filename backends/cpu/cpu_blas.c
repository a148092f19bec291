/* OpenBLAS, loaded at run time. Debian's DYNAMIC_ARCH OpenBLAS picks its
 * kernels from the CPU model when it loads, and on CPUs it does not know
 * (common under virtualisation) it falls back to SSE3 "Prescott" kernels:
 * measured here, 40-60 GFLOP/s instead of ~300. So before loading it we
 * name the right kernel family from CPUID features, unless the user
 * already set OPENBLAS_CORETYPE. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"

cpu_sgemm_fn cpu_sgemm;
static void (*p_set_threads)(int);
static char *(*p_corename)(void);
static char g_core[96];

#ifndef ESMT_OPENBLAS_OPENMP
#define ESMT_OPENBLAS_OPENMP "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0"
#endif

static const char *core_for_this_cpu(void) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16")) return "Cooperlake";
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return NULL;
}

esmtb_status cpu_blas_load(void) {
  if (cpu_sgemm) return 0;
  const char *user = getenv("OPENBLAS_CORETYPE");
  const char *core = core_for_this_cpu();
  if (!(user && *user) && core) setenv("OPENBLAS_CORETYPE", core, 0);
  /* Prefer the OpenMP build: it shares our OpenMP thread pool, where the
   * pthread build's own pool would contend with it for the same cores. */
  void *h = dlopen(ESMT_OPENBLAS_OPENMP, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) return cpu_fail(ESMTB_ERR_BACKEND, "cpu backend: cannot load OpenBLAS (libopenblas.so.0): %s", dlerror());
  cpu_sgemm = (cpu_sgemm_fn)(uintptr_t)dlsym(h, "cblas_sgemm");
  p_set_threads = (void (*)(int))(uintptr_t)dlsym(h, "openblas_set_num_threads");
  p_corename = (char *(*)(void))(uintptr_t)dlsym(h, "openblas_get_corename");
  if (!cpu_sgemm) return cpu_fail(ESMTB_ERR_BACKEND, "cpu backend: libopenblas.so.0 has no cblas_sgemm");
  int (*parallel)(void) = (int (*)(void))(uintptr_t)dlsym(h, "openblas_get_parallel");
  snprintf(g_core, sizeof g_core, "%s (%s threads)", p_corename ? p_corename() : "unknown",
           parallel && parallel() == 2 ? "OpenMP" : "own");
  return 0;
}

/* OpenBLAS's thread count is global; devices opened with different counts
 * each set theirs before a GEMM. Setting it only on a change keeps that
 * free in the common case of one device. */
void cpu_blas_set_threads(int n) {
  static int current;
  if (p_set_threads && n != current) {
    p_set_threads(n);
    current = n;
  }
}

const char *cpu_blas_core(void) { return g_core[0] ? g_core : "not loaded"; }
