/* SPDX-License-Identifier: MIT */
// Devices, versions and function attributes of the emulated runtime, and
// the statistics written at exit (ESMT_EMU_STATS=FILE).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "emu_private.h"

using namespace cuemu;

namespace {
int driver_version() {
  const char *v = getenv("ESMT_EMU_DRIVER_VERSION");
  return v && *v ? atoi(v) : CUDART_VERSION;
}

// Written when the plugin is unloaded or the process exits.
struct stats_at_exit {
  ~stats_at_exit() {
    const char *path = getenv("ESMT_EMU_STATS");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    uint64_t kernels = 0, blocks = 0;
    kernel_counts(&kernels, &blocks);
    fprintf(f, "{\"kernels\": %llu, \"blocks\": %llu, \"reports\": %llu, ",
            (unsigned long long)kernels, (unsigned long long)blocks,
            (unsigned long long)report_count());
    memory_stats_json(f);
    fprintf(f, "}\n");
    fclose(f);
  }
} g_stats;
}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count) return record_error(cudaErrorInvalidValue);
  *count = 0;
  if (driver_version() < CUDART_VERSION) return record_error(cudaErrorInsufficientDriver);
  *count = device_count();
  return *count ? cudaSuccess : record_error(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int d) {
  if (driver_version() < CUDART_VERSION) return record_error(cudaErrorInsufficientDriver);
  if (!device(d)) return record_error(device_count() ? cudaErrorInvalidDevice : cudaErrorNoDevice);
  set_current_device(d);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d) {
  if (!d) return record_error(cudaErrorInvalidValue);
  *d = current_device();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
  const device_config *c = device(d);
  if (!p) return record_error(cudaErrorInvalidValue);
  if (!c) return record_error(device_count() ? cudaErrorInvalidDevice : cudaErrorNoDevice);
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", c->name);
  p->totalGlobalMem = c->total_mem;
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = c->smem_optin;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->major = c->sm_major;
  p->minor = c->sm_minor;
  p->multiProcessorCount = c->sm_count;
  p->l2CacheSize = 40 << 20;
  p->pciBusID = d + 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int d) {
  if (!buf || len <= 0) return record_error(cudaErrorInvalidValue);
  if (!device(d)) return record_error(cudaErrorInvalidDevice);
  cuemu::pci_bus_id(d, buf, (size_t)len, false);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int d) {
  const device_config *c = device(d);
  if (!value) return record_error(cudaErrorInvalidValue);
  if (!c) return record_error(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMultiProcessorCount: *value = c->sm_count; break;
    case cudaDevAttrComputeCapabilityMajor: *value = c->sm_major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = c->sm_minor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)c->smem_optin; break;
    default: return record_error(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) {
  if (!v) return record_error(cudaErrorInvalidValue);
  *v = driver_version();
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
  if (!v) return record_error(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *fn, cudaFuncAttribute attr, int value) {
  if (!fn) return record_error(cudaErrorInvalidDeviceFunction);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return record_error(cudaErrorInvalidValue);
  const device_config *c = device(current_device());
  if (!c) return record_error(cudaErrorInvalidDevice);
  if (value < 0 || (size_t)value > c->smem_optin) {
    report(current_device(), "api",
           "cudaFuncSetAttribute: %d bytes of dynamic shared memory exceed sm_%d%d's %zu",
           value, c->sm_major, c->sm_minor, c->smem_optin);
    return record_error(cudaErrorInvalidValue);
  }
  set_max_dynamic_smem(fn, value);
  return cudaSuccess;
}

}  // extern "C"
