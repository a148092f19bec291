/* SPDX-License-Identifier: MIT */
/* OpenBLAS, loaded at run time. Debian's DYNAMIC_ARCH OpenBLAS picks its
 * kernels from the CPU model when it loads, and on CPUs it does not know
 * (common under virtualisation) it falls back to SSE3 "Prescott" kernels:
 * measured here, 40-60 GFLOP/s instead of ~300. So before loading it we
 * name the right kernel family from CPUID features, unless the user
 * already set OPENBLAS_CORETYPE. OpenBLAS reads that variable only while
 * it loads and has no call to set it, so it is set for that one dlopen and
 * removed right after: the host's environment is as it was once the
 * backend has loaded (once per process; a host thread reading the
 * environment during those microseconds could see it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cpu_ops.h"

cpu_sgemm_fn cpu_sgemm;
static void (*p_set_threads)(int);
static char *(*p_corename)(void);
static char g_core[96];
static char g_load_error[320] = "OpenBLAS could not be loaded";

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

/* OpenBLAS 0.3.21 (Debian 12) reserves a GEMM buffer per thread when it
 * loads (blas_thread_init: one malloc of 128 MiB, 134225920 bytes, for
 * each of its threads), and when one fails it retries for ever instead of
 * reporting it: under an address-space limit (ulimit -v) that leaves too
 * little room the process hangs inside dlopen. Measured with `probe` on 2
 * cores: hangs with 287 MiB of room, runs with 306 MiB; so the room needed
 * is 128 MiB per thread plus 48 MiB for the library, its OpenMP runtime and
 * thread stacks. Below that we refuse, with the figures. These figures are
 * this OpenBLAS build's (BUFFER_SIZE differs between builds). */
#define OPENBLAS_BUFFER_BYTES (128ull << 20)
#define OPENBLAS_BASE_BYTES (48ull << 20)

/* The threads OpenBLAS starts with (its environment variables, else one
 * per core), and at least the cores: a device opened later asks for them. */
static uint64_t openblas_threads(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t n = cores > 0 ? (uint64_t)cores : 1;
  static const char *const vars[] = {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"};
  for (int i = 0; i < 3; i++) {
    const char *v = getenv(vars[i]);
    long t = v ? atol(v) : 0;
    if (t > 0) {
      if ((uint64_t)t > n) n = (uint64_t)t;
      break;
    }
  }
  return n;
}

static uint64_t status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  const size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, n) && line[n] == ':' && sscanf(line + n + 1, "%llu", &kb) == 1) break;
  fclose(f);
  return kb;
}

static esmtb_status check_room_for_openblas(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
  const uint64_t used = status_kb("VmSize") << 10, threads = openblas_threads();
  const uint64_t need = OPENBLAS_BASE_BYTES + threads * OPENBLAS_BUFFER_BYTES;
  const uint64_t room = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
  if (room >= need) return 0;
  snprintf(g_load_error, sizeof g_load_error, "OpenBLAS needs about %llu MiB of address space "
           "when it loads (a 128 MiB GEMM buffer for each of its %llu threads), and the "
           "address-space limit (ulimit -v %llu KiB) leaves %llu MiB: raise the limit (ulimit -v "
           "%llu or more)", (unsigned long long)(need >> 20), (unsigned long long)threads,
           (unsigned long long)(rl.rlim_cur >> 10), (unsigned long long)(room >> 20),
           (unsigned long long)((used + need) >> 10) + 1);
  return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu backend: %s", g_load_error);
}

const char *cpu_blas_load_error(void) { return g_load_error; }

esmtb_status cpu_blas_load(void) {
  if (cpu_sgemm) return 0;
  esmtb_status room = check_room_for_openblas();
  if (room) return room;
  const char *core = core_for_this_cpu();
  const int set_here = core && !getenv("OPENBLAS_CORETYPE") &&
                       setenv("OPENBLAS_CORETYPE", core, 0) == 0;
  /* Prefer the OpenMP build: it shares our OpenMP thread pool, where the
   * pthread build's own pool would contend with it for the same cores. */
  void *h = dlopen(ESMT_OPENBLAS_OPENMP, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (set_here) unsetenv("OPENBLAS_CORETYPE"); /* read while loading; the host's again */
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
