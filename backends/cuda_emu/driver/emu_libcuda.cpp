/* SPDX-License-Identifier: MIT */
// Stand-ins for libcuda.so.1 and libnvidia-ml.so.1 (the driver API and NVML
// calls of the probe, backends/cuda_common/cuda_driver.c), describing the
// emulated GPUs from the same environment as the runtime (ESMT_EMU_*).
// Built twice, as libcuda.so.1 and as libnvidia-ml.so.1, into the build
// tree only; the emulated plugins load them by absolute path.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <strings.h>

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

// NVML (nvmlReturn_t: 0 success, 2 invalid argument, 6 not found). Free
// memory is the whole device: the probe runs before anything is allocated,
// and this library does not see the plugin's allocations. Utilisation,
// temperature and power are fixed per device (42 + d %, 51 + d C, 187.5 W)
// so that tests can recognise them where the core logs them.
struct nvml_memory {
  unsigned long long total, free, used;
};
struct nvml_pci_info {  // nvmlPciInfo_t v3
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
namespace {
int nvml_device_of(void *h) { return device((int)(uintptr_t)h - 1) ? (int)(uintptr_t)h - 1 : -1; }
}  // namespace
EXPORT int nvmlInit_v2(void) { return 0; }
EXPORT const char *nvmlErrorString(int rc) {
  return rc == 0 ? "Success" : rc == 2 ? "Invalid Argument" : rc == 6 ? "Not Found" : "Unknown Error";
}
EXPORT int nvmlDeviceGetCount_v2(unsigned *n) {
  if (!n) return 2;
  *n = (unsigned)device_count();
  return 0;
}
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) {
  if (!h || !device((int)i)) return 2;
  *h = (void *)(uintptr_t)(i + 1);
  return 0;
}
// Either spelling of the domain, any case (as NVML accepts).
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **h) {
  if (!id || !h) return 2;
  const char *tail = strchr(id, ':');
  for (int d = 0; tail && d < device_count(); d++) {
    char mine[32];
    cuemu::pci_bus_id(d, mine, sizeof mine, true);
    if (strtoul(id, NULL, 16) == 0 && !strcasecmp(strchr(mine, ':'), tail)) {
      *h = (void *)(uintptr_t)(d + 1);
      return 0;
    }
  }
  return 6;
}
EXPORT int nvmlDeviceGetName(void *h, char *name, unsigned len) {
  const int d = nvml_device_of(h);
  if (d < 0 || !name || !len) return 2;
  snprintf(name, len, "%s", device(d)->name);
  return 0;
}
EXPORT int nvmlDeviceGetPciInfo_v3(void *h, nvml_pci_info *p) {
  const int d = nvml_device_of(h);
  if (d < 0 || !p) return 2;
  memset(p, 0, sizeof *p);
  cuemu::pci_bus_id(d, p->bus_id, sizeof p->bus_id, true);
  snprintf(p->bus_id_legacy, sizeof p->bus_id_legacy, "0000:%02X:00.0", d + 1);
  p->bus = (unsigned)(d + 1);
  return 0;
}
EXPORT int nvmlDeviceGetMemoryInfo(void *h, nvml_memory *m) {
  const int d = nvml_device_of(h);
  if (!m || d < 0) return 2;
  m->total = device(d)->total_mem;
  m->free = m->total;
  m->used = 0;
  return 0;
}
EXPORT int nvmlDeviceGetUtilizationRates(void *h, unsigned *rates /* gpu, memory */) {
  const int d = nvml_device_of(h);
  if (d < 0 || !rates) return 2;
  rates[0] = (unsigned)(42 + d);
  rates[1] = 17;
  return 0;
}
EXPORT int nvmlDeviceGetTemperature(void *h, int sensor, unsigned *t) {
  const int d = nvml_device_of(h);
  if (d < 0 || sensor != 0 || !t) return 2;
  *t = (unsigned)(51 + d);
  return 0;
}
EXPORT int nvmlDeviceGetPowerUsage(void *h, unsigned *milliwatts) {
  if (nvml_device_of(h) < 0 || !milliwatts) return 2;
  *milliwatts = 187500;
  return 0;
}
