/* SPDX-License-Identifier: MIT */
/* Attention kernel micro-benchmark for a backend: forward and backward
 * GFLOP/s at ESM-2 shapes, best of N runs (the model counts 4*B*H*T^2*hd
 * for forward and twice that for backward).
 * Usage: bench_attention BACKEND_DIR [backend] [B T H hd] [threads] */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "esmtrain/backend.h"
#include "ops_table.h"

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}
static void log_line(int level, const char *fmt, ...) { (void)level; (void)fmt; }
static const esmtb_host host = {sizeof host, ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR, set_error, log_line};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s BACKEND_DIR [name] [B T H hd] [threads]\n", argv[0]); return 2; }
  const char *name = argc > 2 ? argv[2] : "cpu";
  int B = argc > 6 ? atoi(argv[3]) : 4, T = argc > 6 ? atoi(argv[4]) : 512;
  int H = argc > 6 ? atoi(argv[5]) : 20, hd = argc > 6 ? atoi(argv[6]) : 16;
  int threads = argc > 7 ? atoi(argv[7]) : 2;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.so", argv[1], name);
  void *h = dlopen(path, RTLD_NOW);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  esmtb_init_fn init = (esmtb_init_fn)(uintptr_t)dlsym(h, ESMTB_INIT_SYMBOL);
  char why[256];
  const esmtb_ops *ops = esmt_ops_from_init(init, &host, why, sizeof why);
  if (!ops) { fprintf(stderr, "%s: %s\n", path, why); return 1; }
  esmtb_open_options oo = {sizeof oo, 0, threads, 0};
  esmtb_device *dev = NULL;
  if (ops->open(&oo, &dev)) return 1;
  size_t D = (size_t)H * hd, N = (size_t)B * T;
  float *qkv, *out, *lse, *dout, *dqkv, *cs, *sn;
  int32_t *len;
  ops->alloc(dev, ESMTB_MEM_DEVICE, N * 3 * D * 4, (void **)&qkv);
  ops->alloc(dev, ESMTB_MEM_DEVICE, N * D * 4, (void **)&out);
  ops->alloc(dev, ESMTB_MEM_DEVICE, N * H * 4, (void **)&lse);
  ops->alloc(dev, ESMTB_MEM_DEVICE, N * D * 4, (void **)&dout);
  ops->alloc(dev, ESMTB_MEM_DEVICE, N * 3 * D * 4, (void **)&dqkv);
  ops->alloc(dev, ESMTB_MEM_DEVICE, (size_t)T * hd / 2 * 4, (void **)&cs);
  ops->alloc(dev, ESMTB_MEM_DEVICE, (size_t)T * hd / 2 * 4, (void **)&sn);
  ops->alloc(dev, ESMTB_MEM_DEVICE, (size_t)B * 4, (void **)&len);
  /* host-addressable backends only (cpu) for the fill below */
  for (size_t i = 0; i < N * 3 * D; i++) qkv[i] = (float)sin((double)i * 0.37) * 0.5f;
  for (size_t i = 0; i < N * D; i++) dout[i] = (float)cos((double)i * 0.11) * 0.1f;
  for (int t = 0; t < T; t++)
    for (int c = 0; c < hd / 2; c++) {
      double a = t * pow(10000.0, -2.0 * c / hd);
      cs[t * hd / 2 + c] = (float)cos(a);
      sn[t * hd / 2 + c] = (float)sin(a);
    }
  for (int b = 0; b < B; b++) len[b] = T;
  esmtb_attention_args a = {0};
  a.struct_size = sizeof a;
  a.dtype = ESMTB_F32;
  a.B = B; a.T = T; a.H = H; a.hd = hd;
  a.scale = 1.0f / sqrtf((float)hd);
  a.seq_len = len; a.rope_cos = cs; a.rope_sin = sn;
  a.qkv = qkv; a.out = out; a.lse = lse; a.dout = dout; a.dqkv = dqkv;
  double fwd = 1e9, bwd = 1e9;
  for (int r = 0; r < 8; r++) {
    double t0 = now_s();
    ops->attention_forward(dev, &a, NULL);
    double t1 = now_s();
    ops->attention_backward(dev, &a, NULL);
    double t2 = now_s();
    if (t1 - t0 < fwd) fwd = t1 - t0;
    if (t2 - t1 < bwd) bwd = t2 - t1;
  }
  double flops = 4.0 * B * H * (double)T * T * hd;
  printf("attention %s B=%d T=%d H=%d hd=%d threads=%d: forward %.2f ms %.1f GFLOP/s, backward "
         "%.2f ms %.1f GFLOP/s\n", name, B, T, H, hd, threads, fwd * 1e3, flops / fwd / 1e9,
         bwd * 1e3, 2 * flops / bwd / 1e9);
  ops->close(dev);
  return 0;
}
