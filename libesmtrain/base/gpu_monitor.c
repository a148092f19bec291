/* SPDX-License-Identifier: MIT */
/* NVML at run time (gpu_monitor.h). The few NVML types and calls used are
 * declared here from NVIDIA's documented C ABI (nvml.h is not needed to
 * build, and the core links no CUDA). */
#define _GNU_SOURCE
#include "gpu_monitor.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_return;          /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_dev *nvml_device;

typedef struct {                  /* nvmlPciInfo_t (v3) */
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
} nvml_pci_info;

typedef struct { unsigned gpu, memory; } nvml_utilization;            /* nvmlUtilization_t */
typedef struct { unsigned long long total, free, used; } nvml_memory;  /* nvmlMemory_t */

enum { NVML_TEMPERATURE_GPU = 0, NVML_NAME_LEN = 96 };

static struct {
  int ok;
  char why[512];
  nvml_return (*count)(unsigned *);
  nvml_return (*by_index)(unsigned, nvml_device *);
  nvml_return (*by_bus_id)(const char *, nvml_device *);
  nvml_return (*name)(nvml_device, char *, unsigned);
  nvml_return (*pci)(nvml_device, nvml_pci_info *);
  nvml_return (*util)(nvml_device, nvml_utilization *);
  nvml_return (*memory)(nvml_device, nvml_memory *);
  nvml_return (*temperature)(nvml_device, int, unsigned *);
  nvml_return (*power)(nvml_device, unsigned *);
  const char *(*error_string)(nvml_return);
} g_nvml;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const char *nvml_error(nvml_return rc) {
  const char *s = g_nvml.error_string ? g_nvml.error_string(rc) : NULL;
  return s ? s : "unknown NVML error";
}

static void load(void) {
  const char *env = getenv("ESMT_NVML_LIBRARY");
  const char *path = env && *env ? env : "libnvidia-ml.so.1";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(g_nvml.why, sizeof g_nvml.why,
             "NVIDIA's management library %s is not on this machine (no NVIDIA driver): %s",
             path, dlerror());
    return;
  }
  nvml_return (*init)(void) = (nvml_return(*)(void))dlsym(h, "nvmlInit_v2");
  *(void **)&g_nvml.count = dlsym(h, "nvmlDeviceGetCount_v2");
  *(void **)&g_nvml.by_index = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  *(void **)&g_nvml.by_bus_id = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
  *(void **)&g_nvml.name = dlsym(h, "nvmlDeviceGetName");
  *(void **)&g_nvml.pci = dlsym(h, "nvmlDeviceGetPciInfo_v3");
  *(void **)&g_nvml.util = dlsym(h, "nvmlDeviceGetUtilizationRates");
  *(void **)&g_nvml.memory = dlsym(h, "nvmlDeviceGetMemoryInfo");
  *(void **)&g_nvml.temperature = dlsym(h, "nvmlDeviceGetTemperature");
  *(void **)&g_nvml.power = dlsym(h, "nvmlDeviceGetPowerUsage");
  *(void **)&g_nvml.error_string = dlsym(h, "nvmlErrorString");
  if (!init || !g_nvml.count || !g_nvml.by_index || !g_nvml.memory) {
    snprintf(g_nvml.why, sizeof g_nvml.why,
             "%s lacks nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2 or "
             "nvmlDeviceGetMemoryInfo (a driver older than 2017?)", path);
    return; /* kept loaded: it may have started threads */
  }
  const nvml_return rc = init();
  if (rc != 0) {
    snprintf(g_nvml.why, sizeof g_nvml.why, "NVML did not start (nvmlInit: %s)", nvml_error(rc));
    return;
  }
  g_nvml.ok = 1; /* never shut down: other users in the process share NVML's count */
}

static esmt_status loaded(const char *fn) {
  pthread_once(&g_once, load);
  return g_nvml.ok ? ESMT_OK : esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: %s", fn, g_nvml.why);
}

/* Each figure on its own: one the device does not report stays -1. */
static void sample(nvml_device d, int index, esmt_gpu_sample *out) {
  esmt_gpu_sample s;
  memset(&s, 0, sizeof s);
  s.struct_size = out->struct_size;
  s.index = index;
  s.util_percent = s.memory_util_percent = s.temperature_c = s.power_w = -1;
  char name[NVML_NAME_LEN] = "";
  if (!g_nvml.name || g_nvml.name(d, name, sizeof name) != 0) snprintf(name, sizeof name, "GPU");
  snprintf(s.name, sizeof s.name, "%s", name);
  nvml_pci_info pci;
  if (g_nvml.pci && g_nvml.pci(d, &pci) == 0) {
    pci.bus_id[sizeof pci.bus_id - 1] = '\0';
    snprintf(s.pci_bus_id, sizeof s.pci_bus_id, "%s", pci.bus_id);
  }
  nvml_utilization u;
  if (g_nvml.util && g_nvml.util(d, &u) == 0) {
    s.util_percent = u.gpu;
    s.memory_util_percent = u.memory;
  }
  nvml_memory m;
  if (g_nvml.memory(d, &m) == 0) {
    s.memory_used_bytes = m.used;
    s.memory_total_bytes = m.total;
  }
  unsigned v;
  if (g_nvml.temperature && g_nvml.temperature(d, NVML_TEMPERATURE_GPU, &v) == 0)
    s.temperature_c = v;
  if (g_nvml.power && g_nvml.power(d, &v) == 0) s.power_w = v / 1000.0; /* milliwatts */
  memcpy(out, &s, out->struct_size < sizeof s ? out->struct_size : sizeof s);
}

esmt_status esmt_gpu_sample_all(esmt_gpu_sample *out, int capacity, int *count) {
  const char *fn = "esmt_gpu_sample_all";
  ESMT_CHECK_ARG(count, fn, "count must not be NULL");
  *count = 0;
  ESMT_CHECK_ARG(capacity >= 0 && (out || capacity == 0), fn,
                 "out must not be NULL when capacity > 0");
  const size_t stride = capacity ? out[0].struct_size : sizeof(esmt_gpu_sample);
  if (capacity) {
    esmt_status st = esmt_check_struct(fn, "esmt_gpu_sample", out[0].struct_size,
                                       offsetof(esmt_gpu_sample, power_w) + sizeof(double));
    if (st) return st;
  }
  esmt_status st = loaded(fn);
  if (st) return st;
  unsigned n = 0;
  const nvml_return rc = g_nvml.count(&n);
  if (rc != 0) return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: nvmlDeviceGetCount: %s", fn,
                                nvml_error(rc));
  if (n == 0) return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: NVML sees no NVIDIA GPU", fn);
  *count = (int)n;
  for (int i = 0; i < capacity && i < (int)n; i++) {
    esmt_gpu_sample *o = (esmt_gpu_sample *)((char *)out + (size_t)i * stride);
    o->struct_size = (uint32_t)stride;
    nvml_device d;
    if (g_nvml.by_index((unsigned)i, &d) != 0) {
      memset((char *)o + sizeof o->struct_size, 0, stride - sizeof o->struct_size);
      o->index = i;
      snprintf(o->name, sizeof o->name, "(not accessible)");
      o->util_percent = o->memory_util_percent = o->temperature_c = o->power_w = -1;
      continue;
    }
    sample(d, i, o);
  }
  return ESMT_OK;
}

esmt_status esmt_gpu_sample_bus_id(const char *bus_id, esmt_gpu_sample *out) {
  const char *fn = "esmt_gpu_sample_bus_id";
  ESMT_CHECK_ARG(bus_id && out, fn, "bus_id and out must not be NULL");
  esmt_status st = loaded(fn);
  if (st) return st;
  nvml_device d;
  nvml_return rc = g_nvml.by_bus_id ? g_nvml.by_bus_id(bus_id, &d) : -1;
  if (rc == 0) {
    sample(d, -1, out);
    return ESMT_OK;
  }
  /* Older NVML (or other spellings): compare the ids of every device. */
  unsigned n = 0;
  if (g_nvml.pci && g_nvml.count(&n) == 0)
    for (unsigned i = 0; i < n; i++) {
      nvml_pci_info pci;
      if (g_nvml.by_index(i, &d) != 0 || g_nvml.pci(d, &pci) != 0) continue;
      pci.bus_id[sizeof pci.bus_id - 1] = '\0';
      /* "00000000:3B:00.0" and "0000:3b:00.0" name one device */
      const char *a = strchr(pci.bus_id, ':'), *b = strchr(bus_id, ':');
      if (a && b && !strcasecmp(a, b) && strtoul(pci.bus_id, NULL, 16) == strtoul(bus_id, NULL, 16)) {
        sample(d, (int)i, out);
        return ESMT_OK;
      }
    }
  return esmt_fail(ESMT_ERR_BACKEND, "%s: NVML knows no GPU at PCI bus id %s%s%s", fn, bus_id,
                   rc > 0 ? ": " : "", rc > 0 ? nvml_error(rc) : "");
}
