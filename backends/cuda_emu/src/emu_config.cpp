/* SPDX-License-Identifier: MIT */
// The emulated machine (from the environment), the current device of each
// host thread, last and sticky errors, error names and strings, and the
// checkers' reports.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "emu_internal.h"
#include "emu_private.h"

namespace cuemu {

namespace {
constexpr int kMaxDevices = 16;
device_config g_dev[kMaxDevices];
int g_ndev;
uint64_t g_seed = 1;
bool g_compute = true, g_strict = true;
std::once_flag g_once;
std::atomic<int> g_sticky[kMaxDevices];
std::atomic<uint64_t> g_reports;
thread_local int t_device;
thread_local cudaError_t t_last = cudaSuccess;

size_t parse_size(const char *s, size_t def) {
  if (!s || !*s) return def;
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || v <= 0) return def;
  while (*end == ' ') end++;
  double mul = 1;
  switch (*end) {
    case 'k': case 'K': mul = 1024.0; break;
    case 'm': case 'M': mul = 1024.0 * 1024; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
    default: break;
  }
  return (size_t)(v * mul);
}

// Per-architecture figures of the real parts (max opt-in shared memory per
// block, SM count of a typical board).
void fill_arch(device_config *d, int sm) {
  d->sm_major = sm / 10;
  d->sm_minor = sm % 10;
  switch (sm) {
    case 75: d->smem_optin = 65536; d->sm_count = 48; break;
    case 80: d->smem_optin = 166912; d->sm_count = 108; break;
    case 86: d->smem_optin = 101376; d->sm_count = 68; break;
    case 89: d->smem_optin = 101376; d->sm_count = 128; break;
    case 90: d->smem_optin = 232448; d->sm_count = 132; break;
    default: d->smem_optin = 49152; d->sm_count = 16; break;
  }
  snprintf(d->name, sizeof d->name, "Emulated sm_%d (esmtrain cuda-emu)", sm);
}

void init() {
  const char *n = getenv("ESMT_EMU_DEVICES");
  g_ndev = n && *n ? atoi(n) : 1;
  if (g_ndev < 0) g_ndev = 0;
  if (g_ndev > kMaxDevices) g_ndev = kMaxDevices;
  const char *sm = getenv("ESMT_EMU_SM");
  const size_t mem = parse_size(getenv("ESMT_EMU_MEM"), (size_t)16 << 30);
  int last = 80;
  const char *p = sm && *sm ? sm : "80";
  for (int i = 0; i < g_ndev; i++) {
    if (p && *p) {
      last = atoi(p);
      p = strchr(p, ',');
      if (p) p++;
    }
    fill_arch(&g_dev[i], last);
    g_dev[i].total_mem = mem;
  }
  const char *s = getenv("ESMT_EMU_SEED");
  if (s && *s) g_seed = strtoull(s, NULL, 0);
  const char *nc = getenv("ESMT_EMU_NO_COMPUTE");
  g_compute = !(nc && *nc && strcmp(nc, "0") != 0);
  const char *st = getenv("ESMT_EMU_STRICT");
  g_strict = !(st && strcmp(st, "0") == 0);
}

void ensure() { std::call_once(g_once, init); }
}  // namespace

int device_count() {
  ensure();
  return g_ndev;
}
const device_config *device(int ordinal) {
  ensure();
  return ordinal >= 0 && ordinal < g_ndev ? &g_dev[ordinal] : NULL;
}
void pci_bus_id(int ordinal, char *buf, size_t cap, bool nvml_form) {
  snprintf(buf, cap, nvml_form ? "00000000:%02X:00.0" : "0000:%02X:00.0", ordinal + 1);
}
int current_device() { return t_device; }
void set_current_device(int d) { t_device = d; }
bool compute_enabled() {
  ensure();
  return g_compute;
}
bool data_moves(size_t bytes) { return compute_enabled() || bytes <= 4096; }
uint64_t seed() {
  ensure();
  return g_seed;
}

cudaError_t record_error(cudaError_t e) {
  if (e != cudaSuccess) t_last = e;
  return e;
}
cudaError_t take_last_error(bool clear) {
  cudaError_t e = t_last;
  if (clear) t_last = cudaSuccess;
  int d = t_device;
  if (e == cudaSuccess && d >= 0 && d < kMaxDevices) e = (cudaError_t)g_sticky[d].load();
  return e;
}
void set_sticky(int dev, cudaError_t e) {
  if (dev < 0 || dev >= kMaxDevices || e == cudaSuccess) return;
  int expect = 0;
  g_sticky[dev].compare_exchange_strong(expect, (int)e);
}
cudaError_t sticky(int dev) {
  return dev >= 0 && dev < kMaxDevices ? (cudaError_t)g_sticky[dev].load() : cudaSuccess;
}

void report(int dev, const char *kind, const char *fmt, ...) {
  static std::mutex m;
  const uint64_t n = ++g_reports;
  if (n <= 50) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    std::lock_guard<std::mutex> g(m);
    fprintf(stderr, "cuda-emu: %s: %s\n", kind, msg);
    if (n == 50) fprintf(stderr, "cuda-emu: (further reports are counted, not printed)\n");
  }
  if (g_strict) set_sticky(dev < 0 ? 0 : dev, cudaErrorLaunchFailure);
}
uint64_t report_count() { return g_reports.load(); }
bool strict() {
  ensure();
  return g_strict;
}

}  // namespace cuemu

using namespace cuemu;

extern "C" {

cudaError_t cudaGetLastError(void) { return take_last_error(true); }
cudaError_t cudaPeekAtLastError(void) { return take_last_error(false); }

struct err_text {
  cudaError_t e;
  const char *name, *text;
};
static const err_text k_errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
     "too many resources requested for launch"},
    {cudaErrorLaunchTimeout, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorIllegalInstruction, "cudaErrorIllegalInstruction",
     "an illegal instruction was encountered"},
    {cudaErrorMisalignedAddress, "cudaErrorMisalignedAddress", "misaligned address"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const char *cudaGetErrorName(cudaError_t e) {
  for (const err_text &t : k_errors)
    if (t.e == e) return t.name;
  return "cudaErrorUnknown";
}
const char *cudaGetErrorString(cudaError_t e) {
  for (const err_text &t : k_errors)
    if (t.e == e) return t.text;
  return "unrecognized error code";
}

}  // extern "C"
