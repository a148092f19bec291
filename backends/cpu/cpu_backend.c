/* SPDX-License-Identifier: MIT */
/* cpu.so: entry points, probe, device, memory and (synchronous) streams.
 * Kernels live in ops_*.c. */
#define _GNU_SOURCE
#include "cpu_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t meminfo_kb(const char *key) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  uint64_t v = 0;
  size_t klen = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      v = strtoull(line + klen + 1, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

static void cpu_model_name(char *out, size_t cap) {
  snprintf(out, cap, "CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *colon = strchr(line, ':');
      if (colon) {
        colon++;
        while (*colon == ' ') colon++;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(out, cap, "%s", colon);
      }
      break;
    }
  }
  fclose(f);
}

static esmtb_status cpu_probe(const esmtb_job *job, esmtb_probe *out) {
  (void)job;
  if (!out) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu probe: out is NULL");
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->available = 1;
  out->score = ESMTB_SCORE_CPU;
  out->device_count = 1;
  esmtb_device_desc *d = &out->devices[0];
  cpu_model_name(d->name, sizeof d->name);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  d->total_bytes = (pages > 0 && page > 0) ? (uint64_t)pages * (uint64_t)page : 0;
  d->free_bytes = meminfo_kb("MemAvailable") * 1024u;
  esmtb_status st = cpu_blas_load();
  if (st) {
    out->available = 0;
    out->score = 0;
    snprintf(out->reason, sizeof out->reason, "%s", cpu_blas_load_error());
    return 0;
  }
  snprintf(out->reason, sizeof out->reason, "fp32 math (f32/f16/bf16 data) on %ld threads, OpenBLAS %s kernels",
           sysconf(_SC_NPROCESSORS_ONLN), cpu_blas_core());
  return 0;
}

static esmtb_status cpu_open(const esmtb_open_options *opts, esmtb_device **out) {
  if (!out) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu open: out is NULL");
  *out = NULL;
  esmtb_status st = cpu_blas_load();
  if (st) return st;
  esmtb_device *dev = calloc(1, sizeof *dev);
  if (!dev) return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu open: out of memory");
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  dev->num_threads = (opts && opts->num_threads > 0) ? opts->num_threads : (int)(cores > 0 ? cores : 1);
  dev->memory_limit = opts ? opts->device_memory_limit : 0;
  cpu_blas_set_threads(dev->num_threads);
  *out = dev;
  return 0;
}

static void cpu_close(esmtb_device *dev) { free(dev); }

static esmtb_status cpu_mem_info(esmtb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes) {
  esmtb_probe p;
  cpu_probe(NULL, &p);
  uint64_t total = p.devices[0].total_bytes, avail = p.devices[0].free_bytes;
  if (dev && dev->memory_limit) {
    total = dev->memory_limit;
    avail = dev->allocated < total ? total - dev->allocated : 0;
  }
  if (free_bytes) *free_bytes = avail;
  if (total_bytes) *total_bytes = total;
  return 0;
}

/* Allocations carry a 64-byte header with their size so that free() can
 * keep the memory-limit accounting exact; the payload stays 64-aligned. */
#define HDR 64

static esmtb_status cpu_alloc(esmtb_device *dev, esmtb_mem_kind kind, size_t bytes, void **out) {
  if (!dev || !out) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu alloc: NULL argument");
  *out = NULL;
  /* As on CUDA, only device memory counts against the limit (pinned host
   * buffers are the offload's, which the planner counts apart). */
  const int counted = kind == ESMTB_MEM_DEVICE;
  if (counted && dev->memory_limit && dev->allocated + bytes > dev->memory_limit)
    return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu alloc: %zu bytes would exceed the memory limit (%llu of %llu in use)",
                    bytes, (unsigned long long)dev->allocated,
                    (unsigned long long)dev->memory_limit);
  size_t total = ((bytes + HDR + 63) / 64) * 64;
  unsigned char *p = aligned_alloc(64, total);
  if (!p) return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu alloc: out of host memory allocating %zu bytes", bytes);
  memcpy(p, &bytes, sizeof bytes);
  if (counted) dev->allocated += bytes;
  *out = p + HDR;
  return 0;
}

static void cpu_free(esmtb_device *dev, esmtb_mem_kind kind, void *ptr) {
  if (!ptr) return;
  unsigned char *p = (unsigned char *)ptr - HDR;
  size_t bytes;
  memcpy(&bytes, p, sizeof bytes);
  if (dev && kind == ESMTB_MEM_DEVICE) dev->allocated -= bytes;
  free(p);
}

static esmtb_status cpu_memset(esmtb_device *dev, void *dst, int value, size_t bytes,
                               esmtb_stream *s) {
  (void)dev; (void)s;
  if (bytes) memset(dst, value, bytes);
  return 0;
}

static esmtb_status cpu_copy(esmtb_device *dev, void *dst, const void *src, size_t bytes,
                             esmtb_copy_kind kind, esmtb_stream *s) {
  (void)dev; (void)kind; (void)s;
  if (bytes) memmove(dst, src, bytes);
  return 0;
}

/* Work runs synchronously on the calling thread, so streams and events are
 * tokens that only need distinct addresses. */
struct esmtb_stream { int unused; };
/* The stream is synchronous: an event completes when it is recorded, and
 * a timing event keeps the host clock of that moment. */
struct esmtb_event { double recorded_s; };

static esmtb_status cpu_stream_create(esmtb_device *dev, esmtb_stream **out) {
  (void)dev;
  *out = calloc(1, sizeof **out);
  return *out ? 0 : cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu stream_create: out of memory");
}
static void cpu_stream_destroy(esmtb_device *dev, esmtb_stream *s) { (void)dev; free(s); }
static esmtb_status cpu_stream_sync(esmtb_device *dev, esmtb_stream *s) {
  (void)dev; (void)s;
  return 0;
}
static esmtb_status cpu_event_create(esmtb_device *dev, esmtb_event **out) {
  (void)dev;
  *out = calloc(1, sizeof **out);
  return *out ? 0 : cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu event_create: out of memory");
}
static void cpu_event_destroy(esmtb_device *dev, esmtb_event *e) { (void)dev; free(e); }
static esmtb_status cpu_event_record(esmtb_device *dev, esmtb_event *e, esmtb_stream *s) {
  (void)dev; (void)s;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  e->recorded_s = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  return 0;
}
static esmtb_status cpu_event_elapsed(esmtb_device *dev, esmtb_event *a, esmtb_event *b,
                                      double *seconds) {
  (void)dev;
  *seconds = b->recorded_s - a->recorded_s;
  return 0;
}
static esmtb_status cpu_stream_wait_event(esmtb_device *dev, esmtb_stream *s, esmtb_event *e) {
  (void)dev; (void)e; (void)s;
  return 0;
}
static esmtb_status cpu_event_sync(esmtb_device *dev, esmtb_event *e) {
  (void)dev; (void)e;
  return 0;
}

static const esmtb_device_ops g_cpu_device = {
    .struct_size = sizeof(esmtb_device_ops),
    .version = ESMTB_DEVICE_OPS_VERSION,
    .open = cpu_open,
    .close = cpu_close,
    .mem_info = cpu_mem_info,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset_async = cpu_memset,
    .copy_async = cpu_copy,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_sync = cpu_stream_sync,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_sync = cpu_event_sync,
    .timing_event_create = cpu_event_create,
    .event_elapsed = cpu_event_elapsed,
};

static const esmtb_compute_ops g_cpu_compute = {
    .struct_size = sizeof(esmtb_compute_ops),
    .version = ESMTB_COMPUTE_OPS_VERSION,
    .gemm = cpu_gemm,
    .embed_forward = cpu_embed_forward,
    .embed_backward = cpu_embed_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .add = cpu_add,
    .gelu_backward = cpu_gelu_backward,
    .bias_grad = cpu_bias_grad,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .attention_probs = cpu_attention_probs,
    .xent = cpu_xent,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .convert = cpu_convert,
    .dropout = cpu_dropout,
};

static const esmtb_optimizer_ops g_cpu_optimizer = {
    .struct_size = sizeof(esmtb_optimizer_ops),
    .version = ESMTB_OPTIMIZER_OPS_VERSION,
    .adamw = cpu_adamw,
    .lion = cpu_lion,
};

/* No "comm" group: one device, no communicator. */
static const void *cpu_group(const char *name, uint32_t version) {
  if (!strcmp(name, ESMTB_GROUP_DEVICE) && version == ESMTB_DEVICE_OPS_VERSION)
    return &g_cpu_device;
  if (!strcmp(name, ESMTB_GROUP_COMPUTE) && version == ESMTB_COMPUTE_OPS_VERSION)
    return &g_cpu_compute;
  if (!strcmp(name, ESMTB_GROUP_OPTIMIZER) && version == ESMTB_OPTIMIZER_OPS_VERSION)
    return &g_cpu_optimizer;
  return NULL;
}

static const esmtb_backend g_cpu_backend = {
    .abi_major = ESMTB_ABI_MAJOR,
    .abi_minor = ESMTB_ABI_MINOR,
    .struct_size = sizeof(esmtb_backend),
    /* F16/BF16: every op takes them (fp32 math, cpu_half.h) */
    .caps = ESMTB_CAP_HOST_ADDRESSABLE | ESMTB_CAP_F32 | ESMTB_CAP_F16 | ESMTB_CAP_BF16 |
            ESMTB_CAP_VARLEN,
    .name = "cpu",
    .description = "fp32 math on the host (f32/f16/bf16 activations): OpenBLAS GEMMs, OpenMP kernels",
    .probe = cpu_probe,
    .group = cpu_group,
};

ESMTB_EXPORT const esmtb_backend *esmt_backend_init(const esmtb_host *host) {
  cpu_host = host;
  return &g_cpu_backend;
}

/* Always runnable, and the lowest priority: any usable GPU wins. */
ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job) {
  (void)job;
  return ESMTB_SCORE_CPU;
}
