/* SPDX-License-Identifier: MIT */
// Hopper's warpgroup MMA (PTX ISA 9.7.15, sm_90a) for the emulated kernels:
// wgmma.mma_async.m64nNk16.f32.{f16,bf16} with A from registers or shared
// memory and B from shared memory through 64-bit matrix descriptors,
// wgmma.fence / commit_group / wait_group, fence.proxy.async, and
// __cvta_generic_to_shared for dynamic shared memory.
//
// The operation is a rendezvous of the 128 threads of a warpgroup (4 warps
// of consecutive warp rank, T_WG in the scheduler); the first thread to run
// after it computes the whole 64 x N product once and files each thread's
// accumulator fragment as pending. Nothing reaches d at issue: a thread's
// fragment is written into its d when its wgmma.wait_group retires the
// group, so a kernel that reads d before the wait sees the old registers.
// A later mma_async into the same registers before that wait accumulates
// onto the pending value (what the hardware's in-order accumulator gives).
//
// The shared-memory operands are read at the rendezvous, each 16-byte chunk
// checked as an async-proxy read (emu_check.cpp): written in the same
// barrier interval, a cp.async not landed, or a generic write without a
// fence.proxy.async of its writer after it is a finding; the bytes then stay
// "being read" until the operation is retired (a write before that is a
// race).
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "emu_private.h"

namespace cuemu {

namespace {
constexpr int kMaxThreads = 1024, kMaxWg = kMaxThreads / 128;

// One operation's accumulator fragment for one thread, until its wait.
struct pending_d {
  float *d;
  int cnt;           // floats: n / 2
  uint32_t group;    // the thread's commit_group count at issue
  uint32_t seq;      // operation number in the warpgroup (from 1)
  uint32_t fences;   // the thread's wgmma.fence count at issue
  float v[128];
  pending_d() {}     // no zero fill (a vector of these grows per operation)
};

// What a thread passed to wgmma.mma_async (read at the rendezvous).
struct mma_args {
  float *d;
  int n, a_reg, scale_d, trans_a, trans_b, bf16;
  uint64_t a_desc, b_desc;
  uint32_t a[4];
};

struct wg_thread {
  bool fenced;        // wgmma.fence since the kernel began / the last wait
  uint32_t fences;    // wgmma.fence executed
  uint32_t commits;   // wgmma.commit_group executed
  uint32_t issued;    // wgmma.mma_async executed
  uint32_t retired;   // operations 1..retired are retired for this thread
  mma_args args;
  std::vector<pending_d> pend;  // in issue order
};
wg_thread g_t[kMaxThreads];

struct wg_state {
  uint32_t computed;  // operations computed
  uint32_t retired;   // operations retired by at least one thread
  std::vector<uint32_t> retire_epoch;  // [seq - 1]: barrier interval of that
};
wg_state g_g[kMaxWg];
bool g_exit_reported;

// Operand gather and product, one operation at a time (one block runs at a
// time in the process, under emu_block.cpp's lock; not on a coroutine stack).
alignas(32) float g_a[64][16], g_b[16][256], g_acc[64][256];
typedef float v4f __attribute__((vector_size(16)));  // SSE2, the baseline

float g_f16[65536];  // binary16 -> float
bool g_f16_ready;

float to_float(uint16_t h, int bf) {
  if (bf) return cuemu_bf2f(h);
  if (!g_f16_ready) {
    for (uint32_t i = 0; i < 65536; i++) g_f16[i] = cuemu_h2f((uint16_t)i);
    g_f16_ready = true;
  }
  return g_f16[h];
}

[[noreturn]] void fail(cudaError_t e, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void fail(cudaError_t e, const char *kind, const char *fmt, ...) {
  char msg[640], who[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cur_thread_desc(who, sizeof who);
  report(g_launch.dev, kind, "kernel %s: %s (%s)", g_launch.name, msg, who);
  abort_kernel(e);
}

void need_sm90(const char *what) {
  const int arch = device_arch();
  if (arch < 90)
    fail(cudaErrorIllegalInstruction, "illegal-instruction", "%s needs sm_90a, the device is sm_%d",
         what, arch);
}

// ESMT_EMU_DROP_PROXY_FENCE=1: fence.proxy.async does nothing (mutation
// tests: the missing-fence check must then report).
bool proxy_fence_dropped() {
  static const bool v = [] {
    const char *e = getenv("ESMT_EMU_DROP_PROXY_FENCE");
    return e && e[0] == '1';
  }();
  return v;
}

// ---- matrix descriptors (PTX ISA 9.7.15.5.1.2.2) ----
struct mdesc {
  uint32_t start, lbo, sbo;  // bytes (each field is the value >> 4)
  int base;                  // bits 49-51
  int mode;                  // bits 62-63: 0 none, 1 128B, 2 64B, 3 32B swizzle
};
constexpr uint64_t kDescUsed = 0x3fffull | (0x3fffull << 16) | (0x3fffull << 32) |
                               (7ull << 49) | (3ull << 62);

mdesc decode(uint64_t x) {
  mdesc m;
  m.start = (uint32_t)(x & 0x3fff) << 4;
  m.lbo = (uint32_t)((x >> 16) & 0x3fff) << 4;
  m.sbo = (uint32_t)((x >> 32) & 0x3fff) << 4;
  m.base = (int)((x >> 49) & 7);
  m.mode = (int)(x >> 62);
  return m;
}
const char *mode_name(int mode) {
  static const char *const names[] = {"no swizzle", "128B swizzle", "64B swizzle", "32B swizzle"};
  return names[mode & 3];
}
// Bytes of one swizzle row (16 * W) and the XOR width in bits (Swizzle<b,4,3>).
int row_bytes(int mode) { return mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 16; }
int xor_bits(int mode) { return mode == 1 ? 3 : mode == 2 ? 2 : mode == 3 ? 1 : 0; }

// The shared-window address of the 16-byte chunk of operand element
// (mn, k) (mn: row of A or column of B; k: 0..15) before swizzling: the
// canonical layouts (T = 8 16-bit elements per 16 bytes, W = row bytes / 16)
//   K-major   none:  ((8,m),(T,2k)):((1T,SBO),(1,LBO))
//   K-major   W:     ((8,m),(T,2k)):((W*T,SBO),(1,T))
//   MN-major  none:  ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
//   MN-major  W:     ((T,W,m),(8,k)):((1,T,LBO),(W*T,SBO))
// in elements; a chunk is 8 elements contiguous along K (K-major) or along
// MN (MN-major).
uint32_t chunk_addr(const mdesc &m, int mn_major, int mn, int k) {
  const uint32_t W = (uint32_t)row_bytes(m.mode) / 16;
  if (!mn_major) {
    const uint32_t r = (uint32_t)mn % 8, g = (uint32_t)mn / 8, kc = (uint32_t)k / 8;
    if (m.mode == 0) return m.start + r * 16 + g * m.sbo + kc * m.lbo;
    return m.start + r * 16 * W + g * m.sbo + kc * 16;
  }
  const uint32_t c = (uint32_t)mn / 8, kr = (uint32_t)k % 8, kg = (uint32_t)k / 8;
  if (m.mode == 0) return m.start + c * m.sbo + kr * 16 + kg * m.lbo;
  return m.start + (c % W) * 16 + (c / W) * m.lbo + kr * 16 * W + kg * m.sbo;
}

// Swizzle<b,4,3> on the shared-window address: bits [4, 4+b) ^= bits
// [7, 7+b), the latter counted from the pattern start that the base offset
// gives ((address >> 7) - base offset), so that a pattern starting at its
// repeat boundary (base offset 0) is the plain address swizzle.
uint32_t swizzle(const mdesc &m, uint32_t a) {
  const int b = xor_bits(m.mode);
  if (!b) return a;
  const uint32_t mask = (1u << b) - 1;
  return a ^ ((((a >> 7) - (uint32_t)m.base) & mask) << 4);
}

// Descriptor rules of the PTX ISA: reserved bits zero; for a swizzled mode,
// every repeating pattern the operation touches (one per 8 rows of a K-major
// operand, per 8 K x W*8 columns of an MN-major one) starts at its repeat
// boundary (1024/512/256 bytes) or the base offset is (start >> 7) & 7 of it.
// The pattern start is taken as the chunk address of its first row with the
// offset inside a swizzle row (a K step, an N offset) cleared; base offsets
// are compared modulo the pattern's rows (8, 4, 2 128-byte lines).
void check_desc(char which, uint64_t x, const mdesc &m, int mn_major, int mn_extent) {
  if (x & ~kDescUsed)
    fail(cudaErrorLaunchFailure, "wgmma",
         "wgmma.mma_async: matrix descriptor %c 0x%016llx sets reserved bits 0x%016llx", which,
         (unsigned long long)x, (unsigned long long)(x & ~kDescUsed));
  if (!m.mode) return;
  const uint32_t R = (uint32_t)row_bytes(m.mode), mask = (1u << xor_bits(m.mode)) - 1;
  const uint32_t repeat = 8 * R;
  const int W = (int)R / 16;
  const int groups = mn_major ? (mn_extent + 8 * W - 1) / (8 * W) : mn_extent / 8;
  for (int g = 0; g < groups; g++) {
    for (int kg = 0; kg < (mn_major ? 2 : 1); kg++) {
      const uint32_t first = mn_major ? chunk_addr(m, 1, g * 8 * W, kg * 8) : chunk_addr(m, 0, g * 8, 0);
      const uint32_t p = first & ~(R - 1);
      if (p & 127u)
        fail(cudaErrorLaunchFailure, "wgmma",
             "wgmma.mma_async: matrix descriptor %c 0x%016llx (%s, %s): a swizzle pattern starts "
             "at shared address 0x%x, not at a 128-byte line, which no base offset describes",
             which, (unsigned long long)x, mn_major ? "MN-major" : "K-major", mode_name(m.mode), p);
      const uint32_t phase = (p >> 7) & mask;
      if (((uint32_t)m.base & mask) != phase)
        fail(cudaErrorLaunchFailure, "wgmma",
             "wgmma.mma_async: matrix descriptor %c 0x%016llx (%s, %s): a swizzle pattern starts "
             "at shared address 0x%x, %s its %u-byte repeat boundary, but the descriptor's base "
             "offset is %d; the PTX ISA requires %u (%s)",
             which, (unsigned long long)x, mn_major ? "MN-major" : "K-major", mode_name(m.mode), p,
             p % repeat ? "not at" : "at", repeat, m.base, p % repeat ? (p >> 7) & 7 : 0,
             p % repeat ? "(pattern start >> 7) & 7" : "0 at the boundary");
    }
  }
}

// The operand chunk at shared-window address s: bounds, the async-proxy read
// checks, then its 8 elements.
const unsigned char *read_chunk(char which, uint32_t s, int wg, uint32_t seq) {
  const uint32_t lo = kDynSmemWindow, hi = kDynSmemWindow + (uint32_t)g_launch.smem;
  if (s < lo || s + 16 > hi) {
    char who[128];
    cur_thread_desc(who, sizeof who);
    report(g_launch.dev, "bounds",
           "kernel %s: wgmma.mma_async of warpgroup %d reads operand %c at shared address 0x%x, "
           "outside the launch's dynamic shared memory [0x%x, 0x%x) (%s)",
           g_launch.name, wg, which, s, lo, hi, who);
    abort_kernel(cudaErrorIllegalAddress);
  }
  const unsigned char *p = g_dsmem + (s - lo);
  smem_wgmma_read(p, 16, wg, seq);
  return p;
}

// Gather a shared-memory operand into out(mn, k) (A: mn = row, 64 rows;
// B: mn = column, n columns).
template <typename Store>
void gather(char which, uint64_t x, int mn_major, int mn_extent, int bf, int wg, uint32_t seq,
            Store store) {
  const mdesc m = decode(x);
  check_desc(which, x, m, mn_major, mn_extent);
  uint16_t h[8];
  if (!mn_major) {
    for (int mn = 0; mn < mn_extent; mn++)
      for (int kc = 0; kc < 2; kc++) {
        memcpy(h, read_chunk(which, swizzle(m, chunk_addr(m, 0, mn, 8 * kc)), wg, seq), 16);
        for (int i = 0; i < 8; i++) store(mn, 8 * kc + i, to_float(h[i], bf));
      }
  } else {
    for (int c = 0; c < mn_extent / 8; c++)
      for (int k = 0; k < 16; k++) {
        memcpy(h, read_chunk(which, swizzle(m, chunk_addr(m, 1, 8 * c, k)), wg, seq), 16);
        for (int i = 0; i < 8; i++) store(8 * c + i, k, to_float(h[i], bf));
      }
  }
}

void thread_name(int tid, char *buf, size_t n) {
  const dim3 b = g_k.block_dim;
  snprintf(buf, n, "thread (%u,%u,%u) [warp %d]", tid % b.x, (tid / b.x) % b.y,
           tid / (b.x * b.y), tid / 32);
}

// The accumulator input of thread t for an operation into d[0, cnt): its
// registers overlaid, oldest first, with the pending results of its earlier
// operations into the same registers (not yet retired by a wait).
void accumulator_in(wg_thread &t, int tid, float *d, int cnt, float *c) {
  memcpy(c, d, (size_t)cnt * sizeof(float));
  const uintptr_t lo = (uintptr_t)d, hi = (uintptr_t)(d + cnt);
  for (const pending_d &p : t.pend) {
    const uintptr_t plo = (uintptr_t)p.d, phi = (uintptr_t)(p.d + p.cnt);
    if (phi <= lo || plo >= hi) continue;
    if ((p.d != d || p.cnt != cnt) && p.fences == t.fences) {
      char who[64];
      thread_name(tid, who, sizeof who);
      fail(cudaErrorLaunchFailure, "wgmma",
           "wgmma.mma_async #%u of %s accumulates into registers that its pending "
           "wgmma.mma_async #%u (of another shape: %d floats at %p, now %d at %p) also "
           "accumulates into, with no wgmma.fence in between",
           t.issued, who, p.seq, p.cnt, (void *)p.d, cnt, (void *)d);
    }
    for (uintptr_t a = lo > plo ? lo : plo; a < (hi < phi ? hi : phi); a += sizeof(float))
      c[(a - lo) / sizeof(float)] = p.v[(a - plo) / sizeof(float)];
  }
}

// The operation seq of warpgroup wg, all 128 threads at the rendezvous.
void compute(int wg, uint32_t seq) {
  const int t0 = wg * 128;
  const mma_args &a0 = g_t[t0].args;
  for (int i = 1; i < 128; i++) {
    const wg_thread &t = g_t[t0 + i];
    const mma_args &a = t.args;
    if (a.n != a0.n || a.a_reg != a0.a_reg || a.scale_d != a0.scale_d ||
        a.trans_a != a0.trans_a || a.trans_b != a0.trans_b || a.bf16 != a0.bf16 ||
        a.b_desc != a0.b_desc || (!a.a_reg && a.a_desc != a0.a_desc) ||
        t.commits != g_t[t0].commits) {
      char who[64];
      thread_name(t0 + i, who, sizeof who);
      fail(cudaErrorLaunchFailure, "wgmma",
           "wgmma.mma_async #%u of warpgroup %d: %s passes other operands (shape, descriptors, "
           "scale-d, transposes, type) or has another commit_group count than thread %d; "
           "the instruction is .aligned and descriptors must be the same in the warpgroup",
           seq, wg, who, t0);
    }
  }
  const int n = a0.n, bf = a0.bf16, cnt = n / 2;
  if (n < 8 || n > 256 || n % 8)
    fail(cudaErrorLaunchFailure, "wgmma", "wgmma.mma_async.m64n%dk16: no such shape (N is a "
         "multiple of 8 from 8 to 256)", n);
  if (a0.a_reg && a0.trans_a)
    fail(cudaErrorLaunchFailure, "wgmma", "wgmma.mma_async: imm-trans-a with A in registers "
         "(the transpose exists only for operands in shared memory)");
  if ((a0.trans_a | a0.trans_b) & ~1)
    fail(cudaErrorLaunchFailure, "wgmma", "wgmma.mma_async: imm-trans-a/b must be 0 or 1");

  // A: 64 x 16.
  if (a0.a_reg) {
    // Warp w of the warpgroup holds rows 16w..16w+15; lane (g = lane/4,
    // q = lane%4): a[0] = (g, 2q..2q+1), a[1] = (g+8, 2q..), a[2] = (g, 2q+8..),
    // a[3] = (g+8, 2q+8..), the lower column in the low half.
    for (int i = 0; i < 128; i++) {
      const uint32_t *r = g_t[t0 + i].args.a;
      const int row = 16 * (i / 32) + (i % 32) / 4, col = 2 * (i % 4);
      for (int e = 0; e < 4; e++) {
        const int rr = row + 8 * (e & 1), cc = col + 8 * (e >> 1);
        g_a[rr][cc] = to_float((uint16_t)(r[e] & 0xffffu), bf);
        g_a[rr][cc + 1] = to_float((uint16_t)(r[e] >> 16), bf);
      }
    }
  } else {
    gather('A', a0.a_desc, a0.trans_a, 64, bf, wg, seq,
           [](int mn, int k, float v) { g_a[mn][k] = v; });
  }
  gather('B', a0.b_desc, a0.trans_b, n, bf, wg, seq,
         [](int mn, int k, float v) { g_b[k][mn] = v; });

  // The accumulator inputs, laid out as D: thread (warp w, g, q) holds
  // d[4j + e] = D(16w + g + 8 * (e >> 1), 8j + 2q + (e & 1)).
  float c[128];
  for (int i = 0; i < 128; i++) {
    wg_thread &t = g_t[t0 + i];
    if (a0.scale_d) accumulator_in(t, t0 + i, t.args.d, cnt, c);
    else memset(c, 0, sizeof c);
    const int row = 16 * (i / 32) + (i % 32) / 4, col = 2 * (i % 4);
    for (int e = 0; e < cnt; e++)
      g_acc[row + 8 * ((e >> 1) & 1)][8 * (e >> 2) + col + (e & 1)] = c[e];
  }
  // D += A * B, each element in k order from its accumulator input, 8
  // columns at a time (n is a multiple of 8).
  for (int r = 0; r < 64; r++)
    for (int j = 0; j < n; j += 8) {
      v4f lo, hi;
      memcpy(&lo, &g_acc[r][j], sizeof lo);
      memcpy(&hi, &g_acc[r][j + 4], sizeof hi);
      for (int k = 0; k < 16; k++) {
        v4f blo, bhi;
        memcpy(&blo, &g_b[k][j], sizeof blo);
        memcpy(&bhi, &g_b[k][j + 4], sizeof bhi);
        lo += g_a[r][k] * blo;
        hi += g_a[r][k] * bhi;
      }
      memcpy(&g_acc[r][j], &lo, sizeof lo);
      memcpy(&g_acc[r][j + 4], &hi, sizeof hi);
    }
  for (int i = 0; i < 128; i++) {
    wg_thread &t = g_t[t0 + i];
    t.pend.emplace_back();
    pending_d &p = t.pend.back();
    p.d = t.args.d;
    p.cnt = cnt;
    p.group = t.commits;
    p.seq = seq;
    p.fences = t.fences;
    const int row = 16 * (i / 32) + (i % 32) / 4, col = 2 * (i % 4);
    for (int e = 0; e < cnt; e++) p.v[e] = g_acc[row + 8 * ((e >> 1) & 1)][8 * (e >> 2) + col + (e & 1)];
  }
}
}  // namespace

void wgmma_block_begins(int nthreads) {
  for (int i = 0; i < nthreads && i < kMaxThreads; i++) {
    wg_thread &t = g_t[i];
    t.fenced = false;
    t.fences = t.commits = t.issued = t.retired = 0;
    t.pend.clear();
  }
  for (wg_state &g : g_g) {
    g.computed = g.retired = 0;
    g.retire_epoch.clear();
  }
  g_exit_reported = false;
}

void wgmma_thread_exits(int tid) {
  wg_thread &t = g_t[tid];
  if (t.pend.empty() || g_exit_reported) return;
  g_exit_reported = true;
  char who[128];
  cur_thread_desc(who, sizeof who);
  report(g_launch.dev, "wgmma",
         "kernel %s: %s exits with %zu wgmma.mma_async result(s) that no wgmma.wait_group "
         "retired (missing commit_group/wait_group: the accumulators never receive them)",
         g_launch.name, who, t.pend.size());
}

int wgmma_write_ordered(int wg, uint32_t seq, int tid) {
  if (!seq || wg < 0 || wg >= kMaxWg) return 2;
  const wg_state &g = g_g[wg];
  if (seq <= g.retired && g.retire_epoch[seq - 1] != smem_epoch()) return 2;
  if (tid >= 0 && tid / 128 == wg && g_t[tid].retired >= seq) return 1;
  return 0;
}

uint32_t smem_addr(const void *p) {
  const unsigned char *c = (const unsigned char *)p;
  // One past the end is a valid address to form (a loop bound).
  if (!g_dsmem || c < g_dsmem || c > g_dsmem + g_launch.smem) {
    char who[128];
    cur_thread_desc(who, sizeof who);
    report(g_launch.dev, "bounds",
           "kernel %s: __cvta_generic_to_shared (cuemu::smem_addr) of %p, which is not in the "
           "launch's %zu bytes of dynamic shared memory (%s)",
           g_launch.name, p, g_launch.smem, who);
    if (g_cur) abort_kernel(cudaErrorIllegalAddress);
    return 0;
  }
  return kDynSmemWindow + (uint32_t)(c - g_dsmem);
}

void wgmma_fence() {
  need_sm90("wgmma.fence");
  syncwarp();  // .sync: the warp converges
  wg_thread &t = g_t[cur_tid()];
  t.fenced = true;
  t.fences++;
}

void wgmma_commit() {
  need_sm90("wgmma.commit_group");
  syncwarp();
  g_t[cur_tid()].commits++;
}

void wgmma_wait(int pending) {
  need_sm90("wgmma.wait_group");
  syncwarp();
  const int tid = cur_tid(), wg = tid / 128;
  wg_thread &t = g_t[tid];
  if (pending < 0) pending = 0;
  const uint32_t limit = t.commits > (uint32_t)pending ? t.commits - (uint32_t)pending : 0;
  size_t k = 0;
  for (; k < t.pend.size() && t.pend[k].group < limit; k++) {
    const pending_d &p = t.pend[k];
    memcpy(p.d, p.v, (size_t)p.cnt * sizeof(float));
    t.retired = p.seq;
  }
  t.pend.erase(t.pend.begin(), t.pend.begin() + (long)k);
  t.fenced = false;  // the registers may be touched now: fence before the next mma_async
  wg_state &g = g_g[wg];
  while (g.retired < t.retired) {
    g.retire_epoch.push_back(smem_epoch());
    g.retired++;
  }
}

void fence_proxy_async() {
  need_sm90("fence.proxy.async");
  if (proxy_fence_dropped()) return;
  smem_proxy_fence();
}

void wgmma_m64k16(float *d, int n, const uint32_t *a_regs, uint64_t a_desc, uint64_t b_desc,
                  int scale_d, int trans_a, int trans_b, int bf16) {
  need_sm90("wgmma.mma_async");
  const int tid = cur_tid(), wg = tid / 128;
  if (block_threads() < 128 * (wg + 1))
    fail(cudaErrorLaunchFailure, "wgmma",
         "wgmma.mma_async in a block of %d threads: warpgroup %d is not 4 whole warps",
         block_threads(), wg);
  wg_thread &t = g_t[tid];
  if (!t.fenced)
    fail(cudaErrorLaunchFailure, "wgmma",
         "wgmma.mma_async without a wgmma.fence since %s (the fence must order the "
         "accumulator and A registers before the first wgmma.mma_async and after they were "
         "touched)",
         t.issued ? "the thread's last wgmma.wait_group" : "the kernel began");
  mma_args &a = t.args;
  a.d = d;
  a.n = n;
  a.a_reg = a_regs != nullptr;
  if (a_regs) memcpy(a.a, a_regs, sizeof a.a);
  a.a_desc = a_desc;
  a.b_desc = b_desc;
  a.scale_d = scale_d != 0;
  a.trans_a = trans_a;
  a.trans_b = trans_b;
  a.bf16 = bf16 != 0;
  t.issued++;
  yield_warpgroup();
  if (g_g[wg].computed < t.issued) {  // the first of the warpgroup to run on
    g_g[wg].computed = t.issued;
    compute(wg, t.issued);
  }
}

}  // namespace cuemu
