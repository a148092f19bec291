// Stand-ins for libcuda.so.1 and libnvidia-ml.so.1 (the driver API and NVML
// calls of the probe, backends/cuda_common/cuda_driver.c), describing the
// emulated GPUs from the same environment as the runtime (ESMT_EMU_*).
// Built twice, as libcuda.so.1 and as libnvidia-ml.so.1, into the build
// tree only; the emulated plugins load them by absolute path.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "emu_internal.h"

using cuemu::device;
using cuemu::device_count;

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {
bool g_init;
int driver_version() {
  const char *v = getenv("ESMT_EMU_DRIVER_VERSION");
  return v && *v ? atoi(v) : CUDART_VERSION;
}
}  // namespace

// Driver API (CUresult: 0 success, 3 not initialised, 101 invalid device).
EXPORT int cuInit(unsigned flags) {
  if (flags) return 1;
  g_init = true;
  return 0;
}
EXPORT int cuDriverGetVersion(int *v) {
  if (!v) return 1;
  *v = driver_version();
  return 0;
}
EXPORT int cuDeviceGetCount(int *n) {
  if (!n) return 1;
  if (!g_init) return 3;
  *n = device_count();
  return 0;
}
EXPORT int cuDeviceGet(int *dev, int ordinal) {
  if (!dev) return 1;
  if (!g_init) return 3;
  if (!device(ordinal)) return 101;
  *dev = ordinal;
  return 0;
}
EXPORT int cuDeviceGetName(char *name, int len, int dev) {
  if (!device(dev)) return 101;
  if (!name || len <= 0) return 1;
  snprintf(name, (size_t)len, "%s", device(dev)->name);
  return 0;
}
EXPORT int cuDeviceGetAttribute(int *v, int attr, int dev) {
  if (!device(dev)) return 101;
  if (!v) return 1;
  switch (attr) {
    case 75: *v = device(dev)->sm_major; return 0;  // COMPUTE_CAPABILITY_MAJOR
    case 76: *v = device(dev)->sm_minor; return 0;  // COMPUTE_CAPABILITY_MINOR
    case 16: *v = device(dev)->sm_count; return 0;  // MULTIPROCESSOR_COUNT
    default: return 1;
  }
}
EXPORT int cuDeviceTotalMem_v2(size_t *bytes, int dev) {
  if (!device(dev)) return 101;
  if (!bytes) return 1;
  *bytes = device(dev)->total_mem;
  return 0;
}

// NVML (nvmlReturn_t: 0 success, 2 invalid argument). Free memory is the
// whole device: the probe runs before anything is allocated.
struct nvml_memory {
  unsigned long long total, free, used;
};
EXPORT int nvmlInit_v2(void) { return 0; }
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) {
  if (!h || !device((int)i)) return 2;
  *h = (void *)(uintptr_t)(i + 1);
  return 0;
}
EXPORT int nvmlDeviceGetMemoryInfo(void *h, nvml_memory *m) {
  const int d = (int)(uintptr_t)h - 1;
  if (!m || !device(d)) return 2;
  m->total = device(d)->total_mem;
  m->free = m->total;
  m->used = 0;
  return 0;
}
