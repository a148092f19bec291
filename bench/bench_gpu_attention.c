/* SPDX-License-Identifier: MIT */
/* GPU attention benchmark (cuda_attention.cu through ampere_bf16.so, bf16,
 * or turing_fp16.so, f16, below sm_80): TFLOP/s of forward, backward and
 * forward + backward, counting 4*B*H*T^2*hd flops forward and 2.5x that
 * backward (the FlashAttention convention; our deterministic backward does
 * 3.5x of MMA work). A second line per shape, "<label>-nondet", times the
 * non-deterministic backward (ABI 1.6, atomic dQ: FA2's 2.5x). Full-length rows (seq_len = T). Timed with the host
 * clock around N calls and one stream sync, best of 5 repetitions.
 * The optional seq_len value check (a device->host read and stream sync
 * per call, on with ESMT_CUDA_ATTN_CHECK=1) is off as in training;
 * fwd+bwd is also reported with it on.
 * Usage: bench_gpu_attention [BACKEND_DIR] [B T H hd [nondet]]
 * ("nondet": every call, warm-up included, takes the non-deterministic
 * backward, so that a profiler's first launches are its kernels)
 * Exit 77 without a usable GPU. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "esmtrain/backend.h"
#include "ops_table.h"

#ifndef ESMT_BENCH_BACKEND_DIR
#define ESMT_BENCH_BACKEND_DIR "."
#endif

static char g_err[1024];
static void set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_err, sizeof g_err, fmt, ap);
  va_end(ap);
}
static void log_line(int level, const char *fmt, ...) {
  (void)level;
  (void)fmt;
}
static const esmtb_host host = {sizeof host, ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR, set_error, log_line};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const esmtb_ops *load(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.so", dir, name);
  void *h = dlopen(path, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return NULL;
  }
  esmtb_init_fn init = (esmtb_init_fn)(uintptr_t)dlsym(h, ESMTB_INIT_SYMBOL);
  char why[256];
  const esmtb_ops *ops = esmt_ops_from_init(init, &host, why, sizeof why);
  if (!ops) fprintf(stderr, "%s: %s\n", path, why);
  return ops;
}

static const esmtb_ops *ops;
static esmtb_device *dev;

#define DIE(...)                          \
  do {                                    \
    fprintf(stderr, __VA_ARGS__);         \
    fprintf(stderr, " [%s]\n", g_err);    \
    exit(1);                              \
  } while (0)

static uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
/* |x| < 2: a half with the same leading bits is close enough for timing. */
static uint16_t f2h_rough(float f) {
  uint16_t s = f < 0 ? 0x8000 : 0;
  float a = fabsf(f);
  if (a < 6.1e-5f) return s;
  int e;
  float m = frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
  return (uint16_t)(s | ((uint16_t)(e - 1 + 15) << 10) | (uint16_t)((m * 2.0f - 1.0f) * 1024.0f));
}

/* seconds per call (best of 5 reps of n calls); which: 0 fwd, 1 bwd, 2 both */
static double time_calls(const esmtb_attention_args *a, int which, int n) {
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    if (ops->stream_sync(dev, NULL)) DIE("sync");
    const double t0 = now_s();
    for (int i = 0; i < n; i++) {
      if (which != 1 && ops->attention_forward(dev, a, NULL)) DIE("attention_forward");
      if (which != 0 && ops->attention_backward(dev, a, NULL)) DIE("attention_backward");
    }
    if (ops->stream_sync(dev, NULL)) DIE("sync");
    const double dt = (now_s() - t0) / n;
    if (dt < best) best = dt;
  }
  return best;
}

static void print_row(const char *label, int B, int T, int H, int hd, double fl, double tf,
                      double tb, double tfb) {
  printf("%-12s B=%-3d T=%-5d H=%-3d hd=%-4d fwd %8.3f ms %6.1f TF/s | bwd %8.3f ms %6.1f TF/s | "
         "fwd+bwd %8.3f ms %6.1f TF/s",
         label, B, T, H, hd, tf * 1e3, fl / tf * 1e-12, tb * 1e3, 2.5 * fl / tb * 1e-12,
         tfb * 1e3, 3.5 * fl / tfb * 1e-12);
}

static int g_nondet_only;

static void bench(const char *label, esmtb_dtype dt, int B, int T, int H, int hd) {
  const size_t D = (size_t)H * hd, N = (size_t)B * T, es = 2;
  const size_t nq = N * 3 * D, no = N * D, half = (size_t)hd / 2;
  void *qkv, *out, *lse, *dout, *dqkv, *cs, *sn, *len;
  if (ops->alloc(dev, ESMTB_MEM_DEVICE, nq * es, &qkv) ||
      ops->alloc(dev, ESMTB_MEM_DEVICE, no * es, &out) ||
      ops->alloc(dev, ESMTB_MEM_DEVICE, N * H * 4, &lse) ||
      ops->alloc(dev, ESMTB_MEM_DEVICE, no * es, &dout) ||
      ops->alloc(dev, ESMTB_MEM_DEVICE, nq * es, &dqkv) ||
      ops->alloc(dev, ESMTB_MEM_DEVICE, (size_t)T * half * 4, &cs) ||
      ops->alloc(dev, ESMTB_MEM_DEVICE, (size_t)T * half * 4, &sn) ||
      ops->alloc(dev, ESMTB_MEM_DEVICE, (size_t)B * 4, &len))
    DIE("alloc");
  uint16_t *h = malloc(nq * es);
  float *tab = malloc((size_t)T * half * 4);
  int32_t *lh = malloc((size_t)B * 4);
  if (!h || !tab || !lh) DIE("host memory");
  for (size_t i = 0; i < nq; i++) {
    const float v = (float)sin((double)i * 0.37) * 1.5f;
    h[i] = dt == ESMTB_BF16 ? f2bf(v) : f2h_rough(v);
  }
  if (ops->copy_async(dev, qkv, h, nq * es, ESMTB_COPY_H2D, NULL)) DIE("H2D");
  for (size_t i = 0; i < no; i++) {
    const float v = (float)cos((double)i * 0.11) * 0.1f;
    h[i] = dt == ESMTB_BF16 ? f2bf(v) : f2h_rough(v);
  }
  if (ops->copy_async(dev, dout, h, no * es, ESMTB_COPY_H2D, NULL)) DIE("H2D");
  for (int t = 0; t < T; t++)
    for (size_t i = 0; i < half; i++) tab[t * half + i] = (float)cos(t * pow(10000.0, -2.0 * i / hd));
  if (ops->copy_async(dev, cs, tab, (size_t)T * half * 4, ESMTB_COPY_H2D, NULL)) DIE("H2D");
  for (int t = 0; t < T; t++)
    for (size_t i = 0; i < half; i++) tab[t * half + i] = (float)sin(t * pow(10000.0, -2.0 * i / hd));
  if (ops->copy_async(dev, sn, tab, (size_t)T * half * 4, ESMTB_COPY_H2D, NULL)) DIE("H2D");
  for (int b = 0; b < B; b++) lh[b] = T;
  if (ops->copy_async(dev, len, lh, (size_t)B * 4, ESMTB_COPY_H2D, NULL)) DIE("H2D");
  if (ops->stream_sync(dev, NULL)) DIE("sync");

  esmtb_attention_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.dtype = dt;
  a.B = B; a.T = T; a.H = H; a.hd = hd;
  a.scale = 1.0f / sqrtf((float)hd);
  a.seq_len = len; a.rope_cos = cs; a.rope_sin = sn;
  a.qkv = qkv; a.out = out; a.lse = lse; a.dout = dout; a.dqkv = dqkv;
  a.nondeterministic = g_nondet_only;

  const double fl = 4.0 * B * H * (double)T * T * hd;
  setenv("ESMT_CUDA_ATTN_CHECK", "0", 1);
  (void)time_calls(&a, 2, 3); /* warm-up */
  int n = (int)(2e11 / (3.5 * fl)) + 1; /* ~ 20 ms of work at 100 TFLOP/s */
  if (n > 200) n = 200;
  const double tf = time_calls(&a, 0, n), tb = time_calls(&a, 1, n), tfb = time_calls(&a, 2, n);
  setenv("ESMT_CUDA_ATTN_CHECK", "1", 1);
  const double tfbc = time_calls(&a, 2, n);
  setenv("ESMT_CUDA_ATTN_CHECK", "0", 1);
  print_row(label, B, T, H, hd, fl, tf, tb, tfb);
  printf(" | checked %6.1f TF/s\n", 3.5 * fl / tfbc * 1e-12);
  if (!g_nondet_only) { /* the non-deterministic backward */
    char nd[64];
    snprintf(nd, sizeof nd, "%s-nondet", label);
    a.nondeterministic = 1;
    const double nb = time_calls(&a, 1, n), nfb = time_calls(&a, 2, n);
    print_row(nd, B, T, H, hd, fl, tf, nb, nfb);
    printf(" | bwd %.2fx the deterministic one\n", tb / nb);
  }
  fflush(stdout);
  void *bufs[] = {qkv, out, lse, dout, dqkv, cs, sn, len};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ops->free(dev, ESMTB_MEM_DEVICE, bufs[i]);
  free(h);
  free(tab);
  free(lh);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ESMT_BENCH_BACKEND_DIR;
  const esmtb_ops *amp = load(dir, "ampere_bf16");
  if (!amp) {
    printf("SKIP: cannot load %s/ampere_bf16.so\n", dir);
    return 77;
  }
  esmtb_job job;
  memset(&job, 0, sizeof job);
  job.struct_size = sizeof job;
  esmtb_probe pr;
  memset(&pr, 0, sizeof pr);
  pr.struct_size = sizeof pr;
  amp->probe(&job, &pr);
  if (pr.device_count < 1) {
    printf("SKIP: no CUDA device (%s)\n", pr.reason);
    return 77;
  }
  const int cc = pr.devices[0].cc_major * 10 + pr.devices[0].cc_minor;
  if (cc < 75) {
    printf("SKIP: sm_%d is below sm_75\n", cc);
    return 77;
  }
  ops = cc >= 80 ? amp : load(dir, "turing_fp16");
  if (!ops || !ops->attention_forward) {
    printf("SKIP: no GPU attention in this build\n");
    return 77;
  }
  esmtb_open_options oo = {sizeof oo, 0, 0, 0};
  if (ops->open(&oo, &dev)) {
    printf("SKIP: cannot open GPU 0: %s\n", g_err);
    return 77;
  }
  const esmtb_dtype dt = cc >= 80 ? ESMTB_BF16 : ESMTB_F16;
  printf("%s, %s, %s; flops: fwd 4*B*H*T^2*hd, bwd 2.5x\n", pr.devices[0].name, ops->name,
         dt == ESMTB_BF16 ? "bf16" : "f16");
  if (argc > 5) {
    g_nondet_only = argc > 6 && !strcmp(argv[6], "nondet");
    bench(g_nondet_only ? "custom-nondet" : "custom", dt, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
  } else {
    bench("reference", dt, 16, 512, 16, 64);
    const int Ts[] = {512, 1024};
    for (int i = 0; i < 2; i++) {
      const int T = Ts[i], Bt = T == 512 ? 16 : 8;
      bench("esm2-8M", dt, Bt, T, 20, 16);
      bench("esm2-650M", dt, Bt, T, 20, 64);
      bench("esm2-3B", dt, Bt, T, 40, 64);
    }
  }
  ops->close(dev);
  return 0;
}
