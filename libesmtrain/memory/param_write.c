/* SPDX-License-Identifier: MIT */
/* Host weights into every copy the parameter memory keeps of them: the
 * frozen prefix's host master (frozen_master.c), the master or its shard,
 * the fp32 LayerNorm copy, the half compute copy and ZeRO-3's end parts
 * (weight_gather.c); and what every rank holds whole, for the start's
 * check that the ranks agree. */
#include <string.h>

#include "esmtrain/backend.h"
#include "param_layer.h"
#include "weight_gather.h"

esmt_status esmt_param_write_host(esmt_param_memory *p, const float *host, uint64_t off,
                                  uint64_t n) {
  const char *fn = "writing the sharded weights";
  const esmt_param_env *e = &p->env;
  const uint64_t hi = off + n;
  esmtb_status bs = 0;
  esmt_param_frozen_write(p, host, off, n);
  uint64_t a = off > p->master_lo ? off : p->master_lo, b = hi < p->master_hi ? hi : p->master_hi;
  if (a < b && p->offload) /* the master's shard in host memory (offload.c) */
    memcpy(p->master + (a - p->master_lo), host + (a - off), (size_t)(b - a) * sizeof(float));
  else if (a < b)
    bs = e->ops->copy_async(e->dev, p->master + (a - p->master_lo), host + (a - off),
                            (b - a) * sizeof(float), ESMTB_COPY_H2D, e->stream);
  /* a compute copy of its own in fp32 (offload): whole on the device, or
   * ZeRO-3's shard */
  if (!bs && n && p->compute32 && p->compute32 != p->master) {
    const uint64_t c_hi = p->wgather ? p->master_hi : e->total;
    a = off > p->compute_lo ? off : p->compute_lo;
    b = hi < c_hi ? hi : c_hi;
    if (a < b)
      bs = e->ops->copy_async(e->dev, p->compute32 + (a - p->compute_lo), host + (a - off),
                              (b - a) * sizeof(float), ESMTB_COPY_H2D, e->stream);
  }
  for (int i = 0; !bs && p->norm_dev && i < e->n_norm; i++) {
    const uint64_t o = e->norm_offs[i], end = o + (uint64_t)e->d;
    a = off > o ? off : o;
    b = hi < end ? hi : end;
    if (a < b)
      bs = e->ops->copy_async(e->dev, p->norm_dev + (uint64_t)i * e->d + (a - o), host + (a - off),
                              (b - a) * sizeof(float), ESMTB_COPY_H2D, e->stream);
  }
  if (!bs) bs = e->ops->stream_sync(e->dev, e->stream);
  if (bs) return esmt_fail_prefix((esmt_status)bs, "%s: ", fn);
  esmt_status st = ESMT_OK;
  if (p->compute_lowp) { /* the half copy: whole at ZeRO-2, the shard at ZeRO-3 */
    const uint64_t c_hi = p->wgather ? p->master_hi : e->total;
    a = off > p->compute_lo ? off : p->compute_lo;
    b = hi < c_hi ? hi : c_hi;
    if (a < b)
      st = esmt_param_upload_converted(p, (char *)p->compute_lowp + (a - p->compute_lo) * e->esize,
                                       host + (a - off), b - a);
  }
  if (!st && p->wgather) st = esmt_weight_gather_write_ends(p, host, off, n);
  return st;
}

esmt_status esmt_param_master_upload(esmt_param_memory *p, const float *host) {
  return esmt_param_write_host(p, host, 0, p->env.total);
}

void esmt_param_replicated(const esmt_param_memory *p, const void **buf, uint64_t *bytes) {
  const esmt_param_env *e = &p->env;
  if (p->wgather) { /* ZeRO-3: the end parts (the layers are nobody's whole) */
    *buf = p->wgather->ends;
    *bytes = (p->wgather->first_n + p->wgather->last_n) * e->esize;
  } else if (esmt_param_master_sharded(p) || (p->offload && !p->stream)) {
    /* ZeRO-2 in half: the half copy; offload: the device's compute copy
     * (the master is in host memory, and under ZeRO a shard) */
    *buf = p->compute_lowp ? p->compute_lowp : (void *)p->compute32;
    *bytes = e->total * e->esize;
  } else {
    *buf = p->master;
    *bytes = e->total * sizeof(float);
  }
}
