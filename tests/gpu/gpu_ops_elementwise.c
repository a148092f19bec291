/* SPDX-License-Identifier: MIT */
/* The GPU's element-wise ops (add, dropout, gelu_backward, convert and
 * scale; cuda_common) against cpu.so's: part of test_gpu_ops
 * (gpu_ops_harness.h). */
#include "gpu_ops_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* add, dropout, gelu_backward                                         */
/* ------------------------------------------------------------------ */

/* add and gelu_backward take 16-byte vectors over the aligned middle of
 * their arrays and scalar heads and tails: n not a multiple of a vector,
 * pointers offset by `off_*` elements (the same offset everywhere: a head
 * then vectors; different offsets: all scalar), and tiny n. */
static void add_case(const gpu *g, esmtb_dtype dt, size_t n, int off_a, int off_b, int inplace) {
  float *a = randf(n, 1.0, 0), *b = randf(n, 1.0, 0), *cy = malloc(n * sizeof *cy);
  assert_non_null(cy);
  round_to(a, n, dt); round_to(b, n, dt);
  esmtb_add_args x = {sizeof x, ESMTB_F32, n, a, b, cy};
  cpu_ok(cpu->add(cdev, &x, NULL), "add");
  const size_t es = dt_size(dt);
  char *ga = galloc(g, (n + 8) * es), *gb = galloc(g, (n + 8) * es), *gy = galloc(g, (n + 8) * es);
  gput(g, ga + off_a * es, a, n, dt);
  gput(g, gb + off_b * es, b, n, dt);
  x.dtype = dt; x.a = ga + off_a * es; x.b = gb + off_b * es;
  x.y = inplace ? (void *)(ga + off_a * es) : (void *)(gy + off_a * es); /* y aliases a */
  gpu_ok(g, g->ops->add(g->dev, &x, g->st), "add");
  float *hy = gdown(g, x.y, n, dt);
  char what[96];
  snprintf(what, sizeof what, "add%s n=%zu off %d,%d", inplace ? " (y aliases a)" : "", n, off_a,
           off_b);
  report(g, what, dt, relerr(hy, cy, n), dt_tol(dt));
  gfree(g, ga); gfree(g, gb); gfree(g, gy);
  free(a); free(b); free(cy); free(hy);
}

void test_add(void **state) {
  (void)state;
  CHECKS_BEGIN();
  FOR_EACH_GPU_DTYPE(g, dt) {
    add_case(g, dt, 1024 * 320 + 7, 0, 0, 1);
    add_case(g, dt, 1024 * 320 + 7, 3, 3, 0); /* scalar head, vectors, tail */
    add_case(g, dt, 4099, 1, 2, 0);           /* offsets differ: all scalar */
    add_case(g, dt, 5, 1, 1, 1);              /* shorter than a vector */
    add_case(g, dt, 1, 0, 0, 0);
  }
  CHECKS_END();
}

/* dropout (ABI 2.3): the mask is Philox's (esmtrain/philox.h) on both, so
 * the GPU drops exactly the CPU's elements (checked bit for bit on which
 * are zero) and keeps the rest within the dtype's rounding; accumulate
 * adds into y; y may alias x. n ends inside a group of four. */
static void dropout_case(const gpu *g, esmtb_dtype dt, size_t n, int accumulate, int inplace) {
  float *x = randf(n, 1.0, 0.5), *y0 = randf(n, 1.0, 0), *cy = copyf(y0, n);
  round_to(x, n, dt);
  round_to(y0, n, dt);
  round_to(cy, n, dt);
  esmtb_dropout_args a = {sizeof a, ESMTB_F32, n, x, cy, 0x9e3779b97f4a7c15ull,
                          (uint64_t)3 << 16 | 5, 0x40000000u, 4.0f / 3.0f, accumulate};
  if (inplace) {
    memcpy(cy, x, n * sizeof *cy);
    a.x = cy;
  }
  cpu_ok(cpu->dropout(cdev, &a, NULL), "dropout");
  void *gx = gup(g, x, n, dt), *gy = inplace ? gx : gup(g, y0, n, dt);
  a.dtype = dt;
  a.x = gx;
  a.y = gy;
  gpu_ok(g, g->ops->dropout(g->dev, &a, g->st), "dropout");
  float *hy = gdown(g, gy, n, dt);
  size_t differ = 0, dropped = 0;
  for (size_t i = 0; !accumulate && i < n; i++) {
    differ += (hy[i] == 0.0f) != (cy[i] == 0.0f);
    dropped += cy[i] == 0.0f;
  }
  char what[96];
  snprintf(what, sizeof what, "dropout n=%zu%s%s: %zu of %zu dropped elements differ", n,
           accumulate ? " accumulate" : "", inplace ? " (y aliases x)" : "", differ, dropped);
  report(g, what, dt, differ ? 1.0 : relerr(hy, cy, n), dt_tol(dt));
  gfree(g, gx);
  if (!inplace) gfree(g, gy);
  free(x); free(y0); free(cy); free(hy);
}

void test_dropout(void **state) {
  (void)state;
  CHECKS_BEGIN();
  FOR_EACH_GPU_DTYPE(g, dt) {
    dropout_case(g, dt, 1024 * 320 + 7, 0, 0);
    dropout_case(g, dt, 1024 * 320 + 7, 1, 0);
    dropout_case(g, dt, 4099, 0, 1);
    dropout_case(g, dt, 3, 0, 0);
  }
  CHECKS_END();
}

static void gelu_backward_case(const gpu *g, esmtb_dtype dt, size_t n, int off) {
  float *pre = randf(n, 4.0, 0), *dout = randf(n, 1.0, 0), *cd = malloc(n * sizeof *cd);
  assert_non_null(cd);
  round_to(pre, n, dt); round_to(dout, n, dt);
  esmtb_gelu_backward_args x = {sizeof x, ESMTB_F32, n, pre, dout, cd};
  cpu_ok(cpu->gelu_backward(cdev, &x, NULL), "gelu_backward");
  const size_t es = dt_size(dt), o = (size_t)off * es;
  char *gp = galloc(g, (n + 8) * es), *gd = galloc(g, (n + 8) * es), *gout = galloc(g, (n + 8) * es);
  gput(g, gp + o, pre, n, dt);
  gput(g, gd + o, dout, n, dt);
  x.dtype = dt; x.pre = gp + o; x.dout = gd + o; x.dpre = gout + o;
  gpu_ok(g, g->ops->gelu_backward(g->dev, &x, g->st), "gelu_backward");
  float *h1 = gdown(g, gout + o, n, dt);
  x.dpre = gd + o; /* aliasing dout */
  gpu_ok(g, g->ops->gelu_backward(g->dev, &x, g->st), "gelu_backward");
  float *h2 = gdown(g, gd + o, n, dt);
  /* pre misaligned against dout/dpre: the all-scalar path. */
  gput(g, gp + o + es, pre, n, dt);
  gput(g, gd + o, dout, n, dt);
  x.pre = gp + o + es; x.dpre = gout + o;
  gpu_ok(g, g->ops->gelu_backward(g->dev, &x, g->st), "gelu_backward");
  float *h3 = gdown(g, gout + o, n, dt);
  char what[96];
  snprintf(what, sizeof what, "gelu_backward n=%zu off %d", n, off);
  report(g, what, dt, relerr(h1, cd, n), dt_tol(dt));
  snprintf(what, sizeof what, "gelu_backward n=%zu (dpre aliases dout)", n);
  report(g, what, dt, relerr(h2, cd, n), dt_tol(dt));
  snprintf(what, sizeof what, "gelu_backward n=%zu (pre misaligned)", n);
  report(g, what, dt, relerr(h3, cd, n), dt_tol(dt));
  gfree(g, gp); gfree(g, gd); gfree(g, gout);
  free(pre); free(dout); free(cd); free(h1); free(h2); free(h3);
}

void test_gelu_backward(void **state) {
  (void)state;
  CHECKS_BEGIN();
  FOR_EACH_GPU_DTYPE(g, dt) {
    gelu_backward_case(g, dt, 1024 * 1280 + 3, 0);
    gelu_backward_case(g, dt, 1001, 5);
    gelu_backward_case(g, dt, 3, 1);
  }
  CHECKS_END();
}

/* convert and scale: 16-byte chunks where both pointers are aligned, scalar
 * otherwise and for the tail. Conversions round to nearest even, like the
 * CPU backend's: the same bits are expected. */
static void convert_case(const gpu *g, esmtb_dtype from, esmtb_dtype to, size_t n, int off_s,
                         int off_d) {
  float *x = randf(n, 3.0, 0.1);
  round_to(x, n, from);
  const size_t ss = dt_size(from), ds = dt_size(to);
  /* The source in `from` on the host (cpu.so converts from f32). */
  void *hsrc = malloc(n * ss), *cdst = malloc(n * ds), *gdst_h = malloc(n * ds);
  assert_true(hsrc && cdst && gdst_h);
  esmtb_convert_args c = {sizeof c, n, x, ESMTB_F32, hsrc, from};
  cpu_ok(cpu->convert(cdev, &c, NULL), "convert");
  c.src = hsrc; c.src_dtype = from; c.dst = cdst; c.dst_dtype = to;
  cpu_ok(cpu->convert(cdev, &c, NULL), "convert");
  char *gs = galloc(g, (n + 8) * ss), *gd = galloc(g, (n + 8) * ds);
  gput_raw(g, gs + off_s * ss, hsrc, n * ss);
  c.src = gs + off_s * ss; c.dst = gd + off_d * ds;
  gpu_ok(g, g->ops->convert(g->dev, &c, g->st), "convert");
  gget_raw(g, gdst_h, gd + off_d * ds, n * ds);
  char what[96];
  snprintf(what, sizeof what, "convert %s->%s n=%zu off %d,%d", dt_name(from), dt_name(to), n,
           off_s, off_d);
  report_same(g, what, to, cdst, gdst_h, n * ds);
  gfree(g, gs); gfree(g, gd);
  free(x); free(hsrc); free(cdst); free(gdst_h);
}

static void scale_case(const gpu *g, size_t n, int off) {
  float *x = randf(n, 2.0, 0), *ref = copyf(x, n);
  for (size_t i = 0; i < n; i++) ref[i] *= 0.37f;
  float *gx = galloc(g, (n + 8) * sizeof(float));
  gput(g, gx + off, x, n, ESMTB_F32);
  esmtb_scale_args a = {sizeof a, n, gx + off, 0.37f};
  gpu_ok(g, g->ops->scale(g->dev, &a, g->st), "scale");
  float *h = gdown(g, gx + off, n, ESMTB_F32);
  char what[96];
  snprintf(what, sizeof what, "scale n=%zu off %d", n, off);
  report_same(g, what, ESMTB_F32, ref, h, n * sizeof(float));
  gfree(g, gx);
  free(x); free(ref); free(h);
}

void test_convert_scale(void **state) {
  (void)state;
  CHECKS_BEGIN();
  for (int gi = 0; gi < g_ngpu; gi++) {
    const gpu *g = &g_gpus[gi];
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++) {
        const esmtb_dtype from = (esmtb_dtype)a, to = (esmtb_dtype)b;
        convert_case(g, from, to, 100003, 0, 0); /* chunks, then a tail */
        convert_case(g, from, to, 1001, 1, 0);   /* misaligned source: scalar */
        convert_case(g, from, to, 5, 0, 0);      /* shorter than a chunk */
      }
    scale_case(g, 100003, 0);
    scale_case(g, 100003, 3); /* a head of 1, vectors, a tail */
    scale_case(g, 3, 1);
  }
  CHECKS_END();
}
