/* SPDX-License-Identifier: MIT */
/* Kernel-side CUDA for the host emulation (C++ only, included by the
 * emulated cuda_runtime.h). Kernels are ordinary functions; every CUDA
 * thread of a block runs as a coroutine of the emulator's block scheduler
 * (backends/cuda_emu/src/emu_block.cpp): warps run independently, in a
 * seeded random order, between the points where CUDA synchronises them
 * (__syncthreads for the block; shuffles, mma.sync and ldmatrix for one
 * warp). `__shared__` variables are thread-local statics (a block runs on
 * its stream's worker thread, one block at a time); every load and store of kernel code is instrumented (compiled
 * with -fsanitize=thread, whose hooks the emulator implements) for shared
 * memory races, bounds and stream order. See backends/cuda_emu/README.md. */
#ifndef CUEMU_KERNEL_H
#define CUEMU_KERNEL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <utility>

#include "cuemu_half.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __align__(n) alignas(n)
#define __restrict__ __restrict

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3() {}
  dim3(unsigned a, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct float2 {
  float x, y;
};
struct float4 {
  float x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct uint4 {
  unsigned x, y, z, w;
};
struct int2 {
  int x, y;
};
static inline uint2 make_uint2(unsigned a, unsigned b) { return uint2{a, b}; }
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
  return uint4{a, b, c, d};
}
static inline float2 make_float2(float a, float b) { return float2{a, b}; }
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }

namespace cuemu {
/* The block being run: written by the scheduler before each coroutine
 * resumes (one block runs at a time in a process). */
struct kernel_state {
  dim3 thread_idx, block_idx, block_dim, grid_dim;
};
extern kernel_state g_k CUEMU_HIDDEN;

CUEMU_HIDDEN void syncthreads(const char *file, int line);
/* Warp collectives with their member mask: every lane the mask names must
 * be live and execute the same collective with the same mask, and no lane
 * outside it may (a "warp-sync" finding, compute-sanitizer's synccheck). */
CUEMU_HIDDEN void syncwarp(unsigned mask = 0xffffffffu);
CUEMU_HIDDEN uint64_t shfl(uint64_t v, int src_lane_or_mask, int width, int mode, unsigned mask);
CUEMU_HIDDEN unsigned ballot(unsigned mask, int pred);
CUEMU_HIDDEN unsigned char *dynamic_smem();
[[noreturn]] CUEMU_HIDDEN void trap(const char *why);
/* mma.sync.m16n8k16.row.col (f32 accumulate) and ldmatrix.x2.trans, per
 * the PTX ISA register layouts, as one warp-collective step each. */
CUEMU_HIDDEN void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2], int bf16);
CUEMU_HIDDEN void ldsm_x2_trans(uint32_t b[2], const void *p);
/* ldmatrix.x4 (trans = 0) and ldmatrix.x4.trans (trans = 1). */
CUEMU_HIDDEN void ldsm_x4(uint32_t r[4], const void *p, int trans);
/* cp.async.{ca,cg}.shared.global (4, 8 or 16 bytes), commit_group and
 * wait_group N: the copy is pending until the issuing thread's wait retires
 * its group; touching the destination before that is reported as a race. */
CUEMU_HIDDEN void cp_async(void *dst, const void *src, int bytes);
CUEMU_HIDDEN void cp_async_commit();
CUEMU_HIDDEN void cp_async_wait(int pending_groups);
/* atomicAdd(float *, float): checked as a write that does not race with
 * other blocks' atomics on the same word. */
CUEMU_HIDDEN float atomic_add_f32(float *p, float v);
/* atomicAdd(float4 *, float4) (compute capability 9.x; an illegal
 * instruction below): n adds, the address 4n-byte aligned (else a
 * misaligned-address fault); the old values into old[n]. */
CUEMU_HIDDEN void atomic_add_f32v(float *p, const float *v, int n, float *old);
/* The running launch's device as 10 * major + minor (what __CUDA_ARCH__ / 10
 * is in a real device pass), for code that picks an instruction by it. */
CUEMU_HIDDEN int device_arch();

/* Hopper's warpgroup MMA (PTX wgmma, sm_90a; an illegal instruction below
 * sm_90), src/emu_wgmma.cpp. A warpgroup is the 4 warps 4w..4w+3 (threads
 * 128w..128w+127); every thread of it executes each of these.
 * smem_addr: __cvta_generic_to_shared of a dynamic shared memory pointer.
 * The emulated window puts dynamic shared memory at shared address 0x410
 * (16-byte, not 128- or 1024-byte aligned): code that assumes a 1024-aligned
 * start for a swizzled layout reads wrong data here. Any other pointer is
 * reported and stops the kernel. */
CUEMU_HIDDEN uint32_t smem_addr(const void *p);
/* wgmma.fence.sync.aligned: needed before a thread's first mma_async and
 * again after each of its wgmma_wait (a finding otherwise). */
CUEMU_HIDDEN void wgmma_fence();
/* wgmma.commit_group.sync.aligned / wgmma.wait_group.sync.aligned N: a
 * thread's results reach its d only when its wait retires their group, so d
 * read before the wait holds the old values. */
CUEMU_HIDDEN void wgmma_commit();
CUEMU_HIDDEN void wgmma_wait(int pending_groups);
/* fence.proxy.async.shared::cta: orders this thread's earlier generic
 * shared-memory writes (stores, landed cp.async) before later wgmma reads
 * (which also need a __syncthreads when another warp wrote).
 * ESMT_EMU_DROP_PROXY_FENCE=1 makes it a no-op (mutation tests). */
CUEMU_HIDDEN void fence_proxy_async();
/* wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{f16|bf16}.{f16|bf16}:
 * D[64 x n] = A[64 x 16] * B[16 x n] + (scale_d ? D : 0), n a multiple of 8
 * in 8..256. d: this thread's n/2 f32 accumulators in PTX's D fragment
 * layout (warp w of the warpgroup, lane = 4g + q: d[4j + e] is D(16w + g +
 * 8 (e >> 1 & 1), 8j + 2q + (e & 1))). A from registers when a_regs (4 x b32,
 * PTX's m64nNk16 A fragment: a[0] (16w+g, 2q..2q+1), a[1] (+8 rows), a[2]
 * (+8 columns), a[3] (both), the lower column in the low half), else from
 * shared memory through the matrix descriptor a_desc (trans_a: 0 K-major,
 * 1 M-major); B through b_desc (trans_b: 0 K-major, 1 N-major); bf16: the
 * input type (else f16). Asynchronous: see wgmma_wait. */
CUEMU_HIDDEN void wgmma_m64k16(float *d, int n, const uint32_t *a_regs, uint64_t a_desc,
                               uint64_t b_desc, int scale_d, int trans_a, int trans_b, int bf16);

/* Host side of a launch: the configuration, then the kernel bound to its
 * exact parameter types so that arguments convert as in a real launch. */
typedef void (*thread_body)(void *closure);
CUEMU_HIDDEN void launch_kernel(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                const char *name, const void *fn, thread_body body, void *closure,
                                void (*destroy)(void *closure));
/* Called by each emulated thread after it has copied its arguments: from
 * here on, its memory accesses are checked. */
CUEMU_HIDDEN void kernel_body_begins();

template <typename... P>
struct launcher {
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  const char *name;
  void (*fn)(P...);
  struct closure {
    void (*fn)(P...);
    std::tuple<P...> args;
  };
  static void run(void *c) {
    closure local = *static_cast<closure *>(c); /* this thread's copy of the parameters */
    kernel_body_begins();
    std::apply(local.fn, local.args);
  }
  static void destroy(void *c) { delete static_cast<closure *>(c); }
  void operator()(P... args) const {
    closure *c = new closure{fn, std::tuple<P...>(args...)};
    launch_kernel(grid, block, smem, stream, name, (const void *)fn, run, c, destroy);
  }
};
struct launch_cfg {
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  const char *name;
  template <typename... P>
  launcher<P...> bind(void (*fn)(P...)) const {
    return launcher<P...>{grid, block, smem, stream, name, fn};
  }
};
}  // namespace cuemu

#define threadIdx (::cuemu::g_k.thread_idx)
#define blockIdx (::cuemu::g_k.block_idx)
#define blockDim (::cuemu::g_k.block_dim)
#define gridDim (::cuemu::g_k.grid_dim)

/* kernel<<<grid, block, smem, stream>>>(args) is written
 * ESMT_LAUNCH(grid, block, smem, stream, kernel)(args) in the sources. */
#define ESMT_LAUNCH(grid, block, smem, stream, ...) \
  ::cuemu::launch_cfg{dim3(grid), dim3(block), (size_t)(smem), (stream), #__VA_ARGS__}.bind(__VA_ARGS__)
#define ESMT_DYNAMIC_SMEM(name) unsigned char *name = ::cuemu::dynamic_smem()
#define ESMT_PTX_EMULATED 1

/* The call site travels with the barrier so that a mutation test can drop
 * one (ESMT_EMU_DROP_BARRIER=file:line). */
#define __syncthreads() ::cuemu::syncthreads(__FILE__, __LINE__)
static inline void __syncwarp(unsigned mask = 0xffffffffu) { ::cuemu::syncwarp(mask); }
static inline unsigned __ballot_sync(unsigned mask, int pred) { return ::cuemu::ballot(mask, pred); }
[[noreturn]] static inline void __trap() { ::cuemu::trap("__trap()"); }

template <typename T>
static inline T cuemu_shfl_t(unsigned mask, T v, int lane, int width, int mode) {
  static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
  uint64_t u = 0;
  memcpy(&u, &v, sizeof v);
  u = ::cuemu::shfl(u, lane, width, mode, mask);
  T r;
  memcpy(&r, &u, sizeof r);
  return r;
}
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return cuemu_shfl_t(mask, v, lane_mask, width, 0);
}
template <typename T>
static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return cuemu_shfl_t(mask, v, src, width, 1);
}
template <typename T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return cuemu_shfl_t(mask, v, (int)delta, width, 2);
}
template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline float atomicAdd(float *p, float v) { return ::cuemu::atomic_add_f32(p, v); }
static inline float4 atomicAdd(float4 *p, float4 v) {
  float old[4], add[4] = {v.x, v.y, v.z, v.w};
  ::cuemu::atomic_add_f32v(reinterpret_cast<float *>(p), add, 4, old);
  return make_float4(old[0], old[1], old[2], old[3]);
}

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline size_t min(size_t a, size_t b) { return a < b ? a : b; }
static inline size_t max(size_t a, size_t b) { return a > b ? a : b; }
static inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
static inline int __float_as_int(float f) {
  int i;
  memcpy(&i, &f, 4);
  return i;
}
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __fdividef(float a, float b) { return a / b; }

static inline float2 __half22float2(__half2 h) { return float2{(float)h.x, (float)h.y}; }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{(float)h.x, (float)h.y}; }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__nv_bfloat16(a), __nv_bfloat16(b)};
}

#endif
