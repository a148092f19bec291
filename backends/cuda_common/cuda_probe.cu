/* SPDX-License-Identifier: MIT */
// Errors and device discovery (through the driver API, cuda_driver.c; the
// runtime is statically linked, so the backend loads without a driver and
// reports "no driver" instead).
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda_device.h"
#include "cuda_driver.h"

const esmtb_host *cuda_host;

esmtb_status cuda_fail(esmtb_status status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (cuda_host && cuda_host->set_error) cuda_host->set_error("%s", msg);
  return status;
}

esmtb_status cuda_check(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return 0;
  cudaGetLastError();  // clear the sticky non-fatal error
  int status = (err == cudaErrorMemoryAllocation) ? ESMTB_ERR_OUT_OF_MEMORY : ESMTB_ERR_BACKEND;
  return cuda_fail(status, "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

// Devices from the driver API (cuda_driver.c): no context is created on
// any GPU; free memory comes from NVML when present, and is measured by
// the runtime only on the device a backend opens.
int cuda_probe_devices(esmtb_probe *out, int min_major, int min_minor, const char *what) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  const cuda_driver_info *drv = cuda_driver_query();
  if (!drv->loaded) {
    snprintf(out->reason, sizeof out->reason, "%s", drv->error);
    return 0;
  }
  if (drv->driver_version && drv->driver_version < CUDART_VERSION) {
    snprintf(out->reason, sizeof out->reason,
             "the NVIDIA driver supports CUDA %d.%d; this build of %s needs CUDA %d.%d or newer: "
             "update the driver", drv->driver_version / 1000, drv->driver_version % 1000 / 10,
             what, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    return 0;
  }
  int usable = 0;
  for (int i = 0; i < drv->device_count; i++) {
    const cuda_driver_device *dd = &drv->devices[i];
    esmtb_device_desc *d = &out->devices[out->device_count++];
    snprintf(d->name, sizeof d->name, "%s", dd->name);
    d->cc_major = dd->cc_major;
    d->cc_minor = dd->cc_minor;
    d->total_bytes = dd->total_bytes;
    d->free_bytes = dd->free_bytes;
    if (dd->cc_major > min_major || (dd->cc_major == min_major && dd->cc_minor >= min_minor)) usable++;
  }
  if (drv->device_count == 0)
    snprintf(out->reason, sizeof out->reason, "the CUDA driver reports no device");
  else if (!usable)
    snprintf(out->reason, sizeof out->reason, "%s needs compute capability %d.%d or newer",
             what, min_major, min_minor);
  return usable;
}
