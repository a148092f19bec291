/* SPDX-License-Identifier: MIT */
// Internals of the emulated runtime shared between its own files (the
// cuBLASLt and NCCL stand-ins use emu_internal.h only).
#ifndef CUEMU_PRIVATE_H
#define CUEMU_PRIVATE_H

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "emu_internal.h"

namespace cuemu {

constexpr int kMaxSlots = 64;     // streams alive at once, all devices
constexpr uint16_t kNoSlot = 0xffff;

// emu_config.cpp
void set_current_device(int d);
cudaError_t take_last_error(bool clear);
bool strict();

// emu_memory.cpp
cudaError_t device_alloc(int dev, size_t bytes, mem_kind kind, void **out,
                         const void *stream = nullptr);
// Remove the allocation at p (exactly its base); false if none.
bool device_release(void *p, mem_kind *kind, size_t *size);
void pool_trim(int dev);  // at a synchronisation: back to the release threshold
void memory_stats_json(FILE *f);
char *device_arena(int dev, size_t *span);
bool find_region_below(const void *p, region *out);  // the nearest allocation below p  // NULL before the first allocation

// emu_pinned.cpp: pinned host memory, mapped twice (the user's pages and
// an alias the stream workers copy through), and the guards that keep the
// host off bytes a pending cudaMemcpyAsync writes (PROT_NONE) or has yet
// to read (read-only) until the host has seen the copy complete.
void *pinned_map(size_t size);
void pinned_unmap(void *p);
void *pinned_alias(const void *p);  // p itself when not pinned
void pinned_guard(const void *p, size_t n, bool host_may_read, int device, int slot,
                  uint32_t clock, const char *api);
void pinned_host_saw(const uint32_t *host_vc);  // after the host clock advanced
void pinned_worker_starts();                    // a stream worker thread

// emu_stream.cpp
void device_sync(int dev);       // every stream of dev, host clock joined
const char *op_name(uint32_t op_id);  // recent operations, for reports

// emu_check.cpp
// Stream-order and inter-block checks of [p, p + n) inside region r.
void shadow_access(const op_ctx &c, const region &r, const char *p, size_t n, bool write,
                   uint32_t block);
// A kernel thread's access (the __tsan_* hooks call it; so does ldmatrix).
void kernel_access(const void *p, size_t n, bool write, bool atomic = false);
// Set in the block number shadow_access records for an atomic write.
constexpr uint32_t kAtomicBlock = 0x80000000u;
void check_init_segments();
void smem_new_epoch();  // a block passes __syncthreads
void smem_new_block();  // a block starts (also forgets pending cp.async)
// cp.async: the destination becomes pending at issue, lands at the wait.
void smem_async_issue(const void *dst, size_t n);
void smem_async_land(const void *dst, size_t n);
// wgmma (emu_wgmma.cpp): the barrier interval now; fence.proxy.async by the
// running thread; an async-proxy read of [p, p + n) of dynamic shared memory
// by operation `seq` of warpgroup wg (p in bounds): checked against generic
// writes not yet ordered before it (same barrier interval, cp.async pending,
// no fence.proxy.async after the write), then recorded as in flight until
// that operation is retired (a later write before then is a race).
uint32_t smem_epoch();
void smem_proxy_fence();
void smem_wgmma_read(const void *p, size_t n, int wg, uint32_t seq);

// emu_block.cpp: the kernel being run, for the checkers.
struct ethread;
struct launch_info {
  const char *name;
  size_t smem;           // dynamic shared memory bytes of the launch
  const op_ctx *ctx;     // its stream operation
  uint32_t block_linear; // the block being run
  unsigned bx, by, bz;   // its index
  int dev;
  int aborted;           // cudaError_t that stops the grid, 0 while running
  uint32_t reports;      // findings in this launch (printing is capped)
  uint32_t initchecks;   // uninitialised shared-memory reads in this launch (capped too)
};
extern launch_info g_launch;
extern ethread *g_cur;
extern char *g_stk_lo, *g_stk_hi;
extern unsigned char *g_dsmem;
constexpr size_t kDynSmemMax = 256 * 1024;
// The shared-window address of the first byte of dynamic shared memory
// (what __cvta_generic_to_shared gives, cuemu::smem_addr): 16-byte aligned
// but deliberately not 128- or 1024-byte aligned, so that a kernel assuming
// an aligned start (for a swizzled wgmma layout) computes wrong addresses
// here. The generic pointer g_dsmem has the same address modulo 4096, so a
// kernel aligning its generic pointer gets the same alignment in the window.
constexpr uint32_t kDynSmemWindow = 0x410;
int cur_tid();
void cur_thread_desc(char *buf, size_t n);  // "thread (x,y,z) of warp w, block (..)"
bool cur_checking();
[[noreturn]] void abort_kernel(cudaError_t e);
int max_dynamic_smem(const void *fn);
void set_max_dynamic_smem(const void *fn, int bytes);
void kernel_counts(uint64_t *kernels, uint64_t *blocks);
int block_threads();     // threads of the running block
void yield_warpgroup();  // wait at a warpgroup collective (all 128 threads)
// Warp collectives warp `warp` of the running block has completed: two
// accesses of its lanes with the same generation are not ordered (the
// intra-warp race check).
uint32_t warp_generation(int warp);
// Under ESMT_EMU_INTERLEAVE=1, maybe let another lane run first (the
// running thread is about to access shared memory).
void interleave_point();

// emu_wgmma.cpp
void wgmma_block_begins(int nthreads);
void wgmma_thread_exits(int tid);  // reports wgmma results never waited for
// Whether a shared-memory write by thread tid is ordered after operation seq
// of warpgroup wg completed: 0 no (a race), 1 yes for tid (its own
// wgmma.wait_group retired it), 2 yes for every thread (retired before the
// last __syncthreads).
int wgmma_write_ordered(int wg, uint32_t seq, int tid);

}  // namespace cuemu

#endif
