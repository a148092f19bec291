/* SPDX-License-Identifier: MIT */
/* The NVIDIA driver API and NVML, loaded at run time (dlopen) for the
 * probe: they list devices and their memory without creating a CUDA
 * context on any of them (the runtime's cudaSetDevice + cudaMemGetInfo
 * did, on every visible GPU). Private to cuda_common. */
#ifndef ESMTRAIN_CUDA_DRIVER_H
#define ESMTRAIN_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library names; the emulated build points them at its stand-ins. */
#ifndef ESMT_CUDA_DRIVER_LIB
#define ESMT_CUDA_DRIVER_LIB "libcuda.so.1"
#endif
#ifndef ESMT_NVML_LIB
#define ESMT_NVML_LIB "libnvidia-ml.so.1"
#endif

typedef struct cuda_driver_device {
  char name[128];
  int cc_major, cc_minor;
  uint64_t total_bytes;
  uint64_t free_bytes; /* from NVML; 0 when NVML is absent */
} cuda_driver_device;

typedef struct cuda_driver_info {
  int loaded;          /* libcuda.so.1 found and cuInit succeeded */
  int driver_version;  /* e.g. 12020 for CUDA 12.2; 0 if unknown */
  int device_count;
  cuda_driver_device devices[ESMTB_MAX_DEVICES];
  char error[192];     /* why not loaded */
} cuda_driver_info;

/* Query once per process (later calls return the same result). */
CUDA_HIDDEN const cuda_driver_info *cuda_driver_query(void);

#ifdef __cplusplus
}
#endif

#endif
