/* SPDX-License-Identifier: MIT */
/* NVIDIA's management library (NVML) loaded at run time, for the live state
 * of GPUs: esmt_gpu_sample_all (public) and the trainer's per-step device
 * figures. The library is found as "libnvidia-ml.so.1" (the driver's), or
 * at the path in ESMT_NVML_LIBRARY (the emulator's stand-in in tests). It is
 * loaded once and kept: NVML's threads make unloading it unsafe. */
#ifndef ESMTRAIN_GPU_MONITOR_H
#define ESMTRAIN_GPU_MONITOR_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

/* Sample the GPU whose PCI bus id is `bus_id` (as cudaDeviceGetPCIBusId
 * writes it; case and leading zeros of the domain do not matter). Fails
 * with ESMT_ERR_UNSUPPORTED (no NVML) or ESMT_ERR_BACKEND (NVML does not
 * know that id) and the reason; out->struct_size must be set. */
ESMT_HIDDEN esmt_status esmt_gpu_sample_bus_id(const char *bus_id, esmt_gpu_sample *out);

#endif
