/* SPDX-License-Identifier: MIT */
// Kernel execution: every CUDA thread of a block is a coroutine on its own
// stack. The scheduler picks a warp at random (seeded) among those with
// runnable threads and runs each of its threads to its next
// synchronisation point: __syncthreads waits for the whole block, a
// shuffle, mma.sync or ldmatrix for the thread's warp only, wgmma.mma_async
// for the thread's warpgroup (4 warps, emu_wgmma.cpp), so warps run
// independently between block barriers, in a different order for each
// seed. One block runs at a time in the process (g_exec), which is what
// lets `__shared__` variables be plain statics.
#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>
#include <cstdlib>

#include "emu_private.h"

namespace cuemu {

kernel_state g_k;

namespace {
constexpr int kMaxThreads = 1024;
constexpr size_t kStack = 256 * 1024, kGuard = 4096;
enum tstate { T_READY, T_WARP, T_BAR, T_DONE, T_WG };
}  // namespace

struct ethread {
  void *sp;
  int state;
  int tid;
  bool checking;
  dim3 idx;
};

launch_info g_launch;
ethread *g_cur;
char *g_stk_lo, *g_stk_hi;
unsigned char *g_dsmem;

namespace {
std::mutex g_exec;  // one block at a time, process-wide
ethread g_threads[kMaxThreads];
void *g_sched_sp;
int g_nthreads;
thread_body g_body;
void *g_closure;
uint64_t g_xch[kMaxThreads];                         // shuffle exchange
// The warp collective each thread waits at, and the mask it gave: checked
// against the other lanes' once the warp has arrived (synccheck).
struct warp_op {
  int kind;
  unsigned mask;
};
warp_op g_warp_op[kMaxThreads];
// Per warp: completed warp collectives in this block (the race checker's
// intra-warp interval; a __syncthreads also ends one).
uint32_t g_warp_gen[kMaxThreads / 32];
// mma.sync operands of each warp, decoded: A[row][k] and B transposed,
// Bt[col][k] (rows of k contiguous for the dot products).
float g_mma_a[kMaxThreads / 32][16][16], g_mma_bt[kMaxThreads / 32][8][16];
const void *g_pbuf[kMaxThreads];                     // ldmatrix row addresses
// cp.async copies in flight per thread: read from global memory at issue,
// written to shared memory at the issuing thread's cp.async.wait_group
// (group = how many commit_groups preceded the issue).
struct async_copy {
  unsigned char *dst;
  unsigned char data[16];
  int n;
  uint32_t group;
};
std::vector<async_copy> g_async[kMaxThreads];
uint32_t g_commits[kMaxThreads];
std::mt19937_64 g_rng;
std::map<const void *, int> g_max_dyn_smem;          // cudaFuncSetAttribute
std::mutex g_attr_mu;
uint64_t g_kernels, g_blocks;
}  // namespace

}  // namespace cuemu

// Context switch (x86-64 System V): save the callee-saved registers on the
// current stack, store its pointer in *save, switch to `to`, restore.
extern "C" void cuemu_switch(void **save, void *to) __attribute__((visibility("hidden")));
#if defined(__x86_64__)
__asm__(
    ".text\n"
    ".globl cuemu_switch\n"
    ".hidden cuemu_switch\n"
    ".type cuemu_switch,@function\n"
    "cuemu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cuemu_switch, .-cuemu_switch\n");
#else
#error "the CUDA emulator's coroutines are written for x86-64"
#endif

namespace cuemu {

namespace {
// Land thread tid's cp.async copies of groups < `before`: no longer pending,
// then written as that thread (the race checker sees the write here).
void land_async(int tid, uint32_t before) {
  std::vector<async_copy> &q = g_async[tid];
  size_t keep = 0;
  for (size_t i = 0; i < q.size(); i++) {
    async_copy &c = q[i];
    if (c.group < before) {
      smem_async_land(c.dst, (size_t)c.n);
      kernel_access(c.dst, (size_t)c.n, true);
      memcpy(c.dst, c.data, (size_t)c.n);
    } else {
      q[keep++] = c;
    }
  }
  q.resize(keep);
}

[[noreturn]] void thread_entry() {
  ethread *t = g_cur;
  t->checking = false;  // until the arguments are copied (kernel_body_begins)
  g_body(g_closure);
  wgmma_thread_exits(t->tid);
  land_async(t->tid, UINT32_MAX);  // copies never waited for still land
  t->checking = false;
  t->state = T_DONE;
  cuemu_switch(&t->sp, g_sched_sp);
  __builtin_unreachable();
}

void init_stacks() {
  if (g_stk_lo) return;
  const size_t total = (size_t)kMaxThreads * (kStack + kGuard);
  void *p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return;
  for (int i = 0; i < kMaxThreads; i++)
    mprotect((char *)p + (size_t)i * (kStack + kGuard), kGuard, PROT_NONE);  // overflow traps
  g_stk_lo = (char *)p;
  g_stk_hi = (char *)p + total;
  // Dynamic shared memory starts kDynSmemWindow bytes into a page, so that
  // its generic address has the alignment of its shared-window address.
  void *d = mmap(nullptr, kDynSmemMax + 65536 + 4096, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_dsmem = d == MAP_FAILED ? nullptr : (unsigned char *)d + (kDynSmemWindow & 4095u);
}

void prepare(ethread *t, int i) {
  char *top = g_stk_lo + (size_t)(i + 1) * (kStack + kGuard);
  void **sp = (void **)((uintptr_t)top & ~(uintptr_t)15);
  *--sp = nullptr;                     // alignment slot (a return address)
  *--sp = (void *)thread_entry;        // where `ret` goes
  for (int r = 0; r < 6; r++) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
  uint32_t ctl[2];
  __asm__ volatile("stmxcsr %0" : "=m"(ctl[0]));
  __asm__ volatile("fnstcw %0" : "=m"(ctl[1]));
  sp--;
  memcpy(sp, ctl, 8);
  t->sp = sp;
  t->state = T_READY;
  t->tid = i;
  t->checking = false;
  g_async[i].clear();
  g_commits[i] = 0;
}

void yield(int state) {
  ethread *t = g_cur;
  t->state = state;
  cuemu_switch(&t->sp, g_sched_sp);
}

// ESMT_EMU_INTERLEAVE=1: lanes of a warp interleave at shared-memory
// accesses (a seeded coin at each), starting from a random lane, instead of
// each running to its next synchronisation point in lane order, so that
// intra-warp hazards change results as well as being reported.
bool interleaving() {
  static const bool on = [] {
    const char *e = getenv("ESMT_EMU_INTERLEAVE");
    return e && e[0] == '1';
  }();
  return on;
}

void resume(ethread *t) {
  g_cur = t;
  g_k.thread_idx = t->idx;
  cuemu_switch(&g_sched_sp, t->sp);
}

const char *const kWarpOpNames[] = {"__syncwarp", "__shfl_xor_sync", "__shfl_sync",
                                    "__shfl_down_sync", "__ballot_sync", "mma.sync",
                                    "ldmatrix.x2.trans", "ldmatrix.x4"};

// Warp w has arrived at a collective (every live lane waits at one): what
// compute-sanitizer's synccheck checks. Each waiting lane must be in its
// own mask, and every lane its mask names must be live and wait at the same
// collective with the same mask. One finding per warp.
void check_warp_collective(int w) {
  const int w0 = w * 32;
  // Fast path: every waiting lane at one collective with one mask, which
  // names exactly the waiting lanes.
  unsigned waiting = 0;
  int first = -1;
  bool same = true;
  for (int l = 0; l < 32 && w0 + l < g_nthreads; l++) {
    if (g_threads[w0 + l].state != T_WARP) continue;
    waiting |= 1u << l;
    if (first < 0) first = l;
    same = same && g_warp_op[w0 + l].kind == g_warp_op[w0 + first].kind &&
           g_warp_op[w0 + l].mask == g_warp_op[w0 + first].mask;
  }
  if (first < 0 || (same && g_warp_op[w0 + first].mask == waiting)) return;
  char problem[200] = "";
  int who = -1;
  for (int l = 0; l < 32 && w0 + l < g_nthreads && !*problem; l++) {
    if (g_threads[w0 + l].state != T_WARP) continue;
    const warp_op op = g_warp_op[w0 + l];
    who = l;
    if (!(op.mask >> l & 1u)) {
      snprintf(problem, sizeof problem, "%s with mask 0x%08x, which does not name lane %d",
               kWarpOpNames[op.kind], op.mask, l);
      break;
    }
    for (int j = 0; j < 32 && !*problem; j++) {
      if (!(op.mask >> j & 1u)) continue;
      const int t = w0 + j;
      if (t >= g_nthreads || g_threads[t].state == T_DONE)
        snprintf(problem, sizeof problem, "%s with mask 0x%08x, which names lane %d, %s",
                 kWarpOpNames[op.kind], op.mask, j,
                 t >= g_nthreads ? "past the block's last thread" : "which has exited");
      else if (g_warp_op[t].kind != op.kind || g_warp_op[t].mask != op.mask)
        snprintf(problem, sizeof problem,
                 "%s with mask 0x%08x, which names lane %d, which waits at %s with mask 0x%08x",
                 kWarpOpNames[op.kind], op.mask, j, kWarpOpNames[g_warp_op[t].kind],
                 g_warp_op[t].mask);
    }
  }
  if (!*problem || g_launch.reports++ >= 3) return;
  const ethread *t = &g_threads[w0 + who];
  report(g_launch.dev, "warp-sync", "kernel %s: thread (%u,%u,%u) [lane %d of warp %d] of block "
         "(%u,%u,%u) executes %s", g_launch.name, t->idx.x, t->idx.y, t->idx.z, who, w,
         g_launch.bx, g_launch.by, g_launch.bz, problem);
}

// Run one block to completion; false when it was aborted.
bool run_block(dim3 block) {
  const int n = g_nthreads, nwarps = (n + 31) / 32;
  for (int i = 0; i < n; i++) {
    prepare(&g_threads[i], i);
    g_threads[i].idx = dim3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
  }
  if (g_dsmem && g_launch.smem) memset(g_dsmem, 0xff, g_launch.smem);  // uninitialised: NaN
  memset(g_warp_gen, 0, sizeof g_warp_gen);
  smem_new_block();
  wgmma_block_begins(n);
  std::vector<int> ready;
  for (;;) {
    ready.clear();
    for (int w = 0; w < nwarps; w++)
      for (int l = 0; l < 32 && w * 32 + l < n; l++)
        if (g_threads[w * 32 + l].state == T_READY) {
          ready.push_back(w);
          break;
        }
    if (!ready.empty()) {
      const int w = ready[g_rng() % ready.size()];
      const int first = interleaving() ? (int)(g_rng() % 32) : 0;
      for (int k = 0; k < 32; k++) {
        const int l = (first + k) % 32;
        if (w * 32 + l >= n) continue;
        ethread *t = &g_threads[w * 32 + l];
        if (t->state != T_READY) continue;
        resume(t);
        if (g_launch.aborted) return false;
      }
      continue;
    }
    // Nothing runnable: complete a warp collective, else a block barrier.
    bool progress = false;
    for (int w = 0; w < nwarps; w++) {
      int live = 0, at = 0;
      for (int l = 0; l < 32 && w * 32 + l < n; l++) {
        const int s = g_threads[w * 32 + l].state;
        live += s != T_DONE;
        at += s == T_WARP;
      }
      if (live && at == live) {
        check_warp_collective(w);
        g_warp_gen[w]++;
        for (int l = 0; l < 32 && w * 32 + l < n; l++)
          if (g_threads[w * 32 + l].state == T_WARP) g_threads[w * 32 + l].state = T_READY;
        progress = true;
      }
    }
    if (progress) continue;
    // A warpgroup collective (wgmma.mma_async): all 128 threads, none exited.
    bool at_wg = false;
    for (int g = 0; g * 128 < n; g++) {
      int at = 0;
      for (int i = g * 128; i < g * 128 + 128 && i < n; i++) at += g_threads[i].state == T_WG;
      at_wg = at_wg || at;
      if (at == 128) {
        for (int i = g * 128; i < g * 128 + 128; i++) g_threads[i].state = T_READY;
        progress = true;
      }
    }
    if (progress) continue;
    int live = 0, bar = 0;
    for (int i = 0; i < n; i++) {
      live += g_threads[i].state != T_DONE;
      bar += g_threads[i].state == T_BAR;
    }
    if (!live) return true;
    if (bar == live) {
      for (int i = 0; i < n; i++)
        if (g_threads[i].state == T_BAR) g_threads[i].state = T_READY;
      smem_new_epoch();
      continue;
    }
    if (at_wg)
      report(g_launch.dev, "deadlock",
             "kernel %s, block (%u,%u,%u): threads wait at a warpgroup collective "
             "(wgmma.mma_async) while others of their warpgroup wait at __syncthreads or a warp "
             "collective, or have exited (divergent synchronisation)",
             g_launch.name, g_launch.bx, g_launch.by, g_launch.bz);
    else
      report(g_launch.dev, "deadlock",
             "kernel %s, block (%u,%u,%u): threads wait at a warp collective while others of "
             "their warp wait at __syncthreads or have exited (divergent synchronisation)",
             g_launch.name, g_launch.bx, g_launch.by, g_launch.bz);
    g_launch.aborted = cudaErrorLaunchFailure;
    return false;
  }
}

cudaError_t run_grid(const op_ctx &c, dim3 grid, dim3 block, size_t smem, const char *name,
                     thread_body body, void *closure) {
  std::lock_guard<std::mutex> g(g_exec);
  init_stacks();
  check_init_segments();  // this worker thread's `__shared__` block
  if (!g_stk_lo || !g_dsmem) {
    report(c.device, "emulator", "cannot map coroutine stacks for %s", name);
    return cudaErrorLaunchOutOfResources;
  }
  g_launch = launch_info{};
  g_launch.name = name;
  g_launch.smem = smem;
  g_launch.ctx = &c;
  g_launch.dev = c.device;
  g_body = body;
  g_closure = closure;
  g_k.block_dim = block;
  g_k.grid_dim = grid;
  g_nthreads = (int)(block.x * block.y * block.z);
  g_rng.seed(seed() * 0x9e3779b97f4a7c15ull + c.launch_id);
  g_kernels++;
  const uint64_t nblocks = (uint64_t)grid.x * grid.y * grid.z;
  // Blocks in a seeded order: start anywhere, stride coprime to the count.
  uint64_t stride = 1, start = nblocks > 1 ? g_rng() % nblocks : 0;
  if (nblocks > 2) {
    stride = 1 + g_rng() % (nblocks - 1);
    auto gcd = [](uint64_t a, uint64_t b) { while (b) { uint64_t t = a % b; a = b; b = t; } return a; };
    while (gcd(stride, nblocks) != 1) stride++;
  }
  for (uint64_t k = 0; k < nblocks; k++) {
    const uint64_t b = (start + k * stride) % nblocks;
    g_k.block_idx = dim3((unsigned)(b % grid.x), (unsigned)((b / grid.x) % grid.y),
                         (unsigned)(b / ((uint64_t)grid.x * grid.y)));
    g_launch.block_linear = (uint32_t)b;
    g_launch.bx = g_k.block_idx.x;
    g_launch.by = g_k.block_idx.y;
    g_launch.bz = g_k.block_idx.z;
    g_blocks++;
    if (!run_block(block)) break;
  }
  g_cur = nullptr;
  return (cudaError_t)g_launch.aborted;
}
}  // namespace

int cur_tid() { return g_cur ? g_cur->tid : -1; }

void interleave_point() {
  if (interleaving() && g_cur && (g_rng() & 1)) yield(T_READY);
}
bool cur_checking() { return g_cur && g_cur->checking; }

void cur_thread_desc(char *buf, size_t n) {
  if (!g_cur) {
    snprintf(buf, n, "(no thread)");
    return;
  }
  snprintf(buf, n, "thread (%u,%u,%u) [warp %d] of block (%u,%u,%u)", g_cur->idx.x, g_cur->idx.y,
           g_cur->idx.z, g_cur->tid / 32, g_launch.bx, g_launch.by, g_launch.bz);
}

[[noreturn]] void abort_kernel(cudaError_t e) {
  if (!g_launch.aborted) g_launch.aborted = e;
  ethread *t = g_cur;
  t->checking = false;
  cuemu_switch(&t->sp, g_sched_sp);  // never resumed
  __builtin_unreachable();
}

void kernel_body_begins() {
  if (g_cur) g_cur->checking = true;
}

// Mutation testing: ESMT_EMU_DROP_BARRIER=file:line[,file:line...] makes the
// named __syncthreads a no-op, as if deleted from the source; the checkers
// must then report (tests/gpu/emu/mutants.sh).
namespace {
struct dropped_barrier {
  std::string file;
  int line;
};
std::vector<dropped_barrier> g_dropped;
std::once_flag g_dropped_once;
void parse_dropped() {
  const char *v = getenv("ESMT_EMU_DROP_BARRIER");
  for (const char *p = v; p && *p;) {
    const char *end = strchr(p, ',');
    std::string item(p, end ? (size_t)(end - p) : strlen(p));
    const size_t colon = item.rfind(':');
    if (colon != std::string::npos)
      g_dropped.push_back({item.substr(0, colon), atoi(item.c_str() + colon + 1)});
    p = end ? end + 1 : nullptr;
  }
}
bool barrier_dropped(const char *file, int line) {
  std::call_once(g_dropped_once, parse_dropped);
  for (const dropped_barrier &d : g_dropped) {
    if (d.line != line) continue;
    const size_t n = strlen(file), m = d.file.size();
    if (n >= m && strcmp(file + n - m, d.file.c_str()) == 0) return true;
  }
  return false;
}

enum warp_op_kind { W_SYNCWARP, W_SHFL_XOR, W_SHFL_IDX, W_SHFL_DOWN, W_BALLOT, W_MMA, W_LDSM2,
                    W_LDSM4 };
// Mutation switch: ESMT_EMU_SHFL_MASK=0xHEX replaces the mask of every
// __shfl_*_sync, as if each call site had been written with it
// (tests/gpu/emu/mutants.sh).
static unsigned shfl_mask(unsigned mask) {
  static const long forced = [] {
    const char *e = getenv("ESMT_EMU_SHFL_MASK");
    return e && *e ? (long)strtoul(e, nullptr, 0) : -1L;
  }();
  return forced >= 0 ? (unsigned)forced : mask;
}

// Arrive at warp collective `kind` with `mask` (the .aligned PTX
// collectives, mma.sync and ldmatrix, name the whole warp); the scheduler
// checks the warp once every live lane has arrived (check_warp_collective).
void warp_collective(int kind, unsigned mask) {
  g_warp_op[g_cur->tid] = warp_op{kind, mask};
  yield(T_WARP);
}

}  // namespace

void syncthreads(const char *file, int line) {
  if (barrier_dropped(file, line)) return;
  yield(T_BAR);
}
void syncwarp(unsigned mask) { warp_collective(W_SYNCWARP, mask); }
void yield_warpgroup() { yield(T_WG); }
int block_threads() { return g_nthreads; }
uint32_t warp_generation(int warp) { return g_warp_gen[warp]; }

uint64_t shfl(uint64_t v, int arg, int width, int mode, unsigned mask) {
  const int tid = g_cur->tid, w0 = tid & ~31, lane = tid & 31;
  mask = shfl_mask(mask);
  if (width <= 0 || width > 32 || (width & (width - 1))) width = 32;
  const int seg = lane & ~(width - 1);
  int src = lane;
  switch (mode) {
    case 0: src = lane ^ arg; break;                              // xor
    case 1: src = seg + (arg & (width - 1)); break;               // idx
    default: src = (lane & (width - 1)) + arg < width ? lane + arg : lane; break;  // down
  }
  g_xch[tid] = v;
  warp_collective(W_SHFL_XOR + mode, mask);
  uint64_t r = v;
  if (src >= 0 && src < 32 && w0 + src < g_nthreads && g_threads[w0 + src].state != T_DONE)
    r = g_xch[w0 + src];
  yield(T_WARP);
  return r;
}

unsigned ballot(unsigned mask, int pred) {
  const int tid = g_cur->tid, w0 = tid & ~31;
  g_xch[tid] = pred != 0;
  warp_collective(W_BALLOT, mask);
  unsigned r = 0;
  for (int j = 0; j < 32 && w0 + j < g_nthreads; j++)
    if ((mask >> j & 1u) && g_threads[w0 + j].state != T_DONE && g_xch[w0 + j]) r |= 1u << j;
  yield(T_WARP);
  return r;
}

unsigned char *dynamic_smem() { return g_dsmem; }

[[noreturn]] void trap(const char *why) {
  char who[128];
  cur_thread_desc(who, sizeof who);
  report(g_launch.dev, "trap", "kernel %s: %s in %s", g_launch.name, why, who);
  abort_kernel(cudaErrorLaunchFailure);
}

static float half_of(uint32_t u, int hi, int bf) {
  const uint16_t h = (uint16_t)(hi ? u >> 16 : u & 0xffffu);
  return bf ? cuemu_bf2f(h) : cuemu_h2f(h);
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: thread (g = lane/4,
// t = lane%4) holds a0 (row g, k 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..),
// a3 (g+8, 2t+8..); b0 (k 2t.., col g), b1 (k 2t+8.., col g); c0,c1 (g,
// 2t..), c2,c3 (g+8, 2t..). On sm_75 it is two m16n8k8 (f16 only).
void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2], int bf) {
  const device_config *cfg = device(g_launch.dev);
  if (bf && cfg && cfg->sm_major < 8) {
    char who[128];
    cur_thread_desc(who, sizeof who);
    report(g_launch.dev, "illegal-instruction",
           "kernel %s: bf16 mma.sync needs sm_80, the device is sm_%d%d (%s)", g_launch.name,
           cfg->sm_major, cfg->sm_minor, who);
    abort_kernel(cudaErrorIllegalInstruction);
  }
  const int tid = g_cur->tid, lane = tid & 31, g = lane >> 2, t = lane & 3;
  // Each thread decodes its own registers once into the warp's matrices
  // (half h of a[r] is A(g + 8 (r & 1), 2t + 8 (r >> 1) + h), of b[r] is
  // B(2t + 8r + h, g)); after the rendezvous each computes its 4 outputs.
  float (*A)[16] = g_mma_a[tid >> 5], (*Bt)[16] = g_mma_bt[tid >> 5];
  for (int r = 0; r < 4; r++)
    for (int h = 0; h < 2; h++) A[g + 8 * (r & 1)][2 * t + 8 * (r >> 1) + h] = half_of(a[r], h, bf);
  for (int r = 0; r < 2; r++)
    for (int h = 0; h < 2; h++) Bt[g][2 * t + 8 * r + h] = half_of(b[r], h, bf);
  warp_collective(W_MMA, 0xffffffffu);
  for (int e = 0; e < 4; e++) {
    const float *ar = A[g + 8 * (e >> 1)], *bc = Bt[2 * t + (e & 1)];
    float acc = c[e];
    for (int k = 0; k < 16; k++) acc += ar[k] * bc[k];
    c[e] = acc;
  }
  yield(T_WARP);
}

// ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16: threads 8m..8m+7 give
// the row addresses of matrix m; thread (g, t) receives of matrix m the
// elements (row 2t, col g) and (row 2t+1, col g).
void ldsm_x2_trans(uint32_t b[2], const void *p) {
  const int tid = g_cur->tid, w0 = tid & ~31, lane = tid & 31, g = lane >> 2, t = lane & 3;
  if (lane < 16) kernel_access(p, 16, false);  // the rows this thread supplies
  g_pbuf[tid] = p;
  warp_collective(W_LDSM2, 0xffffffffu);
  for (int m = 0; m < 2; m++) {
    const uint16_t *r0 = (const uint16_t *)g_pbuf[w0 + m * 8 + 2 * t];
    const uint16_t *r1 = (const uint16_t *)g_pbuf[w0 + m * 8 + 2 * t + 1];
    b[m] = (uint32_t)r0[g] | ((uint32_t)r1[g] << 16);
  }
  yield(T_WARP);
}

// cp.async.{ca,cg}.shared.global [dst], [src], n (sm_80+): the source is
// read (and checked) now, the destination is pending until the issuing
// thread's cp.async.wait_group retires the copy's group; a barrier alone
// does not make it visible. ESMT_EMU_DROP_CP_WAIT=1 turns every wait into a
// no-op (copies land at thread exit), for the mutation tests.
static bool cp_wait_dropped() {
  static const bool v = [] {
    const char *e = getenv("ESMT_EMU_DROP_CP_WAIT");
    return e && e[0] == '1';
  }();
  return v;
}

void cp_async(void *dst, const void *src, int n) {
  const device_config *cfg = device(g_launch.dev);
  char who[128];
  if (cfg && cfg->sm_major < 8) {
    cur_thread_desc(who, sizeof who);
    report(g_launch.dev, "illegal-instruction", "kernel %s: cp.async needs sm_80, the device is "
           "sm_%d%d (%s)", g_launch.name, cfg->sm_major, cfg->sm_minor, who);
    abort_kernel(cudaErrorIllegalInstruction);
  }
  if ((n != 4 && n != 8 && n != 16) || ((uintptr_t)dst % (unsigned)n) ||
      ((uintptr_t)src % (unsigned)n)) {
    cur_thread_desc(who, sizeof who);
    report(g_launch.dev, "bounds", "kernel %s: cp.async of %d bytes from %p to %p is not "
           "naturally aligned (%s)", g_launch.name, n, src, dst, who);
    abort_kernel(cudaErrorMisalignedAddress);
  }
  kernel_access(src, (size_t)n, false);
  smem_async_issue(dst, (size_t)n);
  async_copy c;
  c.dst = (unsigned char *)dst;
  memcpy(c.data, src, (size_t)n);
  c.n = n;
  c.group = g_commits[g_cur->tid];
  g_async[g_cur->tid].push_back(c);
}

void cp_async_commit() { g_commits[g_cur->tid]++; }

void cp_async_wait(int pending) {
  if (cp_wait_dropped()) return;
  const int tid = g_cur->tid;
  const uint32_t done = g_commits[tid];
  land_async(tid, done > (uint32_t)pending ? done - (uint32_t)pending : 0);
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane 8m + i gives the
// address of row i of matrix m (16 bytes, 16-byte aligned); thread (g, t)
// receives in r[m] of matrix m the elements (row g, cols 2t, 2t+1), or with
// .trans (row 2t, col g) and (row 2t+1, col g).
void ldsm_x4(uint32_t r[4], const void *p, int trans) {
  const int tid = g_cur->tid, w0 = tid & ~31, lane = tid & 31, g = lane >> 2, t = lane & 3;
  if ((uintptr_t)p & 15u) {
    char who[128];
    cur_thread_desc(who, sizeof who);
    report(g_launch.dev, "bounds", "kernel %s: ldmatrix row address %p is not 16-byte aligned "
           "(%s)", g_launch.name, p, who);
    abort_kernel(cudaErrorMisalignedAddress);
  }
  kernel_access(p, 16, false);
  g_pbuf[tid] = p;
  warp_collective(W_LDSM4, 0xffffffffu);
  for (int m = 0; m < 4; m++) {
    if (trans) {
      const uint16_t *r0 = (const uint16_t *)g_pbuf[w0 + m * 8 + 2 * t];
      const uint16_t *r1 = (const uint16_t *)g_pbuf[w0 + m * 8 + 2 * t + 1];
      r[m] = (uint32_t)r0[g] | ((uint32_t)r1[g] << 16);
    } else {
      const uint16_t *row = (const uint16_t *)g_pbuf[w0 + m * 8 + g];
      r[m] = (uint32_t)row[2 * t] | ((uint32_t)row[2 * t + 1] << 16);
    }
  }
  yield(T_WARP);
}

int max_dynamic_smem(const void *fn) {
  std::lock_guard<std::mutex> g(g_attr_mu);
  auto it = g_max_dyn_smem.find(fn);
  return it == g_max_dyn_smem.end() ? 48 * 1024 : it->second;
}

void launch_kernel(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char *name,
                   const void *fn, thread_body body, void *closure, void (*destroy)(void *)) {
  const uint64_t threads = (uint64_t)block.x * block.y * block.z;
  cudaError_t e = cudaSuccess;
  if (!threads || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || !grid.x ||
      !grid.y || !grid.z || grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu)
    e = cudaErrorInvalidConfiguration;
  else if (smem > (size_t)max_dynamic_smem(fn))
    e = cudaErrorInvalidValue;
  if (e) {
    report(current_device(), "launch",
           "kernel %s: grid (%u,%u,%u) block (%u,%u,%u) dynamic shared %zu bytes (limit %d): %s",
           name, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, max_dynamic_smem(fn),
           cudaGetErrorString(e));
    destroy(closure);
    record_error(e);
    return;
  }
  // A kernel runs on the current device: a stream of another device is an
  // invalid handle there (what a backend that forgot cudaSetDevice hits
  // when the core drives it from a second thread).
  if (!stream_on_current_device(stream, name)) {
    destroy(closure);
    record_error(cudaErrorInvalidResourceHandle);
    return;
  }
  e = enqueue(stream, name, [=](op_ctx &c) -> cudaError_t {
    cudaError_t r = compute_enabled() ? run_grid(c, grid, block, smem, name, body, closure)
                                      : cudaSuccess;
    destroy(closure);
    return r;
  });
  if (e) {
    destroy(closure);
    record_error(e);
  }
}

void kernel_counts(uint64_t *kernels, uint64_t *blocks) {
  std::lock_guard<std::mutex> g(g_exec);
  *kernels = g_kernels;
  *blocks = g_blocks;
}

void set_max_dynamic_smem(const void *fn, int v) {
  std::lock_guard<std::mutex> g(g_attr_mu);
  g_max_dyn_smem[fn] = v;
}

}  // namespace cuemu
