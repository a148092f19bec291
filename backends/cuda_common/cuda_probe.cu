// Device discovery through the CUDA runtime (statically linked, so the
// backend loads without a driver and reports "no driver" instead).
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda_device.h"

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
  int status = (err == cudaErrorMemoryAllocation) ? 2 : 6;
  return cuda_fail(status, "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

int cuda_probe_devices(esmtb_probe *out, int min_major, int min_minor, const char *what) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  // Name the usual cause plainly before asking the runtime.
  void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!drv) {
    snprintf(out->reason, sizeof out->reason,
             "no NVIDIA driver on this machine (libcuda.so.1 not found)");
    return 0;
  }
  dlclose(drv);
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    snprintf(out->reason, sizeof out->reason, "no usable CUDA driver or device: %s",
             cudaGetErrorString(err));
    return 0;
  }
  int usable = 0;
  for (int i = 0; i < count && i < ESMTB_MAX_DEVICES; i++) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    esmtb_device_desc *d = &out->devices[out->device_count++];
    snprintf(d->name, sizeof d->name, "%s", p.name);
    d->cc_major = p.major;
    d->cc_minor = p.minor;
    d->total_bytes = p.totalGlobalMem;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      d->free_bytes = free_b;
    cudaGetLastError();
    if (p.major > min_major || (p.major == min_major && p.minor >= min_minor)) usable++;
  }
  if (count == 0)
    snprintf(out->reason, sizeof out->reason, "the CUDA driver reports no device");
  else if (!usable)
    snprintf(out->reason, sizeof out->reason, "%s needs compute capability %d.%d or newer",
             what, min_major, min_minor);
  return usable;
}
