/* SPDX-License-Identifier: MIT */
/* Device discovery through the driver API and NVML, without contexts. */
#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef int (*fn_init)(unsigned);
typedef int (*fn_int)(int *);
typedef int (*fn_get)(int *, int);
typedef int (*fn_name)(char *, int, int);
typedef int (*fn_attr)(int *, int, int);
typedef int (*fn_mem)(size_t *, int);
typedef int (*fn_nvml_init)(void);
typedef int (*fn_nvml_handle)(unsigned, void **);
typedef struct {
  unsigned long long total, free, used;
} nvml_memory;
typedef int (*fn_nvml_mem)(void *, nvml_memory *);

enum { CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76 }; /* CUdevice_attribute values */

static cuda_driver_info g_info;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* NVML's free memory per device; absent NVML leaves free_bytes 0. */
static void query_nvml(void) {
  void *h = dlopen(ESMT_NVML_LIB, RTLD_LAZY | RTLD_LOCAL);
  if (!h) return;
  fn_nvml_init init = (fn_nvml_init)dlsym(h, "nvmlInit_v2");
  fn_nvml_handle handle = (fn_nvml_handle)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  fn_nvml_mem mem = (fn_nvml_mem)dlsym(h, "nvmlDeviceGetMemoryInfo");
  if (init && handle && mem && init() == 0)
    for (int i = 0; i < g_info.device_count; i++) {
      void *dev = NULL;
      nvml_memory m;
      if (handle((unsigned)i, &dev) == 0 && mem(dev, &m) == 0) g_info.devices[i].free_bytes = m.free;
    }
  /* NVML stays loaded: unloading it while its threads exist is unsafe. */
}

static void query(void) {
  void *h = dlopen(ESMT_CUDA_DRIVER_LIB, RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    snprintf(g_info.error, sizeof g_info.error,
             "no NVIDIA driver on this machine (%s not found)", ESMT_CUDA_DRIVER_LIB);
    return;
  }
  fn_init init = (fn_init)dlsym(h, "cuInit");
  fn_int version = (fn_int)dlsym(h, "cuDriverGetVersion");
  fn_int count = (fn_int)dlsym(h, "cuDeviceGetCount");
  fn_get get = (fn_get)dlsym(h, "cuDeviceGet");
  fn_name name = (fn_name)dlsym(h, "cuDeviceGetName");
  fn_attr attr = (fn_attr)dlsym(h, "cuDeviceGetAttribute");
  fn_mem mem = (fn_mem)dlsym(h, "cuDeviceTotalMem_v2");
  if (!init || !version || !count || !get || !name || !attr || !mem) {
    snprintf(g_info.error, sizeof g_info.error,
             "%s lacks the driver API calls the probe needs (a broken or very old driver)",
             ESMT_CUDA_DRIVER_LIB);
    return;
  }
  int rc = init(0);
  if (rc) {
    snprintf(g_info.error, sizeof g_info.error,
             "the NVIDIA driver did not initialise (cuInit error %d: no usable GPU, or the "
             "kernel module is not loaded)", rc);
    return;
  }
  version(&g_info.driver_version);
  int n = 0;
  count(&n);
  for (int i = 0; i < n && g_info.device_count < ESMTB_MAX_DEVICES; i++) {
    int dev = 0;
    if (get(&dev, i)) continue;
    cuda_driver_device *d = &g_info.devices[g_info.device_count++];
    if (name(d->name, (int)sizeof d->name, dev)) snprintf(d->name, sizeof d->name, "GPU %d", i);
    attr(&d->cc_major, CU_ATTR_CC_MAJOR, dev);
    attr(&d->cc_minor, CU_ATTR_CC_MINOR, dev);
    size_t total = 0;
    if (!mem(&total, dev)) d->total_bytes = total;
  }
  g_info.loaded = 1;
  query_nvml();
}

const cuda_driver_info *cuda_driver_query(void) {
  pthread_once(&g_once, query);
  return &g_info;
}
