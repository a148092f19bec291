/* SPDX-License-Identifier: MIT */
/* The core's flat view of a loaded backend: the plugin's esmtb_backend and
 * its groups (include/esmtrain/backend.h, ABI 2) resolved once, at load
 * time, into one table (ops_resolve.c), so that the core calls
 * ops->gemm(...) without asking for groups. Not part of the ABI: a group
 * the plugin lacks leaves its ops NULL here; the field comments are in the
 * public header's groups. */
#ifndef ESMTRAIN_OPS_TABLE_H
#define ESMTRAIN_OPS_TABLE_H

#include "esmtrain/backend.h"
#include "internal.h"

typedef struct esmtb_ops {
  uint32_t abi_major;        /* of the plugin's esmtb_backend */
  uint32_t abi_minor;
  uint32_t struct_size;      /* sizeof(esmtb_ops); a test may shorten it to hide ops */
  uint32_t caps;             /* esmtb_caps */
  const char *name;          /* "cpu", "turing_fp16", ... */
  const char *description;

  /* Availability, devices and score for this machine and job. */
  esmtb_status (*probe)(const esmtb_job *job, esmtb_probe *out);

  /* The "device" group. */
  esmtb_status (*open)(const esmtb_open_options *opts, esmtb_device **out);
  void (*close)(esmtb_device *dev);
  esmtb_status (*mem_info)(esmtb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes);

  esmtb_status (*alloc)(esmtb_device *dev, esmtb_mem_kind kind, size_t bytes, void **out);
  void (*free)(esmtb_device *dev, esmtb_mem_kind kind, void *ptr);
  esmtb_status (*memset_async)(esmtb_device *dev, void *dst, int value, size_t bytes,
                               esmtb_stream *s);
  esmtb_status (*copy_async)(esmtb_device *dev, void *dst, const void *src, size_t bytes,
                             esmtb_copy_kind kind, esmtb_stream *s);

  esmtb_status (*stream_create)(esmtb_device *dev, esmtb_stream **out);
  void (*stream_destroy)(esmtb_device *dev, esmtb_stream *s);
  esmtb_status (*stream_sync)(esmtb_device *dev, esmtb_stream *s);
  esmtb_status (*event_create)(esmtb_device *dev, esmtb_event **out);
  void (*event_destroy)(esmtb_device *dev, esmtb_event *e);
  esmtb_status (*event_record)(esmtb_device *dev, esmtb_event *e, esmtb_stream *s);
  esmtb_status (*stream_wait_event)(esmtb_device *dev, esmtb_stream *s, esmtb_event *e);
  esmtb_status (*event_sync)(esmtb_device *dev, esmtb_event *e);
  esmtb_status (*timing_event_create)(esmtb_device *dev, esmtb_event **out); /* 2.1, or NULL */
  esmtb_status (*event_elapsed)(esmtb_device *dev, esmtb_event *start, esmtb_event *end,
                                double *seconds);                           /* 2.1, or NULL */

  /* The "compute" group, and adamw of the "optimizer" group. */
  esmtb_status (*gemm)(esmtb_device *dev, const esmtb_gemm_args *a, esmtb_stream *s);
  esmtb_status (*embed_forward)(esmtb_device *dev, const esmtb_embed_args *a, esmtb_stream *s);
  esmtb_status (*embed_backward)(esmtb_device *dev, const esmtb_embed_args *a, esmtb_stream *s);
  esmtb_status (*layernorm_forward)(esmtb_device *dev, const esmtb_layernorm_args *a,
                                    esmtb_stream *s);
  esmtb_status (*layernorm_backward)(esmtb_device *dev, const esmtb_layernorm_args *a,
                                     esmtb_stream *s);
  esmtb_status (*add)(esmtb_device *dev, const esmtb_add_args *a, esmtb_stream *s);
  esmtb_status (*gelu_backward)(esmtb_device *dev, const esmtb_gelu_backward_args *a,
                                esmtb_stream *s);
  esmtb_status (*bias_grad)(esmtb_device *dev, const esmtb_bias_grad_args *a, esmtb_stream *s);
  esmtb_status (*attention_forward)(esmtb_device *dev, const esmtb_attention_args *a,
                                    esmtb_stream *s);
  esmtb_status (*attention_backward)(esmtb_device *dev, const esmtb_attention_args *a,
                                     esmtb_stream *s);
  esmtb_status (*xent)(esmtb_device *dev, const esmtb_xent_args *a, esmtb_stream *s);
  esmtb_status (*adamw)(esmtb_device *dev, const esmtb_adamw_args *a, esmtb_stream *s);
  esmtb_status (*sumsq)(esmtb_device *dev, const esmtb_sumsq_args *a, esmtb_stream *s);
  esmtb_status (*scale)(esmtb_device *dev, const esmtb_scale_args *a, esmtb_stream *s);
  esmtb_status (*convert)(esmtb_device *dev, const esmtb_convert_args *a, esmtb_stream *s);

  /* The "comm" group, then lion ("optimizer") and pci_bus_id ("device"):
   * a test that shortens struct_size to comm_unique_id hides all of these
   * but allreduce. */
  esmtb_status (*allreduce)(esmtb_device *dev, const esmtb_allreduce_args *a, esmtb_stream *s);
  esmtb_status (*comm_unique_id)(esmtb_device *dev, void *buf, size_t cap, size_t *len);
  esmtb_status (*comm_init)(esmtb_device *dev, const esmtb_comm_init_args *a);
  void (*comm_release)(esmtb_device *dev, int abort);

  esmtb_status (*reduce_scatter)(esmtb_device *dev, const esmtb_shard_args *a, esmtb_stream *s);
  esmtb_status (*allgather)(esmtb_device *dev, const esmtb_shard_args *a, esmtb_stream *s);

  esmtb_status (*lion)(esmtb_device *dev, const esmtb_lion_args *a, esmtb_stream *s);
  esmtb_status (*pci_bus_id)(esmtb_device *dev, char *buf, size_t cap);

  /* "compute", ABI 2.2: NULL when the plugin's group ends before it. */
  esmtb_status (*attention_probs)(esmtb_device *dev, const esmtb_attention_args *a,
                                  esmtb_stream *s);
  /* "compute", ABI 2.3: NULL when the plugin's group ends before it. */
  esmtb_status (*dropout)(esmtb_device *dev, const esmtb_dropout_args *a, esmtb_stream *s);
} esmtb_ops;

/* Checks `b` (the ABI major, its size, a name and probe, the required
 * groups) and fills `out` from its groups. On a refusal returns
 * ESMT_ERR_ABI with the reason in `why` (both ABI versions named when the
 * major differs); `out` is then unspecified. */
ESMT_HIDDEN esmt_status esmt_ops_resolve(const esmtb_backend *b, esmtb_ops *out, char *why,
                                         size_t why_cap);

/* For programs that load one backend themselves (the op tests and
 * benchmarks): init(host), resolved into a table that lives as long as the
 * process; NULL with the reason in `why`. */
ESMT_HIDDEN const esmtb_ops *esmt_ops_from_init(esmtb_init_fn init, const esmtb_host *host,
                                                char *why, size_t cap);

#endif
