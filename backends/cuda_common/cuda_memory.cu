/* SPDX-License-Identifier: MIT */
// Device lifecycle, memory (device and pinned host, with an optional
// budget), async copies, streams and events over the CUDA runtime.
#include <stdlib.h>

#include "cuda_attention.h"
#include "cuda_kernels.cuh"

__thread const esmtb_device *cuda_current_dev;

uint64_t cuda_pool_reserved(int ordinal) {
  cudaMemPool_t pool;
  uint64_t v = 0;
  if (cudaDeviceGetDefaultMemPool(&pool, ordinal) != cudaSuccess ||
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return v;
}

esmtb_status cuda_budget_check(const esmtb_device *dev, size_t bytes, const char *what) {
  if (!dev || !dev->memory_limit) return 0;
  uint64_t pool = cuda_pool_reserved(dev->ordinal);
  if (dev->allocated + pool + bytes > dev->memory_limit && pool) {
    cudaMemPool_t p;  // give back what the pool caches but nothing uses
    if (cudaDeviceGetDefaultMemPool(&p, dev->ordinal) == cudaSuccess) cudaMemPoolTrimTo(p, 0);
    cudaGetLastError();
    pool = cuda_pool_reserved(dev->ordinal);
  }
  if (dev->allocated + pool + bytes <= dev->memory_limit) return 0;
  return cuda_fail(ESMTB_ERR_OUT_OF_MEMORY,
                   "%s: %zu bytes would exceed device_memory_limit (%llu of %llu in use: %llu "
                   "allocated, %llu in stream-ordered scratch); lower the micro-batch, turn on "
                   "offload.recompute or raise the limit",
                   what, bytes, (unsigned long long)(dev->allocated + pool),
                   (unsigned long long)dev->memory_limit, (unsigned long long)dev->allocated,
                   (unsigned long long)pool);
}

static esmtb_status c_open(const esmtb_open_options *opts, esmtb_device **out) {
  if (!out) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "open: out is NULL");
  *out = NULL;
  int ordinal = opts ? opts->device_index : 0;
  int count = 0;
  esmtb_status st = cuda_check(cudaGetDeviceCount(&count), "open: cudaGetDeviceCount");
  if (st) return st;
  if (ordinal < 0 || ordinal >= count)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "open: device %d does not exist (%d CUDA devices)", ordinal, count);
  st = cuda_check(cudaSetDevice(ordinal), "open: cudaSetDevice");
  if (st) return st;
  esmtb_device *dev = (esmtb_device *)calloc(1, sizeof *dev);
  if (!dev) return cuda_fail(ESMTB_ERR_OUT_OF_MEMORY, "open: out of host memory");
  dev->ordinal = ordinal;
  dev->num_threads = opts ? opts->num_threads : 0;
  dev->memory_limit = opts ? opts->device_memory_limit : 0;
  pthread_mutex_init(&dev->lock, NULL);
  // The async pool keeps what scratch frees instead of returning it to the
  // driver at every synchronisation (its default threshold is 0: a malloc
  // and free per step); under a budget cuda_budget_check counts and trims it.
  cudaMemPool_t pool;
  uint64_t keep = UINT64_MAX;
  if (cudaDeviceGetDefaultMemPool(&pool, ordinal) == cudaSuccess)
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  cudaGetLastError();
  *out = dev;
  return 0;
}

static void c_close(esmtb_device *dev) {
  if (!dev) return;
  cudaSetDevice(dev->ordinal);
  cudaDeviceSynchronize();
  cuda_gemm_release(dev);
  pthread_mutex_destroy(&dev->lock);
  free(dev);
}

static esmtb_status c_mem_info(esmtb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes) {
  size_t f = 0, t = 0;
  cudaSetDevice(dev->ordinal);
  esmtb_status st = cuda_check(cudaMemGetInfo(&f, &t), "mem_info");
  if (st) return st;
  if (dev->memory_limit) {
    const unsigned long long used = dev->allocated + cuda_pool_reserved(dev->ordinal);
    unsigned long long left = dev->memory_limit > used ? dev->memory_limit - used : 0;
    if (left < f) f = left;
    t = dev->memory_limit;
  }
  if (free_bytes) *free_bytes = f;
  if (total_bytes) *total_bytes = t;
  return 0;
}

static esmtb_status c_pci_bus_id(esmtb_device *dev, char *buf, size_t cap) {
  if (!dev || !buf || cap < 13) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "pci_bus_id: bad buffer");
  return cuda_check(cudaDeviceGetPCIBusId(buf, (int)cap, dev->ordinal), "pci_bus_id");
}

// Device allocations carry their size in a 256-byte prefix so free() keeps
// the budget exact; the payload keeps cudaMalloc's 256-byte alignment.
#define PREFIX 256

static esmtb_status c_alloc(esmtb_device *dev, esmtb_mem_kind kind, size_t bytes, void **out) {
  if (!dev || !out) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "alloc: NULL argument");
  *out = NULL;
  cudaSetDevice(dev->ordinal);
  if (kind == ESMTB_MEM_PINNED_HOST)
    return cuda_check(cudaMallocHost(out, bytes ? bytes : 1), "alloc: cudaMallocHost");
  esmtb_status bs = cuda_budget_check(dev, bytes, "alloc");
  if (bs) return bs;
  char *p = NULL;
  esmtb_status st = cuda_check(cudaMalloc((void **)&p, bytes + PREFIX), "alloc: cudaMalloc");
  if (st) return st;
  unsigned long long n = bytes;
  st = cuda_check(cudaMemcpy(p, &n, sizeof n, cudaMemcpyHostToDevice), "alloc: size record");
  if (st) { cudaFree(p); return st; }
  dev->allocated += bytes;
  *out = p + PREFIX;
  return 0;
}

static void c_free(esmtb_device *dev, esmtb_mem_kind kind, void *ptr) {
  if (!ptr) return;
  cudaSetDevice(dev->ordinal);
  if (kind == ESMTB_MEM_PINNED_HOST) { cudaFreeHost(ptr); return; }
  char *p = (char *)ptr - PREFIX;
  unsigned long long n = 0;
  if (cudaMemcpy(&n, p, sizeof n, cudaMemcpyDeviceToHost) == cudaSuccess) dev->allocated -= n;
  cudaFree(p);
}

static esmtb_status c_memset(esmtb_device *dev, void *dst, int value, size_t bytes, esmtb_stream *s) {
  cuda_use_device(dev);
  return cuda_check(cudaMemsetAsync(dst, value, bytes, cuda_stream_of(s)), "memset_async");
}

static esmtb_status c_copy(esmtb_device *dev, void *dst, const void *src, size_t bytes,
                           esmtb_copy_kind kind, esmtb_stream *s) {
  cuda_use_device(dev);
  cudaMemcpyKind k = kind == ESMTB_COPY_H2D   ? cudaMemcpyHostToDevice
                     : kind == ESMTB_COPY_D2H ? cudaMemcpyDeviceToHost
                                              : cudaMemcpyDeviceToDevice;
  return cuda_check(cudaMemcpyAsync(dst, src, bytes, k, cuda_stream_of(s)), "copy_async");
}

static esmtb_status c_stream_create(esmtb_device *dev, esmtb_stream **out) {
  cuda_use_device(dev);
  cudaStream_t s;
  esmtb_status st = cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream_create");
  *out = st ? NULL : (esmtb_stream *)s;
  return st;
}
static void c_stream_destroy(esmtb_device *dev, esmtb_stream *s) {
  cuda_use_device(dev);
  if (s) cudaStreamDestroy(cuda_stream_of(s));
}
static esmtb_status c_stream_sync(esmtb_device *dev, esmtb_stream *s) {
  cuda_use_device(dev);
  return cuda_check(cudaStreamSynchronize(cuda_stream_of(s)), "stream_sync");
}
static esmtb_status c_event_create(esmtb_device *dev, esmtb_event **out) {
  cuda_use_device(dev);
  cudaEvent_t e;
  esmtb_status st = cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event_create");
  *out = st ? NULL : (esmtb_event *)e;
  return st;
}
static esmtb_status c_timing_event_create(esmtb_device *dev, esmtb_event **out) {
  cuda_use_device(dev);
  cudaEvent_t e;
  esmtb_status st = cuda_check(cudaEventCreateWithFlags(&e, cudaEventDefault), "timing_event_create");
  *out = st ? NULL : (esmtb_event *)e;
  return st;
}
static esmtb_status c_event_elapsed(esmtb_device *dev, esmtb_event *a, esmtb_event *b,
                                    double *seconds) {
  cuda_use_device(dev);
  float ms = 0;
  esmtb_status st = cuda_check(cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b),
                               "event_elapsed");
  *seconds = st ? 0.0 : 1e-3 * (double)ms;
  return st;
}
static void c_event_destroy(esmtb_device *dev, esmtb_event *e) {
  cuda_use_device(dev);
  if (e) cudaEventDestroy((cudaEvent_t)e);
}
static esmtb_status c_event_record(esmtb_device *dev, esmtb_event *e, esmtb_stream *s) {
  cuda_use_device(dev);
  return cuda_check(cudaEventRecord((cudaEvent_t)e, cuda_stream_of(s)), "event_record");
}
static esmtb_status c_stream_wait_event(esmtb_device *dev, esmtb_stream *s, esmtb_event *e) {
  cuda_use_device(dev);
  return cuda_check(cudaStreamWaitEvent(cuda_stream_of(s), (cudaEvent_t)e, 0), "stream_wait_event");
}
static esmtb_status c_event_sync(esmtb_device *dev, esmtb_event *e) {
  cuda_use_device(dev);
  return cuda_check(cudaEventSynchronize((cudaEvent_t)e), "event_sync");
}

// Defined in cuda_elementwise.cu.
esmtb_status cuda_scale(esmtb_device *, const esmtb_scale_args *, esmtb_stream *);
esmtb_status cuda_sumsq(esmtb_device *, const esmtb_sumsq_args *, esmtb_stream *);
esmtb_status cuda_convert(esmtb_device *, const esmtb_convert_args *, esmtb_stream *);

void cuda_fill_common_ops(cuda_tables *t) {
  esmtb_device_ops *d = &t->device;
  d->open = c_open;
  d->close = c_close;
  d->mem_info = c_mem_info;
  d->pci_bus_id = c_pci_bus_id;
  d->alloc = c_alloc;
  d->free = c_free;
  d->memset_async = c_memset;
  d->copy_async = c_copy;
  d->stream_create = c_stream_create;
  d->stream_destroy = c_stream_destroy;
  d->stream_sync = c_stream_sync;
  d->event_create = c_event_create;
  d->event_destroy = c_event_destroy;
  d->event_record = c_event_record;
  d->stream_wait_event = c_stream_wait_event;
  d->event_sync = c_event_sync;
  d->timing_event_create = c_timing_event_create;
  d->event_elapsed = c_event_elapsed;
  t->compute.scale = cuda_scale;
  t->compute.sumsq = cuda_sumsq;
  t->compute.convert = cuda_convert;
}

void cuda_fill_compute_ops(cuda_tables *t) {
  esmtb_compute_ops *c = &t->compute;
  c->gemm = cuda_gemm;
  c->embed_forward = cuda_embed_forward;
  c->embed_backward = cuda_embed_backward;
  c->layernorm_forward = cuda_layernorm_forward;
  c->layernorm_backward = cuda_layernorm_backward;
  c->add = cuda_add;
  c->gelu_backward = cuda_gelu_backward;
  c->bias_grad = cuda_bias_grad;
  c->xent = cuda_xent;
  c->dropout = cuda_dropout;
  t->optimizer.adamw = cuda_adamw;
  t->optimizer.lion = cuda_lion;
  cuda_fill_attention_ops(c);
}

int cuda_ops_complete(const cuda_tables *t, const char **missing) {
  const esmtb_compute_ops *ops = &t->compute;
  struct { const void *fn; const char *name; } need[] = {
      {(const void *)ops->gemm, "gemm"},
      {(const void *)ops->embed_forward, "embed_forward"},
      {(const void *)ops->embed_backward, "embed_backward"},
      {(const void *)ops->layernorm_forward, "layernorm_forward"},
      {(const void *)ops->layernorm_backward, "layernorm_backward"},
      {(const void *)ops->add, "add"},
      {(const void *)ops->gelu_backward, "gelu_backward"},
      {(const void *)ops->bias_grad, "bias_grad"},
      {(const void *)ops->attention_forward, "attention_forward"},
      {(const void *)ops->attention_backward, "attention_backward"},
      {(const void *)ops->xent, "xent"},
      {(const void *)t->optimizer.adamw, "adamw"},
  };
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (!need[i].fn) {
      if (missing) *missing = need[i].name;
      return 0;
    }
  return 1;
}
