/* SPDX-License-Identifier: MIT */
/* The host link's bandwidth, measured through the backend's own copies
 * between page-locked host memory and device memory: what the planner's
 * expected streaming overhead is computed from (plan --link, the trainer's
 * automatic memory policy, bench). */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "context.h"

/* Best bytes per second of `repeats` timed copies after one warm-up. */
static esmtb_status time_copies(const esmtb_ops *ops, esmtb_device *dev, void *dst,
                                const void *src, uint64_t bytes, esmtb_copy_kind kind,
                                int repeats, double *best) {
  *best = 0;
  for (int r = 0; r <= repeats; r++) {
    double t0 = esmt_now_s();
    esmtb_status bs = ops->copy_async(dev, dst, src, bytes, kind, NULL);
    if (!bs) bs = ops->stream_sync(dev, NULL);
    if (bs) return bs;
    double secs = esmt_now_s() - t0;
    if (r > 0 && secs > 0 && (double)bytes / secs > *best) *best = (double)bytes / secs;
  }
  return ESMTB_OK;
}

esmt_status esmt_context_copy_bandwidth(esmt_context *ctx, uint64_t bytes, int repeats,
                                        double *h2d, double *d2h) {
  const char *fn = "esmt_context_copy_bandwidth";
  ESMT_CHECK_ARG(ctx && h2d && d2h, fn, "ctx, h2d and d2h must not be NULL");
  if (bytes < 4096 || repeats < 1)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: need bytes >= 4096 and repeats >= 1", fn);
  const esmtb_ops *ops = ctx->backend->ops;
  esmtb_device *dev = NULL;
  esmtb_open_options oo = {sizeof oo, esmt_context_device_index(ctx), ctx->num_threads, 0};
  esmtb_status bs = ops->open(&oo, &dev);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "%s: ", fn);
  void *host = NULL, *device = NULL;
  bs = ops->alloc(dev, ESMTB_MEM_PINNED_HOST, bytes, &host);
  if (!bs) bs = ops->alloc(dev, ESMTB_MEM_DEVICE, bytes, &device);
  if (!bs) memset(host, 0x3c, (size_t)bytes); /* touched: no first-use page faults timed */
  if (!bs) bs = ops->memset_async(dev, device, 0x3c, bytes, NULL);
  double up = 0, down = 0;
  if (!bs) bs = time_copies(ops, dev, device, host, bytes, ESMTB_COPY_H2D, repeats, &up);
  if (!bs) bs = time_copies(ops, dev, host, device, bytes, ESMTB_COPY_D2H, repeats, &down);
  esmt_status st = bs ? esmt_fail_prefix((esmt_status)bs, "%s: %s: ", fn, ops->name) : ESMT_OK;
  if (device) ops->free(dev, ESMTB_MEM_DEVICE, device);
  if (host) ops->free(dev, ESMTB_MEM_PINNED_HOST, host);
  ops->close(dev);
  if (!st) *h2d = up, *d2h = down;
  return st;
}
