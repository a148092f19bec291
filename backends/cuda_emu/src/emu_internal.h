/* SPDX-License-Identifier: MIT */
// Services of the emulated CUDA runtime shared by its parts: the emulated
// machine's configuration, device memory, stream operations and the
// checkers' reports. The runtime (emu_*.cpp), the cuBLASLt stand-in
// (emu_cublaslt.cpp) and the NCCL stand-in (emu_nccl.cpp) use it; backend
// code never does (it sees only the CUDA headers in ../include).
#ifndef CUEMU_INTERNAL_H
#define CUEMU_INTERNAL_H

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace cuemu {

// ---- the emulated machine (environment, read once) ----
// ESMT_EMU_DEVICES   number of GPUs (default 1)
// ESMT_EMU_SM        compute capability as 75, 80, 86, 89 or 90, or a comma
//                    list, one per device (default 80)
// ESMT_EMU_MEM       memory per device, e.g. 8GiB (default 16GiB)
// ESMT_EMU_SEED      seed of the warp and block order (default 1)
// ESMT_EMU_NO_COMPUTE=1  allocate for real but skip every kernel, copy,
//                    memset, GEMM and collective (memory planning tests)
// ESMT_EMU_STRICT=0  report checker findings without failing the stream
// ESMT_EMU_STATS=FILE  write peak memory and counters as JSON at exit
struct device_config {
  int sm_major, sm_minor;
  size_t total_mem;
  size_t smem_optin;  // max dynamic shared memory per block after opt-in
  int sm_count;
  char name[64];
};
int device_count();
const device_config *device(int ordinal);  // NULL when out of range
// Device d's PCI bus id as NVML spells it, "00000000:0N:00.0" with N = d + 1
// (cudaDeviceProp.pciBusID); CUDA's spelling has a 4-digit domain.
void pci_bus_id(int ordinal, char *buf, size_t cap, bool nvml_form);
int current_device();                      // the calling host thread's
bool compute_enabled();
// Whether a copy or collective of `bytes` moves its data: always, except
// under ESMT_EMU_NO_COMPUTE, where only control-sized transfers (a test
// all-reduce of one float, a loss read back) still do.
bool data_moves(size_t bytes);
uint64_t seed();

// ---- errors ----
// The calling thread's last error (cudaGetLastError returns and clears it).
cudaError_t record_error(cudaError_t e);
// A sticky error poisons the device, as an illegal address does on a GPU:
// every later call on it returns the error.
void set_sticky(int dev, cudaError_t e);
cudaError_t sticky(int dev);
// A checker finding (race, bounds, stream order, API misuse): printed to
// stderr as "cuda-emu: <kind>: <message>", counted, and in strict mode
// (the default) made sticky on the device as cudaErrorLaunchFailure so
// that the backend call and the test fail.
void report(int dev, const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
uint64_t report_count();

// ---- memory ----
enum mem_kind { MEM_UNKNOWN = 0, MEM_DEVICE, MEM_POOL, MEM_PINNED };
struct region {
  char *base;
  size_t size;
  mem_kind kind;
  int device;
  uint32_t gen;  // unique per allocation
};
// The allocation containing p (device, pool or pinned); false for plain
// host memory and for device addresses outside every live allocation.
bool find_region(const void *p, region *out);
// True when p lies in some device's address range (allocated or not).
bool is_device_address(const void *p);

// ---- stream operations ----
// What a stream operation runs with: its stream's slot, its own clock and
// the stream's vector clock when it was enqueued (for stream-order checks).
struct op_ctx {
  int device;
  int slot;
  uint32_t clock;
  const uint32_t *vc;
  uint64_t launch_id;
  const char *what;
};
// Run fn(ctx) on the stream's worker after everything enqueued before it
// (stream == NULL: the legacy default stream of the current device). A
// non-success return becomes the device's sticky error. Returns an error
// only when the stream handle is invalid or the device already failed.
cudaError_t enqueue(cudaStream_t stream, const char *what, std::function<cudaError_t(op_ctx &)> fn);
// Declare that a stream operation reads or writes [p, p + bytes) of device
// memory: bounds-checked against the allocation and checked for stream
// order against earlier accesses; false (with a report) when out of bounds.
bool access(op_ctx &c, const void *p, size_t bytes, bool write);
// The device of a stream handle (NULL: the current device); -1 if invalid.
int stream_device(cudaStream_t stream);
// False, with an "api" report naming `what`, when stream belongs to another
// device than the calling thread's current one (cudaSetDevice missing):
// kernel launches, copies, memsets and cuBLASLt calls all check it.
bool stream_on_current_device(cudaStream_t stream, const char *what);

}  // namespace cuemu

#endif
