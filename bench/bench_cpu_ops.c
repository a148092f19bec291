/* SPDX-License-Identifier: MIT */
/* Per-op speed of the cpu backend at esm2_t6_8M training shapes (B=4,
 * T=512, d=320, H=20, FFN 1280, V=33): best-of-N wall time, GFLOP/s from
 * the op's nominal flop count, and GB/s of compulsory traffic, next to an
 * sgemm ceiling measured through the backend (cblas_sgemm, no epilogue).
 * Attention counts 4*B*H*T^2*hd flops forward and twice that backward.
 * Usage: bench_cpu_ops [-t threads] [-b backend_dir] [-s seconds_per_op]
 *                      [-f name_filter] [-c] [-n] [-d f16|bf16]
 * -c times with process CPU time instead of wall time: with -t 1 this gives
 * stable per-core numbers on a machine busy with other work. -n skips the
 * sgemm ceiling (for profiling one op). -d f16|bf16 runs the ops on half
 * activations (the dW GEMM then writes fp32 with c_f32, AdamW also writes
 * the half weight copy); the GB/s columns still count fp32 bytes. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "esmtrain/backend.h"
#include "ops_table.h"

#ifndef ESMT_BENCH_BACKEND_DIR
#define ESMT_BENCH_BACKEND_DIR "."
#endif

__attribute__((format(printf, 1, 2))) static void set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("backend error: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}
static void log_line(int level, const char *fmt, ...) { (void)level; (void)fmt; }
static const esmtb_host host = {sizeof host, ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR, set_error, log_line};

static const esmtb_ops *ops;
static esmtb_device *dev;
static double g_seconds = 0.3;
static double g_ceiling;
static const char *g_filter;
static int g_cpu_clock, g_no_ceiling;
static esmtb_dtype g_dt = ESMTB_F32; /* activation dtype (-d) */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(g_cpu_clock ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *buf(size_t n, float scale) {
  float *p = NULL;
  if (ops->alloc(dev, ESMTB_MEM_DEVICE, n * sizeof(float), (void **)&p)) exit(1);
  for (size_t i = 0; i < n; i++) p[i] = scale * (float)sin(0.7 * (double)i + 0.3);
  return p;
}

/* An activation buffer of n values in g_dt (room for n floats). */
static void *abuf(size_t n, float scale) {
  float *p = buf(n, scale);
  if (g_dt == ESMTB_F32) return p;
  float *t = malloc(n * sizeof *t);
  if (!t) exit(1);
  memcpy(t, p, n * sizeof *t);
  esmtb_convert_args c = {sizeof c, n, t, ESMTB_F32, p, g_dt};
  if (ops->convert(dev, &c, NULL)) exit(1);
  free(t);
  return p;
}

/* One op invocation; returns its status. */
typedef int (*op_fn)(void *ctx);

/* Best wall time of repeated calls (at least 3, about g_seconds in all). */
static double best_time(op_fn f, void *ctx) {
  if (f(ctx)) {
    fprintf(stderr, "op failed\n");
    exit(1);
  }
  double best = 1e30, start = now_s();
  for (int r = 0; r < 3 || now_s() - start < g_seconds; r++) {
    double t0 = now_s();
    f(ctx);
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  return best;
}

static int wanted(const char *name) { return !g_filter || strstr(name, g_filter); }

static void report(const char *name, double t, double flops, double bytes) {
  printf("%-34s %9.3f ms", name, t * 1e3);
  if (flops > 0)
    printf(" %8.1f GFLOP/s (%3.0f%%)", flops / t * 1e-9, 100.0 * flops / t * 1e-9 / g_ceiling);
  else printf(" %25s", "");
  if (bytes > 0) printf(" %7.1f GB/s", bytes / t * 1e-9);
  printf("\n");
}

static void bench(const char *name, op_fn f, void *ctx, double flops, double bytes) {
  if (wanted(name)) report(name, best_time(f, ctx), flops, bytes);
}

/* ---- op wrappers ---- */
static int run_gemm(void *c) { return ops->gemm(dev, c, NULL); }
static int run_attn_f(void *c) { return ops->attention_forward(dev, c, NULL); }
static int run_attn_b(void *c) { return ops->attention_backward(dev, c, NULL); }
static int run_ln_f(void *c) { return ops->layernorm_forward(dev, c, NULL); }
static int run_ln_b(void *c) { return ops->layernorm_backward(dev, c, NULL); }
static int run_emb_f(void *c) { return ops->embed_forward(dev, c, NULL); }
static int run_emb_b(void *c) { return ops->embed_backward(dev, c, NULL); }
static int run_add(void *c) { return ops->add(dev, c, NULL); }
static int run_gelu_b(void *c) { return ops->gelu_backward(dev, c, NULL); }
static int run_bias_grad(void *c) { return ops->bias_grad(dev, c, NULL); }
static int run_xent(void *c) { return ops->xent(dev, c, NULL); }
static int run_adamw(void *c) { return ops->adamw(dev, c, NULL); }
static int run_sumsq(void *c) { return ops->sumsq(dev, c, NULL); }
static int run_scale(void *c) { return ops->scale(dev, c, NULL); }
static int run_convert(void *c) { return ops->convert(dev, c, NULL); }

/* y[m,n] = x[m,k] W[n,k]^T (+ bias, GELU) or the other layouts; returns seconds. */
static double time_gemm(int ta, int tb, int m, int n, int k, float beta, int bias, int gelu) {
  /* beta = 1 is the weight gradient: fp32 C (c_f32) for half inputs */
  const int c_f32 = g_dt != ESMTB_F32 && beta != 0.0f;
  void *A = abuf((size_t)m * k, 0.1f), *B = abuf((size_t)n * k, 0.1f);
  void *C = c_f32 ? buf((size_t)m * n, 0.1f) : abuf((size_t)m * n, 0.1f);
  void *bv = bias ? abuf((size_t)n, 0.1f) : NULL, *pre = gelu ? abuf((size_t)m * n, 0.0f) : NULL;
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g; g.dtype = g_dt; g.c_f32 = c_f32;
  g.trans_a = ta; g.trans_b = tb; g.m = m; g.n = n; g.k = k; g.alpha = 1.0f; g.beta = beta;
  g.a = A; g.lda = ta ? m : k; g.b = B; g.ldb = tb ? k : n; g.c = C; g.ldc = n;
  g.bias = bv; g.epilogue = gelu ? ESMTB_EPI_GELU : ESMTB_EPI_NONE; g.pre = pre;
  double t = best_time(run_gemm, &g);
  ops->free(dev, ESMTB_MEM_DEVICE, A); ops->free(dev, ESMTB_MEM_DEVICE, B);
  ops->free(dev, ESMTB_MEM_DEVICE, C);
  if (bv) ops->free(dev, ESMTB_MEM_DEVICE, bv);
  if (pre) ops->free(dev, ESMTB_MEM_DEVICE, pre);
  return t;
}

static void bench_gemms(int N, int d, int F, int V) {
  struct { const char *name; int ta, tb, m, n, k; float beta; int bias, gelu; } g[] = {
      {"gemm qkv  2048x960x320 +bias", 0, 1, N, 3 * d, d, 0, 1, 0},
      {"gemm out  2048x320x320 +bias", 0, 1, N, d, d, 0, 1, 0},
      {"gemm ffn1 2048x1280x320 +bias+gelu", 0, 1, N, F, d, 0, 1, 1},
      {"gemm ffn2 2048x320x1280 +bias", 0, 1, N, d, F, 0, 1, 0},
      {"gemm dX   2048x320x1280 (NN)", 0, 0, N, d, F, 0, 0, 0},
      {"gemm dW   1280x320x2048 (TN,beta=1)", 1, 0, F, d, N, 1, 0, 0},
      {"gemm lm   2048x33x320 +bias", 0, 1, N, V, d, 0, 1, 0},
  };
  for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
    if (!wanted(g[i].name)) continue;
    double t = time_gemm(g[i].ta, g[i].tb, g[i].m, g[i].n, g[i].k, g[i].beta, g[i].bias, g[i].gelu);
    report(g[i].name, t, 2.0 * g[i].m * g[i].n * g[i].k, 0);
  }
}

static void bench_attention(int B, int T, int H, int hd) {
  const size_t D = (size_t)H * hd, N = (size_t)B * T;
  void *qkv = abuf(N * 3 * D, 0.5f), *out = abuf(N * D, 0), *dout = abuf(N * D, 0.1f);
  void *dqkv = abuf(N * 3 * D, 0);
  float *lse = buf(N * H, 0);
  float *cs = buf((size_t)T * hd / 2, 0), *sn = buf((size_t)T * hd / 2, 0);
  int32_t *len = NULL;
  if (ops->alloc(dev, ESMTB_MEM_DEVICE, (size_t)B * sizeof *len, (void **)&len)) exit(1);
  for (int t = 0; t < T; t++)
    for (int c = 0; c < hd / 2; c++) {
      double ang = t * pow(10000.0, -2.0 * c / hd);
      cs[t * hd / 2 + c] = (float)cos(ang);
      sn[t * hd / 2 + c] = (float)sin(ang);
    }
  for (int b = 0; b < B; b++) len[b] = T;
  esmtb_attention_args a = {0};
  a.struct_size = sizeof a; a.dtype = g_dt;
  a.B = B; a.T = T; a.H = H; a.hd = hd; a.scale = 1.0f / sqrtf((float)hd);
  a.seq_len = len; a.rope_cos = cs; a.rope_sin = sn;
  a.qkv = qkv; a.out = out; a.lse = lse; a.dout = dout; a.dqkv = dqkv;
  const double flops = 4.0 * B * H * (double)T * T * hd;
  char name[64];
  snprintf(name, sizeof name, "attention fwd hd=%d H=%d", hd, H);
  bench(name, run_attn_f, &a, flops, 0);
  snprintf(name, sizeof name, "attention bwd hd=%d H=%d", hd, H);
  bench(name, run_attn_b, &a, 2 * flops, 0);
  /* ESM-2 batches are padded: half the rows at half length */
  for (int b = 0; b < B; b += 2) len[b] = T / 2;
  const double pflops = flops * (B / 2 * 1.0 + B / 2 * 0.25) / B;
  snprintf(name, sizeof name, "attention fwd hd=%d, 2 rows T/2", hd);
  bench(name, run_attn_f, &a, pflops, 0);
  snprintf(name, sizeof name, "attention bwd hd=%d, 2 rows T/2", hd);
  bench(name, run_attn_b, &a, 2 * pflops, 0);
  void *all[] = {qkv, out, lse, dout, dqkv, cs, sn, len};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ops->free(dev, ESMTB_MEM_DEVICE, all[i]);
}

static void bench_rowwise(int B, int T, int d, int F, int V) {
  const size_t N = (size_t)B * T;
  void *x = abuf(N * F, 1.0f), *y = abuf(N * F, 1.0f), *z = abuf(N * F, 0);
  float *w = buf((size_t)F, 1.0f), *bb = buf((size_t)F, 0.1f), *dw = buf((size_t)F, 0);
  float *db = buf((size_t)F, 0), *mean = buf(N, 0), *rstd = buf(N, 0);
  esmtb_layernorm_args ln = {0};
  ln.struct_size = sizeof ln; ln.dtype = g_dt; ln.N = (int)N; ln.d = d; ln.eps = 1e-5f;
  ln.x = x; ln.w = w; ln.b = bb; ln.out = z; ln.mean = mean; ln.rstd = rstd;
  ln.dout = y; ln.dx = z; ln.accumulate_dx = 1; ln.dw = dw; ln.db = db;
  const double nd = (double)N * d;
  bench("layernorm fwd 2048x320", run_ln_f, &ln, 8 * nd, 12 * nd);
  bench("layernorm bwd 2048x320 (+= dx)", run_ln_b, &ln, 14 * nd, 20 * nd);
  esmtb_add_args ad = {sizeof ad, g_dt, N * d, x, y, z};
  bench("add 2048x320", run_add, &ad, nd, 12 * nd);
  esmtb_gelu_backward_args gb = {sizeof gb, g_dt, N * F, x, y, z};
  bench("gelu_backward 2048x1280", run_gelu_b, &gb, 30.0 * N * F, 12.0 * N * F);
  esmtb_bias_grad_args bg = {sizeof bg, g_dt, (int)N, F, y, db};
  bench("bias_grad 2048x1280", run_bias_grad, &bg, (double)N * F, 4.0 * N * F);

  int32_t *tok = NULL, *lab = NULL;
  ops->alloc(dev, ESMTB_MEM_DEVICE, N * 4, (void **)&tok);
  ops->alloc(dev, ESMTB_MEM_DEVICE, N * 4, (void **)&lab);
  for (size_t i = 0; i < N; i++) {
    tok[i] = i % 7 == 3 ? 32 : 4 + (int32_t)(i % 20);
    lab[i] = i % 7 == 3 ? (int32_t)(i % 20) + 4 : -100;
  }
  void *E = abuf((size_t)V * d, 0.02f);
  float *dE = buf((size_t)V * d, 0), *scale = buf((size_t)B, 0);
  esmtb_embed_args em = {0};
  em.struct_size = sizeof em; em.dtype = g_dt; em.B = B; em.T = T; em.d = d; em.tokens = tok; em.E = E;
  em.out = z; em.row_scale = scale; em.mask_id = 32; em.pad_id = 1; em.mask_ratio_train = 0.12f;
  em.dout = y; em.dE = dE;
  bench("embed fwd 2048x320", run_emb_f, &em, nd, 4 * nd);
  bench("embed bwd 2048x320", run_emb_b, &em, nd, 4 * nd);
  float loss = 0;
  esmtb_xent_args xe = {sizeof xe, g_dt, (int)N, V, x, lab, &loss, z, 1.0f / 300};
  bench("xent fwd+dlogits 2048x33", run_xent, &xe, 4.0 * N * V, 8.0 * N * V);
  void *all[] = {x, y, z, w, bb, dw, db, mean, rstd, tok, lab, E, dE, scale};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ops->free(dev, ESMTB_MEM_DEVICE, all[i]);
}

static void bench_optimizer(size_t P) {
  float *p = buf(P, 0.02f), *g = buf(P, 0.001f), *m = buf(P, 0), *v = buf(P, 0);
  float *lowp = buf(P / 2 + 1, 0);
  esmtb_segment seg[2] = {{0, P / 2, 0.01f}, {P / 2, P - P / 2, 0.0f}};
  esmtb_adamw_args ad = {0};
  ad.struct_size = sizeof ad; ad.n_segments = 2; ad.segments = seg; ad.params = p; ad.grads = g;
  ad.m = m; ad.v = v; ad.lr = 4e-4f; ad.beta1 = 0.9f; ad.beta2 = 0.98f; ad.eps = 1e-8f;
  ad.step = 10; ad.grad_scale = 1.0f;
  if (g_dt != ESMTB_F32) { /* the half weight copy as in mixed precision */
    ad.params_lowp = lowp;
    ad.lowp_dtype = g_dt;
  }
  const double n = (double)P;
  bench("adamw 7.5M params", run_adamw, &ad, 12 * n, 28 * n);
  float out = 0;
  esmtb_sumsq_args ss = {sizeof ss, P, g, &out};
  bench("sumsq 7.5M", run_sumsq, &ss, 2 * n, 4 * n);
  esmtb_scale_args sc = {sizeof sc, P, g, 1.0f};
  bench("scale 7.5M", run_scale, &sc, n, 8 * n);
  esmtb_convert_args cv = {sizeof cv, P, p, ESMTB_F32, lowp, ESMTB_BF16};
  bench("convert f32->bf16 7.5M", run_convert, &cv, 0, 6 * n);
  void *all[] = {p, g, m, v, lowp};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ops->free(dev, ESMTB_MEM_DEVICE, all[i]);
}

int main(int argc, char **argv) {
  int threads = 2, opt;
  const char *dir = ESMT_BENCH_BACKEND_DIR;
  while ((opt = getopt(argc, argv, "t:b:s:f:cnd:")) != -1) {
    if (opt == 't') threads = atoi(optarg);
    else if (opt == 'b') dir = optarg;
    else if (opt == 's') g_seconds = atof(optarg);
    else if (opt == 'f') g_filter = optarg;
    else if (opt == 'c') g_cpu_clock = 1;
    else if (opt == 'n') g_no_ceiling = 1;
    else if (opt == 'd' && strcmp(optarg, "f16") == 0) g_dt = ESMTB_F16;
    else if (opt == 'd' && strcmp(optarg, "bf16") == 0) g_dt = ESMTB_BF16;
    else {
      fprintf(stderr,
              "usage: %s [-t threads] [-b backend_dir] [-s seconds_per_op] [-f filter] [-c] [-n] "
              "[-d f16|bf16]\n",
              argv[0]);
      return 2;
    }
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/cpu.so", dir);
  void *h = dlopen(path, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  esmtb_init_fn init = (esmtb_init_fn)(uintptr_t)dlsym(h, ESMTB_INIT_SYMBOL);
  char why[256];
  ops = esmt_ops_from_init(init, &host, why, sizeof why);
  if (!ops) fprintf(stderr, "%s: %s\n", path, why);
  esmtb_open_options oo = {sizeof oo, 0, threads, 0};
  if (!ops || ops->open(&oo, &dev)) return 1;
  const int B = 4, T = 512, d = 320, H = 20, F = 1280, V = 33;
  printf("cpu backend, %d threads, %s activations; esm2_t6_8M shapes B=%d T=%d d=%d H=%d FFN=%d V=%d\n", threads,
         g_dt == ESMTB_F32 ? "f32" : g_dt == ESMTB_F16 ? "f16" : "bf16", B,
         T, d, H, F, V);
  g_ceiling = 1e30;
  if (!g_no_ceiling) { /* fp32 sgemm, whatever -d says */
    const esmtb_dtype dt = g_dt;
    g_dt = ESMTB_F32;
    double t = time_gemm(0, 1, 2048, 1280, 320, 0, 0, 0);
    double c1 = 2.0 * 2048 * 1280 * 320 / t * 1e-9;
    t = time_gemm(0, 0, 1024, 1024, 1024, 0, 0, 0);
    double c2 = 2.0 * 1024 * 1024 * 1024 / t * 1e-9;
    g_ceiling = c1 > c2 ? c1 : c2;
    g_dt = dt;
    printf("sgemm ceiling: 2048x1280x320 %.1f GFLOP/s, 1024^3 %.1f GFLOP/s (%% below is of %.1f)\n",
           c1, c2, g_ceiling);
  }
  bench_gemms(B * T, d, F, V);
  bench_attention(B, T, H, 16);
  bench_attention(B, T, H, 24);
  bench_attention(B, T, H / 2, 64);
  bench_rowwise(B, T, d, F, V);
  bench_optimizer(7512353);
  ops->close(dev);
  dlclose(h);
  return 0;
}
