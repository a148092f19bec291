/* SPDX-License-Identifier: MIT */
/* GPU attention (cuda_attention.cu through ampere_bf16.so on sm_80+, or
 * turing_fp16.so on sm_75) against cpu.so's fp32 attention.
 *
 * For every dtype the GPU backend offers (f32, f16, bf16 on sm_80+) and
 * every head dim (16, 24, 32, 64, 128): random batches with varied seq_len,
 * and random packed rows (ABI 1.3 segments) against each sequence alone
 * (T, 1, tile boundaries, random). qkv and dout are rounded to the GPU dtype
 * first and the CPU computes in fp32 from those rounded values; padded rows
 * of the GPU's qkv and dout are NaN (the CPU gets zeros there), and the
 * GPU's out/lse/dqkv are NaN-filled before each call so that every element
 * must be written. Checks:
 *   - relative error ||gpu - cpu||_2 / ||cpu||_2 over valid rows of out and
 *     of each of dq, dk, dv: <= 1e-2 (f16/bf16), <= 1e-4 (f32); lse on valid
 *     rows: max |gpu - cpu| <= 1e-2 (1e-4 for f32);
 *   - out and dqkv exactly 0 on padded query rows; everything finite;
 *   - determinism: a second forward + backward is bitwise equal (with the
 *     non-deterministic backward, ABI 1.6, all but dq);
 *   - argument errors (bad hd, seq_len 0 or > T, NULL, bf16 below sm_80)
 *     return non-zero with a message;
 *   - attention_probs (ABI 2.2) in a few cases (g_probs): [B, H, T, T]
 *     against cpu.so's, relative error within the same bounds over each
 *     row's or segment's block, exactly 0 elsewhere (the buffer is
 *     NaN-filled first), every block row summing to 1.
 * One line per case with the measured errors. Exit 77 ("SKIP: reason")
 * when no usable GPU is present. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/backend.h"
#include "ops_table.h"

static char g_err[1024];
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

static int g_failures;
/* qkv and dout 8 bytes past a 16-byte boundary (the kernels then copy V and
 * dO in 8-byte pieces: cp.async.ca 8 on sm_80+). */
static int g_misalign;
/* The backward runs with nondeterministic = 1 (ABI 1.6: atomic dQ on the
 * GPU): the same error bounds; out, lse, dk and dv must still repeat
 * bitwise, dq may differ in the last bits. */
static int g_nondet;
/* Also compare attention_probs (a few cases: the kernel is the same for all). */
static int g_probs;
#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);       \
      fprintf(stderr, __VA_ARGS__);                              \
      fputc('\n', stderr);                                       \
      g_failures++;                                              \
    }                                                            \
  } while (0)
#define REQUIRE(cond, ...)                                       \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "FATAL %s:%d: ", __FILE__, __LINE__);      \
      fprintf(stderr, __VA_ARGS__);                              \
      fprintf(stderr, " [%s]\n", g_err);                         \
      exit(1);                                                   \
    }                                                            \
  } while (0)

static const esmtb_ops *load_backend(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.so", dir, name);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return NULL;
  }
  esmtb_init_fn init = (esmtb_init_fn)(uintptr_t)dlsym(h, ESMTB_INIT_SYMBOL);
  char why[256];
  const esmtb_ops *ops = esmt_ops_from_init(init, &g_host, why, sizeof why);
  if (!ops) fprintf(stderr, "%s: %s\n", path, why);
  return ops;
}

/* ---- dtype rounding on the host ---- */

static uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  const int exp = (int)((x >> 23) & 0xffu);
  if (exp == 255) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    const uint32_t m = mant | 0x800000u;
    const int shift = 14 - e;
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}
static float h2f(uint16_t h) {
  const int e = (h >> 10) & 31;
  const uint32_t m = h & 0x3ffu;
  float f;
  if (e == 0) f = ldexpf((float)m, -24);
  else if (e == 31) f = m ? NAN : INFINITY;
  else f = ldexpf((float)(m | 0x400u), e - 25);
  return (h & 0x8000u) ? -f : f;
}

static size_t esize(esmtb_dtype dt) { return dt == ESMTB_F32 ? 4 : 2; }
static float round_to(esmtb_dtype dt, float v) {
  if (dt == ESMTB_F16) return h2f(f2h(v));
  if (dt == ESMTB_BF16) return bf2f(f2bf(v));
  return v;
}
/* n floats -> dtype bytes */
static void encode(esmtb_dtype dt, const float *x, void *dst, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (dt == ESMTB_F32) ((float *)dst)[i] = x[i];
    else if (dt == ESMTB_F16) ((uint16_t *)dst)[i] = f2h(x[i]);
    else ((uint16_t *)dst)[i] = f2bf(x[i]);
  }
}
static float decode1(esmtb_dtype dt, const void *src, size_t i) {
  if (dt == ESMTB_F32) return ((const float *)src)[i];
  if (dt == ESMTB_F16) return h2f(((const uint16_t *)src)[i]);
  return bf2f(((const uint16_t *)src)[i]);
}
static const char *dt_name(esmtb_dtype dt) {
  return dt == ESMTB_F32 ? "f32" : dt == ESMTB_F16 ? "f16" : "bf16";
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* [-1, 1) */
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 4503599627370496.0 - 1.0;
}

/* ---- the GPU side ---- */

static const esmtb_ops *gpu;
static esmtb_device *gdev;
static const esmtb_ops *cpu;
static esmtb_device *cdev;

static void *galloc(size_t bytes) {
  void *p = NULL;
  REQUIRE(gpu->alloc(gdev, ESMTB_MEM_DEVICE, bytes ? bytes : 1, &p) == 0, "gpu alloc %zu", bytes);
  return p;
}
static void h2d(void *d, const void *h, size_t bytes) {
  REQUIRE(gpu->copy_async(gdev, d, h, bytes, ESMTB_COPY_H2D, NULL) == 0, "H2D");
}
static void d2h(void *h, const void *d, size_t bytes) {
  REQUIRE(gpu->copy_async(gdev, h, d, bytes, ESMTB_COPY_D2H, NULL) == 0, "D2H");
  REQUIRE(gpu->stream_sync(gdev, NULL) == 0, "sync");
}

typedef struct errs {
  double num, den, maxabs, maxref;
} errs;
static void acc_err(errs *e, double g, double r) {
  e->num += (g - r) * (g - r);
  e->den += r * r;
  if (fabs(g - r) > e->maxabs || isnan(g)) e->maxabs = isnan(g) ? INFINITY : fabs(g - r);
  if (fabs(r) > e->maxref) e->maxref = fabs(r);
}
static double rel(const errs *e) { return e->den > 0 ? sqrt(e->num / e->den) : sqrt(e->num); }
/* dq and dk relative to the larger of their own norm and dv's: with one
 * token (L = 1) softmax is constant, dq = dk = 0 analytically, and both
 * the reference and the result are rounding noise whose ratio means
 * nothing (found when the kernels first ran, under the host emulator). */
static double rel_floor(const errs *e, const errs *floor) {
  const double den = e->den > floor->den ? e->den : floor->den;
  return den > 0 ? sqrt(e->num / den) : sqrt(e->num);
}

/* The fp32 CPU reference for packed rows, independent of any packed-row
 * code: each segment alone as a one-row right-padded batch (positions from
 * 0), results scattered back to its tokens; other tokens stay 0. */
static void cpu_reference_packed(const esmtb_attention_args *a, int nseg, const int32_t *start,
                                 const int32_t *len) {
  const int D = a->H * a->hd;
  for (int s = 0; s < nseg; s++) {
    const size_t t0 = (size_t)start[s];
    esmtb_attention_args one = *a;
    one.B = 1;
    one.T = len[s];
    one.seq_len = &len[s];
    memset(&one.segs, 0, sizeof one.segs);
    one.qkv = (const float *)a->qkv + t0 * 3 * D;
    one.dout = (const float *)a->dout + t0 * D;
    one.out = (float *)a->out + t0 * D;
    one.dqkv = (float *)a->dqkv + t0 * 3 * D;
    float *lse = malloc((size_t)a->H * len[s] * 4);
    REQUIRE(lse, "host memory");
    one.lse = lse;
    REQUIRE(cpu->attention_forward(cdev, &one, NULL) == 0, "cpu attention_forward (segment)");
    REQUIRE(cpu->attention_backward(cdev, &one, NULL) == 0, "cpu attention_backward (segment)");
    const size_t b = t0 / a->T, tt = t0 % a->T;
    for (int h = 0; h < a->H; h++)
      memcpy(a->lse + (b * a->H + h) * a->T + tt, lse + (size_t)h * len[s], (size_t)len[s] * 4);
    free(lse);
  }
}

/* Right-padded rows (nseg == 0: len[b] per row) or packed rows (nseg
 * segments start[i], len[i] of the flattened B*T tokens). Padding is NaN on
 * the GPU side and must come back as zeros. */
/* attention_probs of the GPU args g against cpu.so on the host args a
 * (fp32, same rounded inputs), whose packed segments, if any, are given by
 * nseg / start / len. */
static void probs_check(esmtb_dtype dt, esmtb_attention_args a, esmtb_attention_args g,
                        int nseg, const int32_t *start, const int32_t *len, int max_len) {
  const int B = a.B, T = a.T, H = a.H;
  const size_t np = (size_t)B * H * T * T;
  float *pr = malloc(np * 4), *pg = malloc(np * 4);
  char *in_blk = calloc((size_t)B * T * T, 1);
  REQUIRE(pr && pg && in_blk, "host memory");
  REQUIRE(gpu->attention_probs && cpu->attention_probs, "attention_probs missing");
  if (nseg) a.segs = (esmtb_segments){nseg, max_len, start, len};
  a.probs = pr;
  REQUIRE(cpu->attention_probs(cdev, &a, NULL) == 0, "cpu attention_probs: %s", g_err);
  void *d_p = galloc(np * 4);
  REQUIRE(gpu->memset_async(gdev, d_p, 0xff, np * 4, NULL) == 0, "memset");
  g.probs = d_p;
  REQUIRE(gpu->attention_probs(gdev, &g, NULL) == 0, "gpu attention_probs: %s", g_err);
  d2h(pg, d_p, np * 4);
  for (int i = 0; i < (nseg ? nseg : B); i++) {
    const size_t t0 = nseg ? (size_t)start[i] : (size_t)i * T, b = t0 / T, r0 = t0 % T;
    for (int q = 0; q < len[i]; q++)
      memset(in_blk + (b * T + r0 + q) * T + r0, 1, (size_t)len[i]);
  }
  errs e = {0};
  int outside = 0, nonfinite = 0;
  double worst_sum = 0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int q = 0; q < T; q++) {
        double sum = 0;
        int any = 0;
        for (int k = 0; k < T; k++) {
          const size_t i = (((size_t)b * H + h) * T + q) * T + k;
          if (!isfinite(pg[i])) nonfinite++;
          if (in_blk[((size_t)b * T + q) * T + k]) {
            acc_err(&e, pg[i], pr[i]);
            sum += pg[i];
            any = 1;
          } else if (pg[i] != 0.0f) {
            outside++;
          }
        }
        if (any) worst_sum = fmax(worst_sum, fabs(sum - 1));
      }
  const double tol = dt == ESMTB_F32 ? 1e-4 : 1e-2;
  const int ok = rel(&e) <= tol && !outside && !nonfinite && worst_sum <= 1e-4;
  printf("%-4s probs %s%s hd=%-3d B=%d T=%-4d H=%d: rel %.2e max|err| %.1e row sums within %.1e "
         "outside!=0=%d nonfinite=%d\n", ok ? "ok" : "FAIL", nseg ? "packed " : "", dt_name(dt),
         a.hd, B, T, H, rel(&e), e.maxabs, worst_sum, outside, nonfinite);
  fflush(stdout);
  if (!ok) g_failures++;
  gpu->free(gdev, ESMTB_MEM_DEVICE, d_p);
  free(pr);
  free(pg);
  free(in_blk);
}

static void run_case_any(esmtb_dtype dt, int B, int T, int H, int hd, const int32_t *len,
                         int nseg, const int32_t *start) {
  const int half = hd / 2, D = H * hd;
  const size_t N = (size_t)B * T, nq = N * 3 * D, no = N * D, nl = N * H, es = esize(dt);
  char *in_seg = calloc(N, 1);
  REQUIRE(in_seg, "host memory");
  int max_len = 0;
  for (int i = 0; i < (nseg ? nseg : B); i++) {
    const size_t t0 = nseg ? (size_t)start[i] : (size_t)i * T;
    memset(in_seg + t0, 1, (size_t)len[i]);
    if (len[i] > max_len) max_len = len[i];
  }
  float *qkv = malloc(nq * 4), *dout = malloc(no * 4), *cs = malloc((size_t)T * half * 4);
  float *sn = malloc((size_t)T * half * 4);
  REQUIRE(qkv && dout && cs && sn, "host memory");
  for (size_t i = 0; i < nq; i++) qkv[i] = round_to(dt, (float)(urand() * 1.5));
  for (size_t i = 0; i < no; i++) dout[i] = round_to(dt, (float)urand());
  for (int t = 0; t < T; t++)
    for (int i = 0; i < half; i++) {
      double ang = t * pow(10000.0, -2.0 * i / hd);
      cs[t * half + i] = (float)cos(ang);
      sn[t * half + i] = (float)sin(ang);
    }
  /* CPU gets zeros on padded rows, the GPU NaN. */
  float *qkv_g = malloc(nq * 4), *dout_g = malloc(no * 4);
  REQUIRE(qkv_g && dout_g, "host memory");
  memcpy(qkv_g, qkv, nq * 4);
  memcpy(dout_g, dout, no * 4);
  for (size_t tok = 0; tok < N; tok++)
    if (!in_seg[tok]) {
      for (int k = 0; k < 3 * D; k++) {
        qkv[tok * 3 * D + k] = 0.0f;
        qkv_g[tok * 3 * D + k] = NAN;
      }
      for (int k = 0; k < D; k++) {
        dout[tok * D + k] = 0.0f;
        dout_g[tok * D + k] = NAN;
      }
    }
  /* CPU reference (fp32) */
  float *out_r = calloc(no, 4), *lse_r = calloc(nl, 4), *dqkv_r = calloc(nq, 4);
  REQUIRE(out_r && lse_r && dqkv_r, "host memory");
  esmtb_attention_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.dtype = ESMTB_F32;
  a.B = B; a.T = T; a.H = H; a.hd = hd;
  a.scale = 1.0f / sqrtf((float)hd);
  a.seq_len = nseg ? NULL : len; a.rope_cos = cs; a.rope_sin = sn;
  a.qkv = qkv; a.out = out_r; a.lse = lse_r; a.dout = dout; a.dqkv = dqkv_r;
  if (nseg) {
    cpu_reference_packed(&a, nseg, start, len);
  } else {
    REQUIRE(cpu->attention_forward(cdev, &a, NULL) == 0, "cpu attention_forward");
    REQUIRE(cpu->attention_backward(cdev, &a, NULL) == 0, "cpu attention_backward");
  }

  /* GPU */
  unsigned char *hq = malloc(nq * es), *ho = malloc(no * es);
  REQUIRE(hq && ho, "host memory");
  encode(dt, qkv_g, hq, nq);
  encode(dt, dout_g, ho, no);
  void *d_qkv0 = galloc(nq * es + 8), *d_out = galloc(no * es), *d_dout0 = galloc(no * es + 8);
  void *d_qkv = (char *)d_qkv0 + (g_misalign ? 8 : 0);
  void *d_dout = (char *)d_dout0 + (g_misalign ? 8 : 0);
  void *d_dqkv = galloc(nq * es), *d_lse = galloc(nl * 4), *d_cs = galloc((size_t)T * half * 4);
  const int nrows = nseg ? nseg : B;
  void *d_sn = galloc((size_t)T * half * 4), *d_len = galloc((size_t)nrows * 4);
  void *d_start = nseg ? galloc((size_t)nseg * 4) : NULL;
  if (nseg) h2d(d_start, start, (size_t)nseg * 4);
  h2d(d_qkv, hq, nq * es);
  h2d(d_dout, ho, no * es);
  h2d(d_cs, cs, (size_t)T * half * 4);
  h2d(d_sn, sn, (size_t)T * half * 4);
  h2d(d_len, len, (size_t)nrows * 4);
  esmtb_attention_args g = a;
  g.dtype = dt;
  g.seq_len = nseg ? NULL : d_len; g.rope_cos = d_cs; g.rope_sin = d_sn;
  if (nseg) {
    g.segs.nseg = nseg;
    g.segs.max_len = max_len;
    g.segs.start = d_start;
    g.segs.len = d_len;
  }
  g.qkv = d_qkv; g.out = d_out; g.lse = d_lse; g.dout = d_dout; g.dqkv = d_dqkv;
  g.nondeterministic = g_nondet;
  unsigned char *go[2], *gd[2];
  float *gl[2];
  for (int run = 0; run < 2; run++) {
    REQUIRE(gpu->memset_async(gdev, d_out, 0xff, no * es, NULL) == 0, "memset");
    REQUIRE(gpu->memset_async(gdev, d_dqkv, 0xff, nq * es, NULL) == 0, "memset");
    REQUIRE(gpu->memset_async(gdev, d_lse, 0xff, nl * 4, NULL) == 0, "memset");
    REQUIRE(gpu->attention_forward(gdev, &g, NULL) == 0, "gpu attention_forward");
    REQUIRE(gpu->attention_backward(gdev, &g, NULL) == 0, "gpu attention_backward");
    go[run] = malloc(no * es);
    gd[run] = malloc(nq * es);
    gl[run] = malloc(nl * 4);
    REQUIRE(go[run] && gd[run] && gl[run], "host memory");
    d2h(go[run], d_out, no * es);
    d2h(gd[run], d_dqkv, nq * es);
    d2h(gl[run], d_lse, nl * 4);
  }
  int dq_same = 1, dkdv_same = 1;
  for (size_t tok = 0; tok < N; tok++) {
    const size_t row = tok * 3 * D * es;
    dq_same &= memcmp(gd[0] + row, gd[1] + row, D * es) == 0;
    dkdv_same &= memcmp(gd[0] + row + D * es, gd[1] + row + D * es, 2 * D * es) == 0;
  }
  const int deterministic = memcmp(go[0], go[1], no * es) == 0 && dkdv_same &&
                            (dq_same || g_nondet) && memcmp(gl[0], gl[1], nl * 4) == 0;

  /* compare */
  errs eo = {0}, el = {0}, eg[3] = {{0}};
  int nonfinite = 0, pad_nonzero = 0;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      const int valid = in_seg[(size_t)b * T + t];
      for (int k = 0; k < D; k++) {
        const size_t i = ((size_t)b * T + t) * D + k;
        const float v = decode1(dt, go[0], i);
        if (!isfinite(v)) nonfinite++;
        if (valid) acc_err(&eo, v, out_r[i]);
        else if (v != 0.0f) pad_nonzero++;
      }
      for (int k = 0; k < 3 * D; k++) {
        const size_t i = ((size_t)b * T + t) * 3 * D + k;
        const float v = decode1(dt, gd[0], i);
        if (!isfinite(v)) nonfinite++;
        if (valid) acc_err(&eg[k / D], v, dqkv_r[i]);
        else if (v != 0.0f) pad_nonzero++;
      }
      for (int h = 0; h < H; h++) {
        const size_t i = ((size_t)b * H + h) * T + t;
        if (!isfinite(gl[0][i])) nonfinite++;
        if (valid) acc_err(&el, gl[0][i], lse_r[i]);
        else if (gl[0][i] != 0.0f) pad_nonzero++;
      }
    }
  const double tol = dt == ESMTB_F32 ? 1e-4 : 1e-2;
  char lens[128] = "";
  for (int b = 0; b < nrows && strlen(lens) < 100; b++)
    snprintf(lens + strlen(lens), sizeof lens - strlen(lens), "%s%d", b ? "," : "", len[b]);
  const int ok = rel(&eo) <= tol && el.maxabs <= tol && rel_floor(&eg[0], &eg[2]) <= tol &&
                 rel_floor(&eg[1], &eg[2]) <= tol && rel(&eg[2]) <= tol && !nonfinite && !pad_nonzero &&
                 deterministic;
  printf("%-4s %s%s hd=%-3d B=%d T=%-4d H=%d len=[%s]: out %.2e lse %.2e dq %.2e dk %.2e dv %.2e "
         "(max|err|/max|ref|: out %.1e dq %.1e dk %.1e dv %.1e) nonfinite=%d pad!=0=%d det=%d\n",
         ok ? "ok" : "FAIL",
         nseg ? (g_nondet ? "nondet packed " : "packed ")
              : g_misalign ? "8-aligned " : g_nondet ? "nondet " : "",
         dt_name(dt), hd, B, T, H, lens, rel(&eo), el.maxabs,
         rel_floor(&eg[0], &eg[2]), rel_floor(&eg[1], &eg[2]), rel(&eg[2]), eo.maxabs / (eo.maxref + 1e-30),
         eg[0].maxabs / (eg[0].maxref + 1e-30), eg[1].maxabs / (eg[1].maxref + 1e-30),
         eg[2].maxabs / (eg[2].maxref + 1e-30), nonfinite, pad_nonzero, deterministic);
  fflush(stdout);
  if (!ok) g_failures++;
  if (g_probs) probs_check(dt, a, g, nseg, start, len, max_len);

  void *bufs[] = {d_qkv0, d_out, d_dout0, d_dqkv, d_lse, d_cs, d_sn, d_len, d_start};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) gpu->free(gdev, ESMTB_MEM_DEVICE, bufs[i]);
  free(in_seg);
  for (int run = 0; run < 2; run++) {
    free(go[run]); free(gd[run]); free(gl[run]);
  }
  free(qkv); free(dout); free(cs); free(sn); free(qkv_g); free(dout_g); free(out_r); free(lse_r);
  free(dqkv_r); free(hq); free(ho);
}

static void run_case(esmtb_dtype dt, int B, int T, int H, int hd, const int32_t *len) {
  run_case_any(dt, B, T, H, hd, len, 0, NULL);
}

/* Random packed rows: sequences of random length (a few long, many short)
 * fill each row greedily; the rest of a row is padding. */
static void run_packed_random(esmtb_dtype dt, int B, int T, int H, int hd) {
  int32_t *start = malloc((size_t)B * T * 4), *len = malloc((size_t)B * T * 4);
  REQUIRE(start && len, "host memory");
  int n = 0;
  for (int b = 0; b < B; b++) {
    int t = (b % 2) ? (int)((urand() + 1.0) * 4) : 0; /* odd rows start after a little padding */
    while (t < T - 1) {
      const double u = (urand() + 1.0) * 0.5;
      int L = u < 0.3 ? 1 + (int)(u * 40) : 1 + (int)(u * u * T);
      if (L > T - t) L = T - t;
      start[n] = b * T + t;
      len[n++] = L;
      t += L + ((urand() > 0.6) ? 1 : 0); /* now and then a gap */
    }
  }
  run_case_any(dt, B, T, H, hd, len, n, start);
  free(start);
  free(len);
}

/* A call that must fail with a message. */
static void expect_error(const char *what, esmtb_status st) {
  CHECK(st != 0, "%s: expected an error, got 0", what);
  CHECK(g_err[0] != '\0', "%s: no error message", what);
  printf("%-4s error case %s: status %d, \"%s\"\n", st != 0 && g_err[0] ? "ok" : "FAIL", what, st,
         g_err);
  g_err[0] = '\0';
}

static void error_cases(int cc_major) {
  const int B = 2, T = 8, H = 1, hd = 16;
  const size_t es = 2, nq = (size_t)B * T * 3 * H * hd, no = (size_t)B * T * H * hd;
  void *d_qkv = galloc(nq * es), *d_out = galloc(no * es), *d_dout = galloc(no * es);
  void *d_dqkv = galloc(nq * es), *d_lse = galloc((size_t)B * T * H * 4);
  void *d_cs = galloc((size_t)T * 64 * 4), *d_sn = galloc((size_t)T * 64 * 4);
  void *d_len = galloc((size_t)B * 4);
  REQUIRE(gpu->memset_async(gdev, d_qkv, 0, nq * es, NULL) == 0, "memset");
  REQUIRE(gpu->memset_async(gdev, d_dout, 0, no * es, NULL) == 0, "memset");
  REQUIRE(gpu->memset_async(gdev, d_cs, 0, (size_t)T * 64 * 4, NULL) == 0, "memset");
  REQUIRE(gpu->memset_async(gdev, d_sn, 0, (size_t)T * 64 * 4, NULL) == 0, "memset");
  esmtb_attention_args g;
  memset(&g, 0, sizeof g);
  g.struct_size = sizeof g;
  g.dtype = ESMTB_F16;
  g.B = B; g.T = T; g.H = H; g.hd = hd; g.scale = 0.25f;
  g.seq_len = d_len; g.rope_cos = d_cs; g.rope_sin = d_sn;
  g.qkv = d_qkv; g.out = d_out; g.lse = d_lse; g.dout = d_dout; g.dqkv = d_dqkv;
  int32_t good[2] = {8, 3};
  h2d(d_len, good, sizeof good);
  g_err[0] = '\0';
  CHECK(gpu->attention_forward(gdev, &g, NULL) == 0, "valid call failed: %s", g_err);
  CHECK(gpu->attention_backward(gdev, &g, NULL) == 0, "valid call failed: %s", g_err);
  g_err[0] = '\0';
  esmtb_attention_args e = g;
  e.hd = 48;
  expect_error("hd=48", gpu->attention_forward(gdev, &e, NULL));
  e.hd = 15;
  expect_error("hd=15 (backward)", gpu->attention_backward(gdev, &e, NULL));
  e = g;
  e.qkv = NULL;
  expect_error("qkv NULL", gpu->attention_forward(gdev, &e, NULL));
  e = g;
  e.dqkv = NULL;
  expect_error("dqkv NULL", gpu->attention_backward(gdev, &e, NULL));
  e = g;
  e.T = 0;
  expect_error("T=0", gpu->attention_forward(gdev, &e, NULL));
  int32_t zero[2] = {8, 0};
  h2d(d_len, zero, sizeof zero);
  expect_error("seq_len 0", gpu->attention_forward(gdev, &g, NULL));
  int32_t big[2] = {9, 3};
  h2d(d_len, big, sizeof big);
  expect_error("seq_len T+1", gpu->attention_forward(gdev, &g, NULL));
  expect_error("seq_len T+1 (backward)", gpu->attention_backward(gdev, &g, NULL));
  h2d(d_len, good, sizeof good);
  if (cc_major < 8) {
    e = g;
    e.dtype = ESMTB_BF16;
    expect_error("bf16 below sm_80", gpu->attention_forward(gdev, &e, NULL));
  }
  e = g;
  e.dtype = ESMTB_I32;
  expect_error("dtype i32", gpu->attention_forward(gdev, &e, NULL));
  /* packed rows: a segment crossing a row, overlapping ones, len 0 */
  void *d_start = galloc(3 * 4), *d_slen = galloc(3 * 4);
  e = g;
  e.seq_len = NULL;
  e.segs.nseg = 2;
  e.segs.max_len = 8;
  e.segs.start = d_start;
  e.segs.len = d_slen;
  const int32_t ok_st[2] = {0, 9}, ok_ln[2] = {8, 5};
  h2d(d_start, ok_st, sizeof ok_st);
  h2d(d_slen, ok_ln, sizeof ok_ln);
  g_err[0] = '\0';
  CHECK(gpu->attention_forward(gdev, &e, NULL) == 0, "valid packed call failed: %s", g_err);
  CHECK(gpu->attention_backward(gdev, &e, NULL) == 0, "valid packed call failed: %s", g_err);
  const int32_t cross_st[2] = {0, 6}, cross_ln[2] = {4, 4};
  h2d(d_start, cross_st, sizeof cross_st);
  h2d(d_slen, cross_ln, sizeof cross_ln);
  expect_error("segment crossing a row", gpu->attention_forward(gdev, &e, NULL));
  const int32_t ov_st[2] = {0, 3}, ov_ln[2] = {4, 2};
  h2d(d_start, ov_st, sizeof ov_st);
  h2d(d_slen, ov_ln, sizeof ov_ln);
  expect_error("overlapping segments (backward)", gpu->attention_backward(gdev, &e, NULL));
  const int32_t z_st[2] = {0, 4}, z_ln[2] = {4, 0};
  h2d(d_start, z_st, sizeof z_st);
  h2d(d_slen, z_ln, sizeof z_ln);
  expect_error("segment of length 0", gpu->attention_forward(gdev, &e, NULL));
  e.segs.max_len = T + 1;
  expect_error("max_len > T", gpu->attention_forward(gdev, &e, NULL));
  REQUIRE(gpu->stream_sync(gdev, NULL) == 0, "sync after error cases");
  void *bufs[] = {d_qkv, d_out, d_dout, d_dqkv, d_lse, d_cs, d_sn, d_len, d_start, d_slen};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu->free(gdev, ESMTB_MEM_DEVICE, bufs[i]);
}

/* Arguments: --quick leaves out the two T = 1024 cases per dtype (the
 * emulated suite runs that way: under the host emulator they cost minutes);
 * --only f16:64 runs one dtype (f32, f16, bf16) and head dim, quick. */
int main(int argc, char **argv) {
  int quick = 0, only_hd = 0;
  const char *only_dt = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      static char dtbuf[8];
      snprintf(dtbuf, sizeof dtbuf, "%.*s", (int)strcspn(argv[i + 1], ":"), argv[i + 1]);
      only_dt = dtbuf;
      only_hd = strchr(argv[++i], ':') ? atoi(strchr(argv[i], ':') + 1) : 0;
      quick = 1;
    } else {
      fprintf(stderr, "usage: test_gpu_attention [--quick] [--only f32|f16|bf16:HD]\n");
      return 2;
    }
  }
  /* the device-side value checks of seq_len and segments (off in training) */
  setenv("ESMT_CUDA_ATTN_CHECK", "1", 1);
  const char *dir = getenv("ESMT_TEST_BACKEND_DIR");
  if (!dir || !*dir) {
    fprintf(stderr, "ESMT_TEST_BACKEND_DIR is not set (run through ctest)\n");
    return 1;
  }
  /* Which GPU backend: probe through ampere_bf16 (lists every device). */
  const esmtb_ops *amp = load_backend(dir, "ampere_bf16");
  if (!amp) {
    printf("SKIP: ampere_bf16.so not loadable (%s)\n", g_err);
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
    printf("SKIP: no CUDA device (%s)\n", pr.reason[0] ? pr.reason : "probe found none");
    return 77;
  }
  const int ccM = pr.devices[0].cc_major, ccm = pr.devices[0].cc_minor;
  if (ccM * 10 + ccm < 75) {
    printf("SKIP: device 0 (%s) is sm_%d%d; the GPU backends need sm_75+\n", pr.devices[0].name,
           ccM, ccm);
    return 77;
  }
  gpu = ccM >= 8 ? amp : load_backend(dir, "turing_fp16");
  REQUIRE(gpu, "cannot load turing_fp16.so");
  REQUIRE(gpu->attention_forward && gpu->attention_backward, "%s lacks attention ops", gpu->name);
  esmtb_open_options oo = {sizeof oo, 0, 0, 0};
  if (gpu->open(&oo, &gdev) != 0) {
    printf("SKIP: cannot open GPU 0: %s\n", g_err);
    return 77;
  }
  cpu = load_backend(dir, "cpu");
  REQUIRE(cpu, "cannot load cpu.so");
  esmtb_open_options co = {sizeof co, 0, 0, 0};
  REQUIRE(cpu->open(&co, &cdev) == 0, "cpu open");
  printf("backend %s on %s (sm_%d%d)\n", gpu->name, pr.devices[0].name, ccM, ccm);

  const esmtb_dtype dts[] = {ESMTB_F32, ESMTB_F16, ESMTB_BF16};
  const int hds[] = {16, 24, 32, 64, 128};
  for (size_t di = 0; di < 3; di++) {
    const esmtb_dtype dt = dts[di];
    if (dt == ESMTB_BF16 && ccM < 8) continue;
    if (only_dt && strcmp(only_dt, dt_name(dt))) continue;
    for (size_t hi = 0; hi < 5; hi++) {
      const int hd = hds[hi];
      if (only_hd && hd != only_hd) continue;
      const int32_t l1[] = {77, 1, 40, 64};
      g_probs = hd == 24 || hd == 64;
      run_case(dt, 4, 77, 2, hd, l1); /* T, 1, partial tile, exactly one tile */
      g_probs = 0;
      const int32_t l2[] = {200, 129, 1};
      int32_t l2r[3];
      memcpy(l2r, l2, sizeof l2);
      l2r[2] = 2 + (int32_t)((urand() + 1.0) * 0.5 * 190); /* random in [2, 192) */
      run_case(dt, 3, 200, 3, hd, l2r);
      const int32_t l3[] = {1};
      run_case(dt, 1, 1, 2, hd, l3); /* a single token */
      if (dt != ESMTB_F32 && (hd == 24 || hd == 64)) { /* qkv, dout only 8-byte aligned */
        const int32_t l5[] = {150, 66};
        g_misalign = 1;
        run_case(dt, 2, 150, 2, hd, l5);
        g_misalign = 0;
      }
      if (dt != ESMTB_F32) { /* the non-deterministic backward: several tiles, partial ones */
        g_nondet = 1;
        run_case(dt, 3, 200, 3, hd, l2r);
        if (hd == 24 || hd == 64) run_packed_random(dt, 3, 300, 2, hd);
        g_nondet = 0;
      }
    }
    const int32_t l4[] = {1024, 700};
    if (!quick) run_case(dt, 2, 1024, 2, 64, l4); /* many tiles */
    for (size_t hi = 0; hi < 5; hi++) {
      g_probs = hds[hi] == 64;
      if (!only_hd || hds[hi] == only_hd) run_packed_random(dt, 3, 300, 2, hds[hi]);
      g_probs = 0;
    }
    if (!quick) run_packed_random(dt, 2, 1024, 4, 64); /* ESM-2 650M's head dim, max length 1024 */
    if (!quick && dt != ESMTB_F32) { /* many key blocks adding into one dQ row */
      g_nondet = 1;
      run_case(dt, 2, 1024, 2, 64, l4);
      g_nondet = 0;
    }
  }
  if (!only_dt) error_cases(ccM);
  gpu->close(gdev);
  cpu->close(cdev);
  if (g_failures) {
    printf("%d failure(s)\n", g_failures);
    return 1;
  }
  printf("all GPU attention checks passed\n");
  return 0;
}
