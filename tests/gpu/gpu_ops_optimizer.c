/* SPDX-License-Identifier: MIT */
/* The GPU optimizers (AdamW, Lion; cuda_common/cuda_optimizer.cu) against
 * cpu.so's: part of test_gpu_ops (gpu_ops_harness.h). */
#include "gpu_ops_harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* AdamW                                                               */
/* ------------------------------------------------------------------ */

/* An optimizer test's expectations: which elements the segments cover
 * (malloc'ed mask), and the low copy they must leave: the updated params
 * (cpu.so's, `cp`) rounded to dt inside the segments, the initial 7.0
 * elsewhere. */
static char *segments_mask(const esmtb_segment *segs, int nseg, size_t n) {
  char *covered = calloc(n, 1);
  assert_non_null(covered);
  for (int si = 0; si < nseg; si++) memset(covered + segs[si].offset, 1, segs[si].count);
  return covered;
}

static float *lowp_expected(const float *cp, const char *covered, size_t n, esmtb_dtype dt) {
  float *want = copyf(cp, n);
  round_to(want, n, dt);
  for (size_t i = 0; i < n; i++)
    if (!covered[i]) want[i] = 7.0f;
  return want;
}

void test_adamw(void **state) {
  (void)state;
  CHECKS_BEGIN();
  const size_t n = 300000;
  /* Gaps no segment covers (150000..160000 and the tail), an empty
   * segment, and a segment smaller than one block. */
  const esmtb_segment segs[] = {{0, 100000, 0.01f}, {100000, 50000, 0.0f}, {160000, 123457, 0.01f},
                                {283457, 0, 0.01f},  {283457, 1000, 0.1f}};
  const int nseg = (int)(sizeof segs / sizeof segs[0]);
  FOR_EACH_GPU_DTYPE(g, dt) {
    float *p = randf(n, 1.0, 0), *gr = randf(n, 0.1, 0), *m = randf(n, 0.01, 0);
    float *v = randf(n, 1e-2, 0);
    for (size_t i = 0; i < n; i++) v[i] *= v[i];
    float *cp = copyf(p, n), *cm = copyf(m, n), *cv = copyf(v, n);
    esmtb_adamw_args a = {0};
    a.struct_size = sizeof a; a.n_segments = nseg; a.segments = segs;
    a.params = cp; a.grads = gr; a.m = cm; a.v = cv;
    a.lr = 1e-3f; a.beta1 = 0.9f; a.beta2 = 0.98f; a.eps = 1e-8f; a.step = 5; a.grad_scale = 0.5f;
    cpu_ok(cpu->adamw(cdev, &a, NULL), "adamw");

    float *gp = gup(g, p, n, ESMTB_F32), *gg = gup(g, gr, n, ESMTB_F32);
    float *gm = gup(g, m, n, ESMTB_F32), *gv = gup(g, v, n, ESMTB_F32);
    float *lowinit = malloc(n * sizeof *lowinit);
    assert_non_null(lowinit);
    for (size_t i = 0; i < n; i++) lowinit[i] = 7.0f;
    void *glow = gup(g, lowinit, n, dt);
    a.params = gp; a.grads = gg; a.m = gm; a.v = gv; a.params_lowp = glow; a.lowp_dtype = dt;
    gpu_ok(g, g->ops->adamw(g->dev, &a, g->st), "adamw");
    float *hp = gdown(g, gp, n, ESMTB_F32), *hm = gdown(g, gm, n, ESMTB_F32);
    float *hv = gdown(g, gv, n, ESMTB_F32), *hl = gdown(g, glow, n, dt);
    /* The low copy: rounded updated params inside segments, untouched in the gap. */
    char *covered = segments_mask(segs, nseg, n);
    float *want = lowp_expected(cp, covered, n, dt);
    for (size_t i = 0; i < n; i++)
      if (!covered[i] && (hp[i] != p[i] || hm[i] != m[i] || hv[i] != v[i])) {
        printf("RESULT %-12s adamw wrote element %zu outside every segment FAIL\n", g->name, i);
        g_failed++;
        break;
      }
    report(g, "adamw params (5 segments, one launch)", dt, relerr(hp, cp, n), 1e-5);
    report(g, "adamw m", dt, relerr(hm, cm, n), 1e-5);
    report(g, "adamw v", dt, relerr(hv, cv, n), 1e-5);
    report(g, "adamw params_lowp", dt, relerr(hl, want, n), dt_tol(dt));
    gfree(g, gp); gfree(g, gg); gfree(g, gm); gfree(g, gv); gfree(g, glow);
    free(p); free(gr); free(m); free(v); free(cp); free(cm); free(cv); free(lowinit);
    free(hp); free(hm); free(hv); free(hl); free(want); free(covered);
  }
  CHECKS_END();
}

/* Lion against cpu.so's (itself checked against float64 in test_cpu_ops and
 * against lion_pytorch in test_model_reference): the same segments, gaps
 * untouched, one moment. */
void test_lion(void **state) {
  (void)state;
  CHECKS_BEGIN();
  const size_t n = 300000;
  const esmtb_segment segs[] = {{0, 100000, 0.1f}, {100000, 50000, 0.0f}, {160000, 123457, 0.1f},
                                {283457, 0, 0.1f},  {283457, 1000, 0.3f}};
  const int nseg = (int)(sizeof segs / sizeof segs[0]);
  FOR_EACH_GPU_DTYPE(g, dt) {
    float *p = randf(n, 1.0, 0), *gr = randf(n, 0.1, 0), *m = randf(n, 0.01, 0);
    float *cp = copyf(p, n), *cm = copyf(m, n);
    esmtb_lion_args a = {0};
    a.struct_size = sizeof a; a.n_segments = nseg; a.segments = segs;
    a.params = cp; a.grads = gr; a.m = cm;
    a.lr = 3e-4f; a.beta1 = 0.9f; a.beta2 = 0.99f; a.grad_scale = 0.5f;
    cpu_ok(cpu->lion(cdev, &a, NULL), "lion");
    if (!g->ops->lion) {
      printf("RESULT %-12s has no lion op (no \"optimizer\" group or a NULL lion) FAIL\n",
             g->name);
      g_failed++;
      free(p); free(gr); free(m); free(cp); free(cm);
      continue;
    }
    float *gp = gup(g, p, n, ESMTB_F32), *gg = gup(g, gr, n, ESMTB_F32);
    float *gm = gup(g, m, n, ESMTB_F32);
    float *lowinit = malloc(n * sizeof *lowinit);
    assert_non_null(lowinit);
    for (size_t i = 0; i < n; i++) lowinit[i] = 7.0f;
    void *glow = gup(g, lowinit, n, dt);
    a.params = gp; a.grads = gg; a.m = gm; a.params_lowp = glow; a.lowp_dtype = dt;
    gpu_ok(g, g->ops->lion(g->dev, &a, g->st), "lion");
    float *hp = gdown(g, gp, n, ESMTB_F32), *hm = gdown(g, gm, n, ESMTB_F32);
    float *hl = gdown(g, glow, n, dt);
    char *covered = segments_mask(segs, nseg, n);
    float *want = lowp_expected(cp, covered, n, dt);
    for (size_t i = 0; i < n; i++)
      if (!covered[i] && (hp[i] != p[i] || hm[i] != m[i])) {
        printf("RESULT %-12s lion wrote element %zu outside every segment FAIL\n", g->name, i);
        g_failed++;
        break;
      }
    report(g, "lion params (5 segments, one launch)", dt, relerr(hp, cp, n), 1e-6);
    report(g, "lion m", dt, relerr(hm, cm, n), 1e-6);
    report(g, "lion params_lowp", dt, relerr(hl, want, n), dt_tol(dt));
    gfree(g, gp); gfree(g, gg); gfree(g, gm); gfree(g, glow);
    free(p); free(gr); free(m); free(cp); free(cm); free(lowinit);
    free(hp); free(hm); free(hl); free(want); free(covered);
  }
  CHECKS_END();
}
