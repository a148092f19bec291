/* SPDX-License-Identifier: MIT */
// The emulated CUDA runtime on its own: kernels compute, and each checker
// reports what it is for (a missing __syncthreads, shared and global
// bounds, host memory in a kernel, stream order without an event, blocks
// racing) and stays silent on correct code; the emulated NCCL leaves a
// killed peer's collective hanging until ncclCommAbort, and reports one
// never aborted. Each case runs in a child
// process (a finding poisons the emulated device, as on a GPU) and the
// parent checks its exit status and the report it printed.
#include <cuda_runtime.h>
#include <nccl.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_launch.cuh"

static const int kFirstBarrierLine = __LINE__ + 6;  // the barrier a mutant drops
__global__ void block_sum(const float *x, float *out, int n, int skip_barrier) {
  __shared__ float sh[256];
  float v = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[i];
  sh[threadIdx.x] = v;
  if (!skip_barrier) __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = sh[0];
}

__global__ void warp_sum(const float *x, float *out) {
  float v = x[threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) out[threadIdx.x / 32] = v;
}

// Warp collectives with a mask: `mask` for the reduction; lanes at or past
// `live` exit first; with `split`, the upper half of the warp waits at
// __syncwarp while the lower half shuffles. out[1 + warp] gets a ballot of
// the odd lanes.
__global__ void warp_masked(const float *x, float *out, unsigned mask, int live, int split) {
  if ((int)(threadIdx.x & 31) >= live) return;
  float v = x[threadIdx.x];
  if (split && (threadIdx.x & 31) >= 16) {
    __syncwarp();
  } else {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(mask, v, o);
  }
  const unsigned odd = __ballot_sync(mask, threadIdx.x & 1);
  if ((threadIdx.x & 31) == 0) {
    out[0] = v;
    out[1] = (float)(odd == 0xaaaaaaaau);
  }
}

// A static __shared__ array that the first `writers` threads fill (all 32
// in block 0 when `block0_full`), summed by thread 0.
__global__ void static_partial(float *out, int writers, int block0_full) {
  __shared__ float acc[32];
  if ((int)threadIdx.x < (block0_full && blockIdx.x == 0 ? 32 : writers))
    acc[threadIdx.x] = 1.0f + (float)blockIdx.x;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (int i = 0; i < 32; i++) s += acc[i];
    out[blockIdx.x] = s;
  }
}

// Lanes exchange through shared memory: each writes its slot and reads its
// neighbour's, with or without a __syncwarp between.
__global__ void lane_swap(float *out, int with_syncwarp) {
  __shared__ float s[32];
  s[threadIdx.x] = (float)threadIdx.x;
  if (with_syncwarp) __syncwarp();
  out[threadIdx.x] = s[threadIdx.x ^ 1];
}

// A warp-synchronous reduction tail (32 threads, 64 ones): correct with a
// __syncwarp after each step, a race without (lane 16 updates s[16] after
// lane 0 read it, and after reading it itself).
__global__ void warp_tail(float *out, int synced) {
  __shared__ float s[64];
  s[threadIdx.x] = 1.0f;
  s[threadIdx.x + 32] = 1.0f;
  __syncwarp();
  for (int o = 32; o > 0; o >>= 1) {
    if ((int)threadIdx.x < o) s[threadIdx.x] += s[threadIdx.x + o];
    if (synced) __syncwarp();
  }
  if (threadIdx.x == 0) out[0] = s[0];
}

__global__ void dyn_copy(const float *x, float *y, int n, int extra) {
  ESMT_DYNAMIC_SMEM(smem);
  float *s = reinterpret_cast<float *>(smem);
  for (int i = threadIdx.x; i < n + extra; i += blockDim.x) s[i] = x[i < n ? i : 0];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = s[n - 1 - i];
}

// cp.async (sm_80+): each thread copies 16 bytes into shared memory, then
// the block reads them reversed. mode 0: wait_group + barrier (correct);
// 1: barrier without the wait; 2: the wait without the barrier.
__global__ void cp_reverse(const float *x, float *y, int n, int mode) {
  ESMT_DYNAMIC_SMEM(smem);
  float *s = reinterpret_cast<float *>(smem);
  for (int i = threadIdx.x * 4; i < n; i += blockDim.x * 4) ::cuemu::cp_async(s + i, x + i, 16);
  ::cuemu::cp_async_commit();
  if (mode != 1) ::cuemu::cp_async_wait(0);
  if (mode != 2) __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = s[n - 1 - i];
}

__global__ void scale(float *x, int n, float f) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] *= f;
}

__global__ void write_first(float *x) { x[0] = (float)blockIdx.x; }
// Every thread of every block adds 1 to x[0]; with `plain`, block 1 stores
// to it instead (the shadow keeps the last writer, so that store is last).
__global__ void add_first(float *x, int plain) {
  if (plain && blockIdx.x == 1) {
    if (threadIdx.x == 0) x[0] = 0.0f;
    return;
  }
  atomicAdd(x, 1.0f);
}

static int fail(const char *m) {
  fprintf(stderr, "FAIL: %s\n", m);
  return 1;
}

// Cases: each returns 0 when the behaviour expected of it happened.
static int case_compute(void) {
  const int n = 1000;
  float h[n], r[4] = {0};
  double want = 0;
  for (int i = 0; i < n; i++) want += (h[i] = (float)(i % 7) - 3.0f);
  float *d, *o;
  cudaMalloc((void **)&d, n * 4);
  cudaMalloc((void **)&o, 16);
  cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice);
  ESMT_LAUNCH(1, 256, 0, 0, block_sum)(d, o, n, 0);
  float w[64];
  for (int i = 0; i < 64; i++) w[i] = (float)i;
  float *dw;
  cudaMalloc((void **)&dw, 64 * 4);
  cudaMemcpy(dw, w, 256, cudaMemcpyHostToDevice);
  ESMT_LAUNCH(1, 64, 0, 0, warp_sum)(dw, o + 1);
  cudaMemcpy(r, o, 12, cudaMemcpyDeviceToHost);
  if (cudaDeviceSynchronize() != cudaSuccess) return fail("sync");
  if (r[0] != (float)want) return fail("block_sum value");
  if (r[1] != 496.0f || r[2] != 1520.0f) return fail("warp_sum value");
  cudaFuncSetAttribute(dyn_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
  ESMT_LAUNCH(1, 128, 64 * 1024, 0, dyn_copy)(d, d, 0, 0);  // 64 KiB after the opt-in: fine
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : fail("opt-in launch");
}
static int case_race(void) {
  float *d, *o;
  cudaMalloc((void **)&d, 4096);
  cudaMalloc((void **)&o, 16);
  cudaMemset(d, 0, 4096);
  ESMT_LAUNCH(1, 256, 0, 0, block_sum)(d, o, 1000, 1);
  return cudaDeviceSynchronize();
}
// The same kernel, correct in the source, with its first barrier dropped by
// the emulator's mutation switch.
static int case_dropped_barrier(void) {
  char spec[64];
  snprintf(spec, sizeof spec, "test_emu_runtime.cpp:%d", kFirstBarrierLine);
  setenv("ESMT_EMU_DROP_BARRIER", spec, 1);
  float *d, *o;
  cudaMalloc((void **)&d, 4096);
  cudaMalloc((void **)&o, 16);
  cudaMemset(d, 0, 4096);
  ESMT_LAUNCH(1, 256, 0, 0, block_sum)(d, o, 1000, 0);
  return cudaDeviceSynchronize();
}
static int warp_masked_case(unsigned mask, int live, int split) {
  float h[32], r[2] = {0, 0}, *d, *o;
  for (int i = 0; i < 32; i++) h[i] = (float)i;
  cudaMalloc((void **)&d, 128);
  cudaMalloc((void **)&o, 8);
  cudaMemcpy(d, h, 128, cudaMemcpyHostToDevice);
  ESMT_LAUNCH(1, 32, 0, 0, warp_masked)(d, o, mask, live, split);
  cudaError_t e = cudaMemcpy(r, o, 8, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return (int)e;
  return r[0] == 496.0f && r[1] == 1.0f ? 0 : fail("warp_masked: wrong sum or ballot");
}
static int case_warp_full_mask(void) { return warp_masked_case(0xffffffffu, 32, 0); }
static int case_warp_half_mask(void) { return warp_masked_case(0x0000ffffu, 32, 0); }
static int case_warp_mask_exited(void) { return warp_masked_case(0xffffffffu, 16, 0); }
static int case_warp_split(void) { return warp_masked_case(0xffffffffu, 32, 1); }
static int case_warp_mask_mutated(void) {
  setenv("ESMT_EMU_SHFL_MASK", "0x0000ffff", 1);
  return warp_masked_case(0xffffffffu, 32, 0);
}
// Copies and memsets on a stream of device 1 while device 0 is current:
// the cudaSetDevice missing when the stream was made.
static int stream_device_case(int memset_too) {
  setenv("ESMT_EMU_DEVICES", "2", 1);
  cudaStream_t s;
  float *d, h[16] = {0};
  cudaSetDevice(1);
  cudaStreamCreate(&s);
  cudaMalloc((void **)&d, 64);
  cudaError_t e = memset_too ? cudaMemsetAsync(d, 0, 64, s) : cudaSuccess;
  cudaSetDevice(memset_too ? 1 : 0);
  if (e == cudaSuccess) e = cudaMemcpyAsync(h, d, 64, cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  return (int)e;
}
static int case_copy_same_device(void) { return stream_device_case(1); }
static int case_copy_other_device(void) { return stream_device_case(0); }
static int static_partial_case(int writers, int block0_full) {
  float r[2] = {0, 0}, *o;
  cudaMalloc((void **)&o, 8);
  ESMT_LAUNCH(2, 32, 0, 0, static_partial)(o, writers, block0_full);
  cudaError_t e = cudaMemcpy(r, o, 8, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return (int)e;
  if (block0_full) {  // block 1 reads 16 bytes block 0 left behind: poisoned, NaN
    if (!std::isnan(r[1])) return fail("static __shared__ kept the previous block's values");
    return r[0] == 32.0f ? 0 : fail("static_partial: block 0's sum");
  }
  return r[0] == 32.0f && r[1] == 64.0f ? 0 : fail("static_partial: wrong sums");
}
static int case_static_smem_ok(void) { return static_partial_case(32, 0); }
static int case_static_smem_uninit(void) { return static_partial_case(16, 0); }
static int case_static_smem_poisoned(void) {
  setenv("ESMT_EMU_STRICT", "0", 1);  // the values, past the report
  return static_partial_case(16, 1);
}
// Host reads of a pinned buffer that a copy from the device fills: after
// the stream's synchronisation (mode 0), before it (1), of the other half
// of the page, which no copy writes (2), and a host write to a pinned
// source before the copy to the device read it (3).
static int pinned_case(int mode) {
  const int n = 512;
  float *d, *h, src[n];
  for (int i = 0; i < n; i++) src[i] = (float)i;
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaMalloc((void **)&d, n * 4);
  cudaMallocHost((void **)&h, 2 * n * 4);  // one page: two halves of n floats
  cudaMemcpy(d, src, n * 4, cudaMemcpyHostToDevice);
  h[n + 7] = 7.0f;
  float got = 0.0f;
  if (mode == 3) {
    cudaMemcpyAsync(d, h + n, n * 4, cudaMemcpyHostToDevice, s);
    h[n + 7] = 8.0f;  // the copy may not have read it yet
  } else {
    cudaMemcpyAsync(h, d, n * 4, cudaMemcpyDeviceToHost, s);
    if (mode == 0) cudaStreamSynchronize(s);
    got = mode == 2 ? h[n + 7] : h[5];
  }
  cudaError_t e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) return (int)e;
  if (mode == 3) return 0;
  return got == (mode == 2 ? 7.0f : 5.0f) ? 0 : fail("pinned: wrong value read");
}
static int case_pinned_synced(void) { return pinned_case(0); }
static int case_pinned_read_early(void) { return pinned_case(1); }
static int case_pinned_other_half(void) { return pinned_case(2); }
static int case_pinned_source_written(void) { return pinned_case(3); }
static int case_pinned_sync_dropped(void) {
  setenv("ESMT_EMU_DROP_HOST_SYNC", "1", 1);
  return pinned_case(0);
}
static int lane_swap_case(int with_syncwarp, const char *interleave) {
  if (interleave) setenv("ESMT_EMU_INTERLEAVE", interleave, 1);
  float r[32], *o;
  cudaMalloc((void **)&o, sizeof r);
  ESMT_LAUNCH(1, 32, 0, 0, lane_swap)(o, with_syncwarp);
  cudaError_t e = cudaMemcpy(r, o, sizeof r, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return (int)e;
  for (int i = 0; i < 32; i++)
    if (r[i] != (float)(i ^ 1)) return fail("lane_swap: a lane read its neighbour's stale slot");
  return 0;
}
static int case_lane_swap_synced(void) { return lane_swap_case(1, "1"); }
static int case_lane_swap_race(void) { return lane_swap_case(0, nullptr); }
static int case_lane_swap_interleaved(void) {
  setenv("ESMT_EMU_STRICT", "0", 1);  // the values, past the report
  return lane_swap_case(0, "1");
}
static int warp_tail_case(int synced) {
  float r = 0, *o;
  cudaMalloc((void **)&o, 4);
  ESMT_LAUNCH(1, 32, 0, 0, warp_tail)(o, synced);
  cudaError_t e = cudaMemcpy(&r, o, 4, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return (int)e;
  return r == 64.0f ? 0 : fail("warp_tail: wrong sum");
}
static int case_warp_tail_synced(void) { return warp_tail_case(1); }
static int case_warp_tail_race(void) { return warp_tail_case(0); }
static int case_smem_bounds(void) {
  float *d;
  cudaMalloc((void **)&d, 4096);
  ESMT_LAUNCH(1, 64, 256 * 4, 0, dyn_copy)(d, d, 256, 1);
  return cudaDeviceSynchronize();
}
static int case_global_bounds(void) {
  float *d;
  cudaMalloc((void **)&d, 1000 * 4);
  ESMT_LAUNCH(4, 256, 0, 0, scale)(d, 1001, 2.0f);
  return cudaDeviceSynchronize();
}
static int case_host_pointer(void) {
  static float h[16];
  ESMT_LAUNCH(1, 16, 0, 0, scale)(h, 16, 2.0f);
  return cudaDeviceSynchronize();
}
static int case_blocks(void) {
  float *d;
  cudaMalloc((void **)&d, 16);
  ESMT_LAUNCH(2, 1, 0, 0, write_first)(d);
  return cudaDeviceSynchronize();
}
// atomicAdd from many blocks on one word is not a race, and adds up; a
// plain write by another block among them is.
static int atomics(int plain) {
  float *d, h = 0.0f;
  cudaMalloc((void **)&d, 16);
  cudaMemset(d, 0, 16);
  ESMT_LAUNCH(8, 32, 0, 0, add_first)(d, plain);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return (int)e;
  cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost);
  return h == 256.0f ? 0 : fail("atomicAdd: 8 blocks x 32 threads did not add up to 256");
}
// float4 atomics (sm_90): 16-byte aligned adds; a misaligned one faults,
// and below sm_90 the instruction does not exist.
__global__ void add4(float *x, int off) {
  atomicAdd(reinterpret_cast<float4 *>(x + off), make_float4(1.0f, 2.0f, 3.0f, 4.0f));
}
static int atomics4(int off, const char *sm) {
  setenv("ESMT_EMU_SM", sm, 1);  // read at the first CUDA call of this (forked) case
  float *d, h[8];
  cudaMalloc((void **)&d, 32);
  cudaMemset(d, 0, 32);
  ESMT_LAUNCH(4, 32, 0, 0, add4)(d, off);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return (int)e;
  cudaMemcpy(h, d, 32, cudaMemcpyDeviceToHost);
  return h[0] == 128.0f && h[3] == 512.0f ? 0 : fail("float4 atomicAdd: wrong sums");
}
static int case_atomics4(void) { return atomics4(0, "90"); }
static int case_atomics4_misaligned(void) { return atomics4(1, "90"); }
static int case_atomics4_sm80(void) { return atomics4(0, "80"); }
static int case_atomics(void) { return atomics(0); }
static int case_atomic_and_plain(void) { return atomics(1); }
// Stream order: B reads what A wrote; with the event wait it is ordered.
static int stream_pair(bool with_event) {
  cudaStream_t a, b;
  cudaEvent_t e;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  float *d;
  cudaMalloc((void **)&d, 4096);
  cudaMemsetAsync(d, 0, 4096, a);
  ESMT_LAUNCH(4, 256, 0, a, scale)(d, 1024, 2.0f);
  if (with_event) {
    cudaEventRecord(e, a);
    cudaStreamWaitEvent(b, e, 0);
  }
  float h[1024];
  cudaMemcpyAsync(h, d, 4096, cudaMemcpyDeviceToHost, b);
  return cudaDeviceSynchronize();
}
static int case_stream_ok(void) { return stream_pair(true); }
static int case_stream_missing_wait(void) { return stream_pair(false); }
// Write after an unordered read that a later, ordered read of the writer's
// own stream would hide: b copies d out while a (held back by a host flag,
// which orders nothing) scales d in place, reading it before it writes.
// (a semaphore: this file is built with -fsanitize=thread, whose atomics
// the emulator does not provide)
static sem_t g_copied;
static void set_copied(void *) { sem_post(&g_copied); }
static void wait_copied(void *) { sem_wait(&g_copied); }
static int case_write_after_hidden_read(void) {
  cudaStream_t a, b;
  cudaEvent_t e;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  sem_init(&g_copied, 0, 0);
  float *d;
  cudaMalloc((void **)&d, 4096);
  cudaMemsetAsync(d, 0, 4096, a);
  cudaEventRecord(e, a);
  cudaStreamWaitEvent(b, e, 0);
  float *h;  // pinned: a copy into pageable memory would hold the host (and order a)
  cudaMallocHost((void **)&h, 4096);
  cudaMemcpyAsync(h, d, 4096, cudaMemcpyDeviceToHost, b);
  cudaLaunchHostFunc(b, set_copied, nullptr);
  cudaLaunchHostFunc(a, wait_copied, nullptr);
  ESMT_LAUNCH(4, 256, 0, a, scale)(d, 1024, 2.0f);
  return cudaDeviceSynchronize();
}
static int cp_case(int mode) {
  const int n = 1024;
  float h[n], *d, *o;
  for (int i = 0; i < n; i++) h[i] = (float)i;
  cudaMalloc((void **)&d, n * 4);
  cudaMalloc((void **)&o, n * 4);
  cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice);
  ESMT_LAUNCH(1, 128, n * 4, 0, cp_reverse)(d, o, n, mode);
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  cudaMemcpy(h, o, n * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++)
    if (h[i] != (float)(n - 1 - i)) return fail("cp.async result");
  return 0;
}
static int case_cp_async_ok(void) { return cp_case(0); }
static int case_cp_async_no_wait(void) { return cp_case(1); }
static int case_cp_async_no_barrier(void) { return cp_case(2); }
static int case_cp_async_wait_dropped(void) {
  setenv("ESMT_EMU_DROP_CP_WAIT", "1", 1);
  return cp_case(0);
}
static int case_cp_async_sm75(void) {
  setenv("ESMT_EMU_SM", "75", 1);
  return cp_case(0);
}
static int case_bad_config(void) {
  float *d;
  cudaMalloc((void **)&d, 16);
  ESMT_LAUNCH(1, 2048, 0, 0, scale)(d, 4, 1.0f);
  return cudaGetLastError() == cudaErrorInvalidConfiguration ? 0 : 1;
}

// cudaMallocAsync's pool while the host runs ahead of the stream (held by
// a host function): a block freed on the stream is reused at once by the
// next allocation on the same stream, as in CUDA, so 8 alloc/free pairs
// reserve one block; an allocation on another stream does not take it.
static sem_t g_release;
static void wait_release(void *) { sem_wait(&g_release); }
static int case_pool_same_stream_reuse() {
  sem_init(&g_release, 0, 0);
  cudaStream_t a, b;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaMemPool_t pool;
  cudaDeviceGetDefaultMemPool(&pool, 0);
  cudaLaunchHostFunc(a, wait_release, nullptr);
  const size_t mib = 1u << 20;
  for (int i = 0; i < 8; i++) {
    void *p = nullptr;
    if (cudaMallocAsync(&p, mib, a) != cudaSuccess) return fail("cudaMallocAsync");
    cudaMemsetAsync(p, 0, mib, a);
    cudaFreeAsync(p, a);
  }
  uint64_t high = 0, cur = 0;
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high);
  if (high != mib) return fail("same-stream reuse: reserved more than one block");
  void *q = nullptr;
  cudaMallocAsync(&q, mib, b);  // a's block is still pending on a: not b's
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &cur);
  if (cur != 2 * mib) return fail("another stream took over a pending block");
  cudaFreeAsync(q, b);
  sem_post(&g_release);
  return cudaDeviceSynchronize();
}

// wgmma (sm_90): a 64 x n x K GEMM through wgmma.mma_async in one
// warpgroup. The host lays A (64 x K) and B (K x n) out as the shared-memory
// images of the PTX ISA's canonical layouts (K-major or MN-major, each
// swizzle mode), the kernel copies them into dynamic shared memory at a
// 1024-byte aligned shared address (the emulated window starts at 0x410, so
// it must align itself), fences them to the async proxy, and runs K / 16
// chained k16 steps into one accumulator (scale-d 0, then 1).
enum { kWgNone = 0, kWg128 = 1, kWg64 = 2, kWg32 = 3 };
struct wg_params {
  const unsigned char *a_img, *b_img;  // device copies of the images
  uint32_t a_bytes, b_bytes;
  const uint16_t *a_rm;                // A row-major 64 x K (A in registers)
  uint64_t a_desc, b_desc;             // descriptors without the start address
  uint32_t a_off[4], b_off[4];         // start of each k16 step in the image
  uint32_t b_shift;                    // B image at a 1024-aligned address + this
  int n, K, a_reg, trans_a, trans_b, bf16, mode, use_cp, two_groups;
  float *out, *out_partial;            // 64 x n: the result; after the first group
};
// mode 0: correct (and thread 0 rewrites a B byte after its own wait: no
// finding); 1: d stored before the wait; 2: no wgmma.fence; 3: a B byte
// written before the wait; 4: no fence.proxy.async; 6: warpgroup 1 writes B
// with no barrier against warpgroup 0's wgmma; 7: thread 5 exits before it;
// 8: no commit_group/wait_group; 9: smem_addr of a global pointer.
__global__ void wg_gemm(wg_params p) {
  ESMT_DYNAMIC_SMEM(smem);
  const int tid = threadIdx.x;
  const uint32_t pad = (1024u - (::cuemu::smem_addr(smem) & 1023u)) & 1023u;
  unsigned char *a_tile = smem + pad;
  unsigned char *b_tile = a_tile + ((p.a_bytes + 1023u) & ~1023u) + p.b_shift;
  for (uint32_t i = tid * 16u; i < p.a_bytes; i += blockDim.x * 16u) {
    if (p.use_cp) ::cuemu::cp_async(a_tile + i, p.a_img + i, 16);
    else *reinterpret_cast<uint4 *>(a_tile + i) = *reinterpret_cast<const uint4 *>(p.a_img + i);
  }
  for (uint32_t i = tid * 16u; i < p.b_bytes; i += blockDim.x * 16u) {
    if (p.use_cp) ::cuemu::cp_async(b_tile + i, p.b_img + i, 16);
    else *reinterpret_cast<uint4 *>(b_tile + i) = *reinterpret_cast<const uint4 *>(p.b_img + i);
  }
  if (p.use_cp) {
    ::cuemu::cp_async_commit();
    ::cuemu::cp_async_wait(0);
  }
  if (p.mode != 4) ::cuemu::fence_proxy_async();  // after the writes (and the cp.async wait)
  __syncthreads();
  if (tid >= 128) {
    if (p.mode == 6 && tid == 128) b_tile[0] = 0;
    return;
  }
  if (p.mode == 7 && tid == 5) return;
  if (p.mode == 9) (void)::cuemu::smem_addr(p.out);
  const int w = tid / 32, g = (tid % 32) / 4, q = tid % 4, steps = p.K / 16;
  uint32_t a[4][4];
  if (p.a_reg)
    for (int s = 0; s < steps; s++)
      for (int e = 0; e < 4; e++) {
        const int row = 16 * w + g + 8 * (e & 1), col = 16 * s + 2 * q + 8 * (e >> 1);
        a[s][e] = (uint32_t)p.a_rm[row * p.K + col] | ((uint32_t)p.a_rm[row * p.K + col + 1] << 16);
      }
  float d[128];
  for (int i = 0; i < 128; i++) d[i] = -7.0f;  // what a read before the wait sees
  if (p.mode != 2) ::cuemu::wgmma_fence();
  const uint32_t a_base = ::cuemu::smem_addr(a_tile), b_base = ::cuemu::smem_addr(b_tile);
  for (int s = 0; s < steps; s++) {
    const uint64_t ad = p.a_desc | (((a_base + p.a_off[s]) & 0x3ffffu) >> 4);
    const uint64_t bd = p.b_desc | (((b_base + p.b_off[s]) & 0x3ffffu) >> 4);
    ::cuemu::wgmma_m64k16(d, p.n, p.a_reg ? a[s] : nullptr, ad, bd, s > 0, p.trans_a, p.trans_b,
                          p.bf16);
    if (p.two_groups && s == 0) ::cuemu::wgmma_commit();
  }
  if (p.mode == 8) return;
  ::cuemu::wgmma_commit();
  if (p.mode == 3 && tid == 0) b_tile[16] = 0;
  auto store = [&](float *out) {
    for (int j = 0; j < p.n / 8; j++)
      for (int e = 0; e < 4; e++)
        out[(16 * w + g + 8 * (e >> 1)) * p.n + 8 * j + 2 * q + (e & 1)] = d[4 * j + e];
  };
  if (p.mode == 1) store(p.out);
  if (p.two_groups) {
    ::cuemu::wgmma_wait(1);
    store(p.out_partial);
  }
  ::cuemu::wgmma_wait(0);
  if (p.mode == 0 && tid == 0) b_tile[0] = 0;  // after its own wait: B is free for it
  if (p.mode != 1) store(p.out);
}

// One operand's image: element (mn, k) of an mn_ext x K operand (mn: row of
// A, column of B) at byte wg_off(...) of a 1024-aligned tile, per the
// canonical layouts (T = 8 elements per 16 bytes, R = swizzle row bytes):
//   K-major, swizzled: rows of R bytes (R / 2 K elements), 8-row atoms at
//     SBO = 8R, further K in another atom column; Swizzle<b,4,3> on the offset.
//   K-major, none: 8 x 16-byte core matrices; alt 0: K cores at LBO =
//     mn_ext * 16, 8-row groups at SBO = 128; alt 1: LBO = 128, SBO = K * 16.
//   MN-major, swizzled: K rows of R bytes (R / 2 MN elements), 8-K atoms at
//     SBO = 8R, the next R / 2 MN columns at LBO = K * R.
//   MN-major, none: 8 MN x 8 K cores, MN groups at SBO = 128, K groups at
//     LBO = (mn_ext / 8) * 128.
//   alt 2..4 (MN-major, K = 16): the PTX ISA's worked bf16 examples
//     verbatim (9.7.15.5.1.2.1.3), in elements, then Swizzle<b,4,3> on bytes:
//     2: 64B  ((8,4,2),(8,2)):((1,8,256),(32,512)), LBO 256, SBO 512 elements
//     3: 32B  ((8,2,2),(8,2)):((1,8,128),(16,256)), LBO 128, SBO 256
//     4: none ((8,1,2),(8,2)):((1,8,64),(8,128)),   LBO 128, SBO 64
struct wg_layout {
  int mn_major, mode, alt;
  uint32_t lbo, sbo, bytes, off[4];
};
static uint32_t wg_row_bytes(int mode) { return mode == kWg128 ? 128 : mode == kWg64 ? 64 : 32; }
static uint32_t wg_off(const wg_layout &L, int ext, int K, int mn, int k) {
  if (L.alt >= 2) {
    uint32_t el = 0;
    if (L.alt == 2) el = mn % 8 + (mn / 8 % 4) * 8 + (mn / 32) * 256 + (k % 8) * 32 + (k / 8) * 512;
    if (L.alt == 3) el = mn % 8 + (mn / 8 % 2) * 8 + (mn / 16) * 128 + (k % 8) * 16 + (k / 8) * 256;
    if (L.alt == 4) el = mn % 8 + (mn / 8) * 64 + (k % 8) * 8 + (k / 8) * 128;
    const uint32_t b = 2 * el, xor_mask = L.alt == 2 ? 3 : L.alt == 3 ? 1 : 0;
    return b ^ (((b >> 7) & xor_mask) << 4);
  }
  if (L.mode == kWgNone) {
    if (L.mn_major) return (k / 8) * (ext / 8) * 128 + (mn / 8) * 128 + (k % 8) * 16 + (mn % 8) * 2;
    if (L.alt) return (mn / 8) * (K / 8) * 128 + (k / 8) * 128 + (mn % 8) * 16 + (k % 8) * 2;
    return (k / 8) * (ext / 8) * 128 + (mn / 8) * 128 + (mn % 8) * 16 + (k % 8) * 2;
  }
  const uint32_t R = wg_row_bytes(L.mode), E = R / 2;
  uint32_t off;
  if (!L.mn_major) off = (k / E) * (ext * R) + (mn / 8) * (8 * R) + (mn % 8) * R + (k % E) * 2;
  else off = (mn / E) * (K / 8) * (8 * R) + (k / 8) * (8 * R) + (k % 8) * R + (mn % E) * 2;
  const uint32_t xor_mask = L.mode == kWg128 ? 7 : L.mode == kWg64 ? 3 : 1;
  return off ^ (((off >> 7) & xor_mask) << 4);
}
static wg_layout wg_make(int mn_major, int mode, int alt, int ext, int K) {
  wg_layout L{mn_major, mode, alt, 0, 0, 0, {0, 0, 0, 0}};
  if (alt >= 2) {
    L.lbo = alt == 2 ? 512 : 256;
    L.sbo = alt == 2 ? 1024 : alt == 3 ? 512 : 128;
  } else if (mode == kWgNone) {
    L.lbo = mn_major ? (uint32_t)(ext / 8) * 128 : alt ? 128 : (uint32_t)ext * 16;
    L.sbo = mn_major ? 128 : alt ? (uint32_t)K * 16 : 128;
    for (int s = 0; s < K / 16; s++) L.off[s] = 2 * L.lbo * (uint32_t)s;
  } else {
    const uint32_t R = wg_row_bytes(mode), E = R / 2;
    L.lbo = mn_major ? (uint32_t)K * R : 16;  // K-major swizzled: unused ("1")
    L.sbo = 8 * R;
    for (int s = 0; s < K / 16; s++)
      L.off[s] = mn_major ? 16 * R * (uint32_t)s : (16 * s / E) * (ext * R) + (16 * s % E) * 2;
  }
  for (int mn = 0; mn < ext; mn++)
    for (int k = 0; k < K; k++) {
      const uint32_t end = wg_off(L, ext, K, mn, k) + 2;
      if (end > L.bytes) L.bytes = end;
    }
  L.bytes = (L.bytes + 127) & ~127u;
  return L;
}
static uint64_t wg_desc(const wg_layout &L, int base) {
  return ((uint64_t)((L.lbo >> 4) & 0x3fff) << 16) | ((uint64_t)((L.sbo >> 4) & 0x3fff) << 32) |
         ((uint64_t)(base & 7) << 49) | ((uint64_t)(L.mode & 3) << 62);
}
static uint16_t wg_bits(float v, int bf16) { return bf16 ? cuemu_f2bf(v) : cuemu_f2h(v); }
static float wg_a_val(int r, int k) { return (float)((r * 7 + k * 13 + (r * k) % 5) % 9 - 4); }
static float wg_b_val(int k, int c) { return (float)((k * 5 + c * 11 + (k * c) % 7) % 9 - 4); }

struct wg_cfg {
  int a_reg, a_major, a_mode, a_alt, b_major, b_mode, b_alt, n, K, bf16, mode;
  int use_cp = 0, two_groups = 0, b_shift = 0, b_base = 0, threads = 128;
};
static int wg_run(const wg_cfg &c, const char *sm = "90") {
  setenv("ESMT_EMU_SM", sm, 1);  // read at this (forked) case's first CUDA call
  const int n = c.n, K = c.K, steps = K / 16;
  const wg_layout la = wg_make(c.a_major, c.a_mode, c.a_alt, 64, K);
  const wg_layout lb = wg_make(c.b_major, c.b_mode, c.b_alt, n, K);
  std::vector<unsigned char> a_img(la.bytes, 0), b_img(lb.bytes, 0);
  std::vector<uint16_t> a_rm(64 * K);
  std::vector<double> want(64 * n, 0.0), partial(64 * n, 0.0);
  for (int r = 0; r < 64; r++)
    for (int k = 0; k < K; k++) {
      const uint16_t h = wg_bits(wg_a_val(r, k), c.bf16);
      a_rm[r * K + k] = h;
      memcpy(&a_img[wg_off(la, 64, K, r, k)], &h, 2);
    }
  for (int k = 0; k < K; k++)
    for (int col = 0; col < n; col++) {
      const uint16_t h = wg_bits(wg_b_val(k, col), c.bf16);
      memcpy(&b_img[wg_off(lb, n, K, col, k)], &h, 2);
    }
  for (int r = 0; r < 64; r++)
    for (int col = 0; col < n; col++)
      for (int k = 0; k < K; k++) {
        want[r * n + col] += (double)wg_a_val(r, k) * wg_b_val(k, col);
        if (k < 16) partial[r * n + col] += (double)wg_a_val(r, k) * wg_b_val(k, col);
      }
  wg_params p{};
  cudaMalloc((void **)&p.a_img, la.bytes);
  cudaMalloc((void **)&p.b_img, lb.bytes);
  cudaMalloc((void **)&p.a_rm, a_rm.size() * 2);
  cudaMalloc((void **)&p.out, 64 * n * 4);
  cudaMalloc((void **)&p.out_partial, 64 * n * 4);
  cudaMemcpy((void *)p.a_img, a_img.data(), la.bytes, cudaMemcpyHostToDevice);
  cudaMemcpy((void *)p.b_img, b_img.data(), lb.bytes, cudaMemcpyHostToDevice);
  cudaMemcpy((void *)p.a_rm, a_rm.data(), a_rm.size() * 2, cudaMemcpyHostToDevice);
  p.a_bytes = c.a_reg ? 0 : la.bytes;
  p.b_bytes = lb.bytes;
  p.a_desc = wg_desc(la, 0);
  p.b_desc = wg_desc(lb, c.b_base);
  for (int s = 0; s < steps; s++) {
    p.a_off[s] = la.off[s];
    p.b_off[s] = lb.off[s];
  }
  p.b_shift = (uint32_t)c.b_shift;
  p.n = n;
  p.K = K;
  p.a_reg = c.a_reg;
  p.trans_a = c.a_major;
  p.trans_b = c.b_major;
  p.bf16 = c.bf16;
  p.mode = c.mode;
  p.use_cp = c.use_cp;
  p.two_groups = c.two_groups;
  const size_t smem = 1024 + ((p.a_bytes + 1023) & ~1023u) + p.b_shift + lb.bytes;
  ESMT_LAUNCH(1, c.threads, smem, 0, wg_gemm)(p);
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  std::vector<float> got(64 * n), got_partial(64 * n);
  cudaMemcpy(got.data(), p.out, 64 * n * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(got_partial.data(), p.out_partial, 64 * n * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 64 * n; i++) {
    if (c.mode == 1) {  // stored before the wait: the emulator must not have written d yet
      if (got[i] != -7.0f) return fail("wgmma: d changed before wgmma.wait_group");
    } else if ((double)got[i] != want[i]) {
      fprintf(stderr, "wgmma: D(%d, %d) = %g, want %g\n", i / n, i % n, got[i], want[i]);
      return fail("wgmma result");
    } else if (c.two_groups && (double)got_partial[i] != partial[i]) {
      fprintf(stderr, "wgmma: after wait_group 1, D(%d, %d) = %g, want %g\n", i / n, i % n,
              got_partial[i], partial[i]);
      return fail("wgmma result of the first group");
    }
  }
  return 0;
}
// Correct GEMMs (exact: small integers in bf16/f16, f32 sums).
static int case_wg_regA_kmajor128(void) {  // (a) A in registers, B K-major 128B
  return wg_run({1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 0});
}
static int case_wg_smem_nmajor128(void) {  // (b) A K-major 128B, B N-major 128B, via cp.async
  wg_cfg c{0, 0, kWg128, 0, 1, kWg128, 0, 64, 64, 1, 0};
  c.use_cp = 1;
  return wg_run(c);
}
static int case_wg_interleaved(void) {  // (c) no swizzle, K-major, LBO/SBO both ways (f16)
  return wg_run({0, 0, kWgNone, 0, 0, kWgNone, 1, 32, 32, 0, 0});
}
static int case_wg_hd128(void) {  // (d) N = 128: N-major B in two 64-column halves at LBO
  wg_cfg c{0, 0, kWg128, 0, 1, kWg128, 0, 128, 64, 1, 0};
  c.two_groups = 1;
  return wg_run(c);
}
static int case_wg_swizzle64(void) {  // A M-major 64B, B K-major 64B (f16)
  return wg_run({0, 1, kWg64, 0, 0, kWg64, 0, 48, 64, 0, 0});
}
static int case_wg_swizzle32(void) {  // A K-major 32B, B N-major 32B
  return wg_run({0, 0, kWg32, 0, 1, kWg32, 0, 24, 32, 1, 0});
}
static int case_wg_mn_interleaved(void) {  // A M-major and B N-major, no swizzle
  return wg_run({0, 1, kWgNone, 0, 1, kWgNone, 0, 16, 32, 1, 0});
}
static int case_wg_base_offset(void) {  // B's patterns start 512 bytes past 1024: base offset 4
  wg_cfg c{1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 0};
  c.b_shift = 512;
  c.b_base = 4;
  return wg_run(c);
}
static int case_wg_ptx_examples(void) {  // B N-major as the PTX ISA's examples, K = 16
  int r = wg_run({1, 0, kWgNone, 0, 1, kWg64, 2, 64, 16, 1, 0});
  if (!r) r = wg_run({1, 0, kWgNone, 0, 1, kWg32, 3, 32, 16, 1, 0});
  if (!r) r = wg_run({1, 0, kWgNone, 0, 1, kWgNone, 4, 16, 16, 1, 0});
  return r;
}
// Failures.
static int case_wg_d_before_wait(void) { return wg_run({1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 1}); }
static int case_wg_no_fence(void) { return wg_run({1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 2}); }
static int case_wg_write_in_flight(void) {
  return wg_run({0, 0, kWg128, 0, 1, kWg128, 0, 64, 32, 1, 3});
}
static int case_wg_other_warpgroup_write(void) {
  wg_cfg c{1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 6};
  c.threads = 256;
  return wg_run(c);
}
static int case_wg_no_proxy_fence(void) { return wg_run({1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 4}); }
static int case_wg_no_proxy_fence_cp(void) {
  wg_cfg c{0, 0, kWg128, 0, 1, kWg128, 0, 64, 32, 1, 4};
  c.use_cp = 1;
  return wg_run(c);
}
static int case_wg_proxy_fence_dropped(void) {
  setenv("ESMT_EMU_DROP_PROXY_FENCE", "1", 1);
  return wg_run({1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 0});
}
static int case_wg_unaligned_pattern(void) {  // 512 past 1024 with base offset 0
  wg_cfg c{1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 0};
  c.b_shift = 512;
  return wg_run(c);
}
static int case_wg_divergent(void) { return wg_run({1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 7}); }
static int case_wg_never_waited(void) { return wg_run({1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 8}); }
static int case_wg_smem_addr_global(void) {
  return wg_run({1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 9});
}
static int case_wg_sm80(void) { return wg_run({1, 0, kWgNone, 0, 0, kWg128, 0, 64, 64, 1, 4}, "80"); }

// Two ranks (this process and a child) on one emulated GPU each; rank 1 is
// killed by ESMT_EMU_NCCL_KILL inside the all-gather. Rank 0's all-gather
// must hang with no async error, as NCCL's one-node transports leave it:
// for 1.5 s; then, with `abort`, ncclCommAbort must end it within 2 s with
// ncclRemoteError; without, rank 0 waits for the stream (the emulator's
// "never aborted" finding ends it).
static double mono_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static int nccl_dead_peer_case(bool abort_comm) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return fail("ncclGetUniqueId");
  setenv("ESMT_EMU_NCCL_KILL", "1:allgather:1", 1);
  setenv("ESMTRAIN_COMM_TIMEOUT", "1", 1);
  const pid_t peer = fork();  // before any CUDA call: the runtime's threads are per process
  const int rank = peer == 0 ? 1 : 0;
  ncclComm_t comm;
  float *buf;
  cudaStream_t st;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return fail("ncclCommInitRank");
  cudaMalloc((void **)&buf, 2 * 1024 * sizeof(float));
  cudaStreamCreate(&st);
  ncclAllGather(buf + rank * 1024, buf, 1024, ncclFloat32, comm, st);
  if (rank == 1) {  // killed in the all-gather, before this returns
    cudaStreamSynchronize(st);
    _exit(0);
  }
  int status = 0;
  waitpid(peer, &status, 0);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) return fail("rank 1 was not killed");
  ncclResult_t async = ncclSuccess;
  for (const double t0 = mono_s(); mono_s() - t0 < 1.5; usleep(10000)) {
    ncclCommGetAsyncError(comm, &async);
    if (cudaStreamQuery(st) != cudaErrorNotReady || async != ncclSuccess)
      return fail("the all-gather ended before its communicator was aborted");
  }
  if (!abort_comm) return (int)cudaStreamSynchronize(st);
  ncclCommAbort(comm);
  for (const double t0 = mono_s(); cudaStreamQuery(st) == cudaErrorNotReady; usleep(10000))
    if (mono_s() - t0 > 2) return fail("the all-gather still runs 2 s after ncclCommAbort");
  ncclCommGetAsyncError(comm, &async);
  return async == ncclRemoteError ? 0 : fail("no ncclRemoteError after the abort");
}
static int case_nccl_dead_peer_abort(void) { return nccl_dead_peer_case(true); }
static int case_nccl_dead_peer_never_aborted(void) { return nccl_dead_peer_case(false); }

struct tcase {
  const char *name;
  int (*fn)(void);
  bool expect_ok;
  const char *report;  // fragment expected on stderr ("" = no report at all)
};
static const tcase k_cases[] = {
    {"compute", case_compute, true, ""},
    {"race (missing __syncthreads)", case_race, false, "cuda-emu: race: kernel block_sum"},
    {"race (barrier dropped by ESMT_EMU_DROP_BARRIER)", case_dropped_barrier, false,
     "cuda-emu: race: kernel block_sum"},
    {"warp collectives with the full mask", case_warp_full_mask, true, ""},
    {"shuffle mask missing half the warp", case_warp_half_mask, false,
     "with mask 0x0000ffff, which does not name lane 16"},
    {"shuffle mask naming exited lanes", case_warp_mask_exited, false, "which has exited"},
    {"lanes at different warp collectives", case_warp_split, false,
     "which waits at __syncwarp with mask 0xffffffff"},
    {"shuffle mask narrowed by ESMT_EMU_SHFL_MASK", case_warp_mask_mutated, false,
     "cuda-emu: warp-sync: kernel warp_masked"},
    {"copy on a stream of the current device", case_copy_same_device, true, ""},
    {"copy on a stream of another device", case_copy_other_device, false,
     "cudaMemcpyAsync on a stream of device 1 while the thread's current device is 0"},
    {"static __shared__ written before it is read", case_static_smem_ok, true, ""},
    {"static __shared__ read where no thread wrote", case_static_smem_uninit, false,
     "cuda-emu: initcheck: kernel static_partial"},
    {"static __shared__ poisoned at each block start", case_static_smem_poisoned, true,
     "of block (1,0,0) reads a shared-memory byte that no thread of its block has written"},
    {"pinned buffer read after the stream's synchronisation", case_pinned_synced, true, ""},
    {"pinned buffer read while a copy into it is pending", case_pinned_read_early, false,
     "cuda-emu: host-sync: host code at"},
    {"pinned bytes no pending copy touches, on the same page", case_pinned_other_half, true, ""},
    {"pinned source written before the copy read it", case_pinned_source_written, false,
     "has not read it yet"},
    {"pinned buffer read after a sync dropped by ESMT_EMU_DROP_HOST_SYNC",
     case_pinned_sync_dropped, false, "cuda-emu: host-sync: host code at"},
    {"lanes exchange through shared memory after __syncwarp (interleaved)", case_lane_swap_synced,
     true, ""},
    {"lanes exchange through shared memory without __syncwarp", case_lane_swap_race, false,
     "of its own warp wrote, with no __syncwarp"},
    {"... and with lanes interleaved the values go wrong", case_lane_swap_interleaved, false,
     "lane_swap: a lane read its neighbour's stale slot"},
    {"warp-synchronous reduction with __syncwarp", case_warp_tail_synced, true, ""},
    {"warp-synchronous reduction without __syncwarp", case_warp_tail_race, false,
     "writes a byte that thread (0,0,0) [warp 0] of its own warp read"},
    {"dynamic shared memory bounds", case_smem_bounds, false, "is past the launch's 1024 bytes"},
    {"global bounds", case_global_bounds, false, "bytes past the end of the 4000-byte allocation"},
    {"host pointer in a kernel", case_host_pointer, false, "host memory"},
    {"blocks writing one word", case_blocks, false, "of the same launch wrote"},
    {"atomicAdd from many blocks on one word", case_atomics, true, ""},
    {"float4 atomicAdd from many blocks", case_atomics4, true, ""},
    {"float4 atomicAdd at a 4-byte offset", case_atomics4_misaligned, false,
     "needs 16-byte alignment"},
    {"float4 atomicAdd on sm_80", case_atomics4_sm80, false, "vector atomicAdd needs sm_90"},
    {"a plain write among other blocks' atomics", case_atomic_and_plain, false,
     "of the same launch wrote"},
    {"stream order with event wait", case_stream_ok, true, ""},
    {"stream order without event wait", case_stream_missing_wait, false, "cuda-emu: stream-order"},
    {"write after an unordered read hidden by an ordered one", case_write_after_hidden_read, false,
     "overwrites device memory still being read"},
    {"invalid launch configuration", case_bad_config, true, "invalid configuration argument"},
    {"cp.async with wait_group and barrier", case_cp_async_ok, true, ""},
    {"cp.async read before its wait_group", case_cp_async_no_wait, false,
     "has not written yet"},
    {"cp.async waited but no barrier", case_cp_async_no_barrier, false,
     "cuda-emu: race: kernel cp_reverse"},
    {"cp.async wait dropped by ESMT_EMU_DROP_CP_WAIT", case_cp_async_wait_dropped, false,
     "has not written yet"},
    {"cp.async on sm_75", case_cp_async_sm75, false, "cp.async needs sm_80"},
    {"pool: same-stream reuse while the host runs ahead", case_pool_same_stream_reuse, true, ""},
    {"wgmma: A in registers, B K-major 128B swizzle", case_wg_regA_kmajor128, true, ""},
    {"wgmma: A K-major and B N-major 128B swizzle from cp.async", case_wg_smem_nmajor128, true, ""},
    {"wgmma: no swizzle, K-major, LBO/SBO (f16)", case_wg_interleaved, true, ""},
    {"wgmma: n128, N-major B halves at LBO, chained k-steps, two groups", case_wg_hd128, true, ""},
    {"wgmma: 64B swizzle, A M-major, B K-major (f16)", case_wg_swizzle64, true, ""},
    {"wgmma: 32B swizzle, A K-major, B N-major", case_wg_swizzle32, true, ""},
    {"wgmma: no swizzle, A M-major, B N-major", case_wg_mn_interleaved, true, ""},
    {"wgmma: swizzle patterns off 1024 with the base offset", case_wg_base_offset, true, ""},
    {"wgmma: the PTX ISA's MN-major bf16 layout examples", case_wg_ptx_examples, true, ""},
    {"wgmma: d read before wgmma.wait_group holds the old values", case_wg_d_before_wait, true, ""},
    {"wgmma: mma_async without wgmma.fence", case_wg_no_fence, false,
     "cuda-emu: wgmma: kernel wg_gemm: wgmma.mma_async without a wgmma.fence"},
    {"wgmma: operand written before the wait", case_wg_write_in_flight, false,
     "may still be reading"},
    {"wgmma: another warpgroup writes an operand without a barrier", case_wg_other_warpgroup_write,
     false, "cuda-emu: race: kernel wg_gemm"},
    {"wgmma: stores without fence.proxy.async", case_wg_no_proxy_fence, false,
     "missing fence.proxy.async"},
    {"wgmma: cp.async landed without fence.proxy.async", case_wg_no_proxy_fence_cp, false,
     "missing fence.proxy.async"},
    {"wgmma: fence dropped by ESMT_EMU_DROP_PROXY_FENCE", case_wg_proxy_fence_dropped, false,
     "missing fence.proxy.async"},
    {"wgmma: swizzle pattern off 1024 without base offset", case_wg_unaligned_pattern, false,
     "not at its 1024-byte repeat boundary, but the descriptor's base offset is 0"},
    {"wgmma: a thread of the warpgroup exits before mma_async", case_wg_divergent, false,
     "(wgmma.mma_async) while others of their warpgroup"},
    {"wgmma: results never waited for", case_wg_never_waited, false,
     "that no wgmma.wait_group retired"},
    {"wgmma: smem_addr of a global pointer", case_wg_smem_addr_global, false,
     "which is not in the launch's"},
    {"wgmma on sm_80", case_wg_sm80, false, "wgmma.fence needs sm_90a, the device is sm_80"},
    {"nccl: a killed peer's all-gather hangs until ncclCommAbort", case_nccl_dead_peer_abort, true,
     "ESMT_EMU_NCCL_KILL: rank 1 killed in its allgather #1 (ncclAllGather)"},
    {"nccl: a collective never aborted after its peer died", case_nccl_dead_peer_never_aborted,
     false, "in a collective and its communicator was never aborted (rank 1 (pid"},
};

int main(void) {
  int passed = 0, failed = 0;
  for (const tcase &c : k_cases) {
    char path[] = "/tmp/esmt-emu-rt-XXXXXX";
    int fd = mkstemp(path);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fd, 2);
      _exit(c.fn() == 0 ? 0 : 3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    std::string err;
    char buf[4096];
    ssize_t k;
    lseek(fd, 0, SEEK_SET);
    while ((k = read(fd, buf, sizeof buf)) > 0) err.append(buf, (size_t)k);
    close(fd);
    unlink(path);
    const bool exited_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    const bool crashed = !WIFEXITED(st);
    bool ok = !crashed && exited_ok == c.expect_ok;
    if (*c.report) ok = ok && err.find(c.report) != std::string::npos;
    else ok = ok && err.find("cuda-emu:") == std::string::npos;
    printf("%s: %s\n", ok ? "ok  " : "FAIL", c.name);
    if (!ok) printf("  exit %d%s, stderr:\n%s\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                    crashed ? " (crashed)" : "", err.c_str());
    (ok ? passed : failed)++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
