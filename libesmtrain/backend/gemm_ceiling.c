/* SPDX-License-Identifier: MIT */
/* The GEMM ceiling that MFU figures are quoted against, measured through
 * the backend's own gemm op in the same process as the benchmark. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "ops_table.h"
#include "context.h"


static esmt_status ceiling(esmt_context *ctx, esmtb_dtype dt, int m, int n, int k, int repeats,
                           double *gflops);

esmt_status esmt_context_gemm_ceiling(esmt_context *ctx, int m, int n, int k, int repeats,
                                      double *gflops) {
  return ceiling(ctx, ESMTB_F32, m, n, k, repeats, gflops);
}

esmt_status esmt_context_gemm_ceiling_precision(esmt_context *ctx, esmt_precision precision,
                                                int m, int n, int k, int repeats,
                                                double *gflops) {
  if (precision != ESMT_PRECISION_FP32 && precision != ESMT_PRECISION_FP16 &&
      precision != ESMT_PRECISION_BF16)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT,
                     "esmt_context_gemm_ceiling_precision: precision must be FP32, FP16 or BF16");
  const esmtb_dtype dt = precision == ESMT_PRECISION_FP16   ? ESMTB_F16
                         : precision == ESMT_PRECISION_BF16 ? ESMTB_BF16
                                                            : ESMTB_F32;
  return ceiling(ctx, dt, m, n, k, repeats, gflops);
}

static esmt_status ceiling(esmt_context *ctx, esmtb_dtype dt, int m, int n, int k, int repeats,
                           double *gflops) {
  const char *fn = "esmt_context_gemm_ceiling";
  ESMT_CHECK_ARG(ctx && gflops, fn, "ctx and gflops must not be NULL");
  if (m < 1 || n < 1 || k < 1 || repeats < 1)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: need m, n, k, repeats >= 1", fn);
  const esmtb_ops *ops = ctx->backend->ops;
  if (!ops->gemm)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: backend %s has no gemm", fn, ops->name);
  esmtb_device *dev = NULL;
  esmtb_open_options oo = {sizeof oo, esmt_context_device_index(ctx), ctx->num_threads, 0};
  esmtb_status bs = ops->open(&oo, &dev);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "%s: ", fn);
  void *a = NULL, *b = NULL, *c = NULL;
  const uint64_t es = dt == ESMTB_F32 ? 4 : 2;
  uint64_t sa = (uint64_t)m * k * es, sb = (uint64_t)k * n * es, sc = (uint64_t)m * n * es;
  bs = ops->alloc(dev, ESMTB_MEM_DEVICE, sa, &a);
  if (!bs) bs = ops->alloc(dev, ESMTB_MEM_DEVICE, sb, &b);
  if (!bs) bs = ops->alloc(dev, ESMTB_MEM_DEVICE, sc, &c);
  /* Small non-zero values: timing must not depend on denormals or zeros. */
  if (!bs) bs = ops->memset_async(dev, a, 0x3c, sa, NULL);
  if (!bs) bs = ops->memset_async(dev, b, 0x3c, sb, NULL);
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g;
  g.dtype = dt;
  g.m = m; g.n = n; g.k = k;
  g.alpha = 1.0f;
  g.a = a; g.lda = k;
  g.b = b; g.ldb = n;
  g.c = c; g.ldc = n;
  double best = 0, start = esmt_now_s();
  for (int r = 0; r <= repeats && !bs; r++) {
    esmt_progress pr = {sizeof pr, "gemm", (uint64_t)r, (uint64_t)repeats + 1, "products",
                        esmt_now_s() - start, 0};
    if (esmt_report_progress(ctx, NULL, NULL, &pr)) {
      bs = ESMT_ERR_CANCELLED;
      esmt_fail(ESMT_ERR_CANCELLED, "stopped on request after %d of %d products", r, repeats + 1);
      break;
    }
    double t0 = esmt_now_s();
    bs = ops->gemm(dev, &g, NULL);
    if (!bs) bs = ops->stream_sync(dev, NULL);
    double secs = esmt_now_s() - t0;
    if (r > 0 && secs > 0) { /* run 0 warms up */
      double gf = 2.0 * m * (double)n * k / secs / 1e9;
      if (gf > best) best = gf;
    }
  }
  esmt_status st = bs ? esmt_fail_prefix((esmt_status)bs, "%s: ", fn) : ESMT_OK;
  if (c) ops->free(dev, ESMTB_MEM_DEVICE, c);
  if (b) ops->free(dev, ESMTB_MEM_DEVICE, b);
  if (a) ops->free(dev, ESMTB_MEM_DEVICE, a);
  ops->close(dev);
  if (!st) *gflops = best;
  return st;
}
