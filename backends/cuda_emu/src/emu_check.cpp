/* SPDX-License-Identifier: MIT */
// The checkers behind every load and store of kernel code. The kernel
// sources are compiled with GCC's -fsanitize=thread, which calls
// __tsan_readN / __tsan_writeN before each access; the emulator implements
// those hooks (no ThreadSanitizer runtime is linked). An access made by an
// emulated thread (its frame lies on a coroutine stack) is classified:
//   - its own stack: a local, nothing to check;
//   - dynamic shared memory: bounds against the launch's size, then races;
//   - the module's thread-local block: `__shared__` statics (thread_local
//     in the emulation, nothing else of kernel code is), checked for races;
//   - device memory: bounds against the live allocation, then stream order
//     and blocks of one launch touching the same word;
//   - pinned host memory: allowed (zero-copy);
//   - anything else: host memory, an illegal address on a GPU.
// Shared-memory race: within one barrier interval, a byte written by one
// warp and read or written by another, or read by one warp and then written
// by another (what compute-sanitizer's racecheck reports).
#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "emu_private.h"

namespace cuemu {

namespace {
struct smem_shadow {
  uint32_t epoch;
  int16_t wtid, rtid;
  uint32_t rmask;  // warps that read since the epoch began
  // A cp.async of thread ptid (this block: pend == g_block_gen) has yet to
  // write this byte: it lands at that thread's cp.async.wait_group, so any
  // access before then is a race whatever the barriers (they do not wait
  // for asynchronous copies).
  uint32_t pend;
  int16_t ptid;
  // wgmma (async proxy): the last generic-proxy writer of the byte in any
  // barrier interval and the proxy clock at that write (fenced once the
  // writer executes fence.proxy.async: its fence clock passes gtick), and
  // the warpgroups whose wgmma.mma_async read the byte and may still be in
  // flight (the operation is in g_wg_rec; the bit is a hint, dropped once
  // that operation is found retired).
  int16_t gtid;
  uint32_t gtick;
  uint8_t wgmask;
  // initcheck: the block (g_block_gen) that last wrote the byte; a read in
  // any other block reads what no thread of this block wrote. `seen`: kernel
  // code has touched this static byte (it is a `__shared__` variable and is
  // poisoned at each block start).
  bool seen;
  uint32_t init;
  // Intra-warp order: the writer's warp generation (warp collectives
  // completed) at its write, and the lanes of warp rlwarp that read the
  // byte in its generation rlgen. Lanes of one warp are ordered only by a
  // __syncwarp or another warp collective in between.
  uint32_t wwgen, rlgen, rlanes;
  int16_t rlwarp;
};
// Per 16 bytes of dynamic shared memory (wgmma reads whole aligned 16-byte
// chunks): the latest wgmma.mma_async of each warpgroup that read them
// (operation numbers of emu_wgmma.cpp, 0 = none), valid in block gen.
constexpr int kMaxWarpgroups = 8;
struct wg_rec {
  uint32_t gen;
  uint32_t seq[kMaxWarpgroups];
};
// The last writer and up to two readers since it that are not ordered one
// after the other: a later write must be ordered after both. One reader is
// not enough: a copy stream's read followed by the compute stream's own
// read of the same bytes would hide the copy from the compute stream's
// next write (a read-then-write GEMM accumulating into a buffer the copy
// stream is still reading).
struct dev_shadow {
  uint32_t gen, w_op, w_clock, r_clock, w_block, r2_clock;
  uint16_t w_slot, r_slot, r2_slot;
};

// Device memory is shadowed per 2 bytes: the narrowest element the kernels
// store (f16/bf16), so blocks writing neighbouring halves do not collide.
constexpr size_t kGrain = 2;
uint32_t g_epoch = 1;
uint32_t g_block_gen = 1;
// Offsets in the TLS block of the `__shared__` bytes kernel code has
// touched: poisoned (0xff, a NaN) at each block start, as dynamic shared
// memory is, so that a value left by the previous block is never read back.
std::vector<uint32_t> g_static_touched;
smem_shadow *g_dyn_shadow, *g_static_shadow;
char *g_static_lo, *g_static_hi;
dev_shadow *g_dev_shadow[16];
wg_rec *g_wg_rec;
// fence.proxy.async: a clock advanced by every fence and every block start;
// per thread, its latest fence (clock, barrier interval) and its latest
// fence of an earlier barrier interval than that, valid in block fgen.
uint32_t g_proxy_clock = 1, g_block_clock = 1;
struct proxy_fence {
  uint32_t fgen, last, epoch, prev;
};
proxy_fence g_fence[1024];

void *map_zero(size_t bytes) {
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// The calling thread's instance of this module's PT_TLS block, where the
// `__shared__` statics live.
int find_tls(struct dl_phdr_info *info, size_t, void *) {
  const uintptr_t anchor = (uintptr_t)&g_k;
  bool mine = false;
  size_t tls_size = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && anchor >= lo && anchor < lo + ph.p_memsz) mine = true;
    if (ph.p_type == PT_TLS) tls_size = ph.p_memsz;
  }
  if (!mine) return 0;
  g_static_lo = (char *)info->dlpi_tls_data;
  g_static_hi = g_static_lo ? g_static_lo + tls_size : nullptr;
  return 1;
}

void thread_desc_of(int tid, char *buf, size_t n) {
  const dim3 b = g_k.block_dim;
  snprintf(buf, n, "thread (%u,%u,%u) [warp %d]", tid % b.x, (tid / b.x) % b.y, tid / (b.x * b.y),
           tid / 32);
}

// "dynamic shared offset 0x40" or "__shared__ sh (xent_sum) + 0x40".
void smem_where(const char *p, bool dynamic, char *buf, size_t n) {
  if (dynamic) {
    snprintf(buf, n, "dynamic shared offset %zu", (size_t)(p - (const char *)g_dsmem));
    return;
  }
  Dl_info di;
  if (dladdr(p, &di) && di.dli_sname) {
    int st = 0;
    char *dem = abi::__cxa_demangle(di.dli_sname, nullptr, nullptr, &st);
    snprintf(buf, n, "__shared__ %s + %zu", dem ? dem : di.dli_sname,
             (size_t)(p - (const char *)di.dli_saddr));
    free(dem);
  } else {
    snprintf(buf, n, "a __shared__ variable at static offset %zu", (size_t)(p - g_static_lo));
  }
}

bool note_finding() { return ++g_launch.reports <= 3; }

// A write to a byte that a wgmma.mma_async may still be reading: the
// warpgroup whose operation is not ordered before the write by thread tid,
// else -1 (bits of operations retired for everyone are dropped).
int wg_conflict(smem_shadow *e, size_t off, int tid, uint32_t *seq) {
  const wg_rec *r = g_wg_rec ? &g_wg_rec[off >> 4] : nullptr;
  if (!r || r->gen != g_block_gen) {
    e->wgmask = 0;
    return -1;
  }
  for (int g = 0; g < kMaxWarpgroups; g++) {
    if (!(e->wgmask & (1u << g))) continue;
    const int o = wgmma_write_ordered(g, r->seq[g], tid);
    if (o == 2) e->wgmask &= (uint8_t)~(1u << g);
    if (o == 0) {
      *seq = r->seq[g];
      return g;
    }
  }
  return -1;
}

void report_wg_conflict(int g, uint32_t seq, const char *p, bool dynamic, const char *how,
                        size_t n) {
  if (!note_finding()) {
    report(g_launch.dev, "race", "(more races in kernel %s)", g_launch.name);
    return;
  }
  char me[128], where[160];
  cur_thread_desc(me, sizeof me);
  smem_where(p, dynamic, where, sizeof where);
  report(g_launch.dev, "race",
         "kernel %s: %s %s a byte that wgmma.mma_async #%u of warpgroup %d may still be reading "
         "(no wgmma.wait_group retiring it in this thread, nor in any thread before a "
         "__syncthreads since; %s, %zu bytes)",
         g_launch.name, me, how, seq, g, where, n);
}

void smem_check(smem_shadow *base, size_t off, const char *p, size_t n, bool write, bool dynamic) {
  const int tid = cur_tid(), w = tid >> 5;
  const uint32_t wgen = warp_generation(w);
  bool reported = false;
  for (size_t i = 0; i < n; i++) {
    smem_shadow *e = &base[off + i];
    if (!dynamic && !e->seen) {  // first touch ever: poisoned before this access
      e->seen = true;
      g_static_touched.push_back((uint32_t)(off + i));
      if (!write) *const_cast<char *>(p + i) = (char)0xff;
    }
    if (!write && e->init != g_block_gen && e->pend != g_block_gen && !reported) {
      reported = true;
      if (++g_launch.initchecks <= 3) {
        char me[128], where[160];
        cur_thread_desc(me, sizeof me);
        smem_where(p + i, dynamic, where, sizeof where);
        report(g_launch.dev, "initcheck",
               "kernel %s: %s reads a shared-memory byte that no thread of its block has written "
               "(%s, a read of %zu bytes; uninitialised shared memory holds 0xff here, garbage "
               "on a GPU)", g_launch.name, me, where, n);
      } else if (g_launch.initchecks == 4) {
        report(g_launch.dev, "initcheck", "(more uninitialised reads in kernel %s)",
               g_launch.name);
      }
    }
    if (write) {
      e->init = g_block_gen;
      if (e->wgmask && dynamic) {
        uint32_t seq = 0;
        const int g = wg_conflict(e, off + i, tid, &seq);
        if (g >= 0 && !reported) {
          reported = true;
          report_wg_conflict(g, seq, p + i, dynamic, "writes", n);
        }
      }
      e->gtid = (int16_t)tid;
      e->gtick = g_proxy_clock;
    }
    if (e->pend == g_block_gen && !reported) {
      reported = true;
      if (note_finding()) {
        char me[128], them[64], where[160];
        cur_thread_desc(me, sizeof me);
        thread_desc_of(e->ptid, them, sizeof them);
        smem_where(p + i, dynamic, where, sizeof where);
        report(g_launch.dev, "race",
               "kernel %s: %s %s a byte that a cp.async of %s has not written yet (no "
               "cp.async.wait_group of that copy before this access; %s, %zu bytes)",
               g_launch.name, me, write ? "writes" : "reads", them, where, n);
      } else {
        report(g_launch.dev, "race", "(more races in kernel %s)", g_launch.name);
      }
    }
    if (e->epoch != g_epoch) {
      e->epoch = g_epoch;
      e->wtid = -1;
      e->rmask = 0;
      e->rlanes = 0;
    }
    int other = -1;
    bool intra = false;
    const char *what = nullptr;
    if (e->wtid >= 0 && (e->wtid >> 5) != w) {
      other = e->wtid;
      what = write ? "writes a byte that %s wrote" : "reads a byte that %s wrote";
    } else if (write && (e->rmask & ~(1u << w))) {
      other = e->rtid;
      what = "writes a byte that %s read";
    } else if (e->wtid >= 0 && e->wtid != tid && e->wwgen == wgen) {  // a lane of this warp
      other = e->wtid;
      intra = true;
      what = write ? "writes a byte that %s of its own warp wrote, with no __syncwarp or other "
                     "warp collective in between (intra-warp)"
                   : "reads a byte that %s of its own warp wrote, with no __syncwarp or other "
                     "warp collective in between (intra-warp)";
    } else if (write && (e->rmask & (1u << w)) && e->rlwarp == w && e->rlgen == wgen &&
               (e->rlanes & ~(1u << (tid & 31)))) {
      other = w * 32 + __builtin_ctz(e->rlanes & ~(1u << (tid & 31)));
      intra = true;
      what = "writes a byte that %s of its own warp read, with no __syncwarp or other warp "
             "collective in between (intra-warp)";
    }
    if (what && !reported) {
      reported = true;
      if (note_finding()) {
        char me[128], them[64], where[160], verb[256];
        cur_thread_desc(me, sizeof me);
        if ((other >> 5) != w || intra) {
          thread_desc_of(other, them, sizeof them);
        } else {  // the last reader is of this warp: name another that read
          const uint32_t others = e->rmask & ~(1u << w);
          snprintf(them, sizeof them, "a thread of warp %d", others ? __builtin_ctz(others) : -1);
        }
        smem_where(p + i, dynamic, where, sizeof where);
        snprintf(verb, sizeof verb, what, them);
        report(g_launch.dev, "race", "kernel %s: %s %s%s (%s, %s access of %zu bytes)",
               g_launch.name, me, verb, intra ? "" : ", with no __syncthreads in between", where,
               write ? "a write" : "a read", n);
      } else {
        report(g_launch.dev, "race", "(more races in kernel %s)", g_launch.name);
      }
    }
    if (write) {
      e->wtid = (int16_t)tid;
      e->wwgen = wgen;
    } else {
      e->rmask |= 1u << w;
      e->rtid = (int16_t)tid;
      if (e->rlwarp != w || e->rlgen != wgen) {
        e->rlwarp = (int16_t)w;
        e->rlgen = wgen;
        e->rlanes = 0;
      }
      e->rlanes |= 1u << (tid & 31);
    }
  }
}

[[noreturn]] void illegal(const char *p, size_t n, bool write, const char *why) {
  char me[128];
  cur_thread_desc(me, sizeof me);
  report(g_launch.dev, "bounds", "kernel %s: %s %s %zu bytes at %p: %s", g_launch.name, me,
         write ? "writes" : "reads", n, (const void *)p, why);
  abort_kernel(cudaErrorIllegalAddress);
}
}  // namespace

thread_local char t_tls_anchor;  // makes this thread's TLS block exist

void check_init_segments() {
  if (!g_dyn_shadow)
    g_dyn_shadow = (smem_shadow *)map_zero((kDynSmemMax + 65536) * sizeof(smem_shadow));
  t_tls_anchor = 1;
  g_static_lo = g_static_hi = nullptr;
  dl_iterate_phdr(find_tls, nullptr);
  static size_t shadow_size;
  const size_t need = (size_t)(g_static_hi - g_static_lo);
  if (g_static_lo && need > shadow_size) {
    if (g_static_shadow) munmap(g_static_shadow, shadow_size * sizeof(smem_shadow));
    g_static_shadow = (smem_shadow *)map_zero(need * sizeof(smem_shadow));
    shadow_size = g_static_shadow ? need : 0;
  }
}

void smem_new_epoch() { g_epoch++; }
void smem_new_block() {
  if (g_static_lo)
    for (uint32_t off : g_static_touched)
      if (g_static_lo + off < g_static_hi) g_static_lo[off] = (char)0xff;
  g_block_gen++;
  g_epoch++;
  g_block_clock = ++g_proxy_clock;  // writes of earlier blocks count as fenced
}
uint32_t smem_epoch() { return g_epoch; }

void smem_proxy_fence() {
  const int tid = cur_tid();
  if (tid < 0 || tid >= 1024) return;
  proxy_fence &f = g_fence[tid];
  const uint32_t now = ++g_proxy_clock;
  if (f.fgen != g_block_gen) {
    f = proxy_fence{g_block_gen, now, g_epoch, g_block_clock};
  } else {
    if (f.epoch != g_epoch) f.prev = f.last;
    f.last = now;
    f.epoch = g_epoch;
  }
}

// The proxy clock of thread t's latest fence.proxy.async that orders its
// earlier writes before a read by warpgroup wg now: any fence when t is of
// that warpgroup (it issues the wgmma after the fence), else only a fence
// followed by a __syncthreads.
static uint32_t fence_clock(int t, int wg) {
  if (t < 0 || t >= 1024) return UINT32_MAX;
  const proxy_fence &f = g_fence[t];
  if (f.fgen != g_block_gen) return g_block_clock;
  return (f.epoch != g_epoch || t / 128 == wg) ? f.last : f.prev;
}

void smem_wgmma_read(const void *addr, size_t n, int wg, uint32_t seq) {
  const char *p = (const char *)addr;
  if (!g_dyn_shadow || !g_dsmem) return;
  if (!g_wg_rec) {
    g_wg_rec = (wg_rec *)map_zero((kDynSmemMax + 65536) / 16 * sizeof(wg_rec));
    if (!g_wg_rec) return;
  }
  const size_t off = (size_t)(p - (const char *)g_dsmem);
  // One finding per operation (it reads its operands in many chunks).
  static uint32_t last_gen, last_seq;
  static int last_wg = -1;
  bool reported = last_gen == g_block_gen && last_wg == wg && last_seq == seq;
  for (size_t i = 0; i < n; i++) {
    smem_shadow *e = &g_dyn_shadow[off + i];
    const char *finding = nullptr;
    int other = -1;
    if (e->pend == g_block_gen) {
      finding = "a cp.async of %s has not written yet (no cp.async.wait_group of that copy "
                "before the wgmma)";
      other = e->ptid;
    } else if (e->epoch == g_epoch && e->wtid >= 0) {
      finding = "%s wrote, with no __syncthreads in between";
      other = e->wtid;
    } else if (fence_clock(e->gtid, wg) <= e->gtick) {
      finding = "%s wrote through the generic proxy (missing fence.proxy.async: that thread "
                "executed none after the write and before a __syncthreads that precedes the "
                "wgmma)";
      other = e->gtid;
    }
    if (finding && !reported) {
      reported = true;
      last_gen = g_block_gen;
      last_wg = wg;
      last_seq = seq;
      if (note_finding()) {
        char me[128], them[64], where[160], what[256];
        cur_thread_desc(me, sizeof me);
        thread_desc_of(other, them, sizeof them);
        smem_where(p + i, true, where, sizeof where);
        snprintf(what, sizeof what, finding, them);
        report(g_launch.dev, "race",
               "kernel %s: wgmma.mma_async #%u of warpgroup %d (computed by %s) reads a byte "
               "that %s (%s, %zu bytes)",
               g_launch.name, seq, wg, me, what, where, n);
      } else {
        report(g_launch.dev, "race", "(more races in kernel %s)", g_launch.name);
      }
    }
    e->wgmask |= (uint8_t)(1u << wg);
  }
  for (size_t c = off >> 4; c <= (off + n - 1) >> 4; c++) {
    wg_rec *r = &g_wg_rec[c];
    if (r->gen != g_block_gen) {
      memset(r->seq, 0, sizeof r->seq);
      r->gen = g_block_gen;
    }
    r->seq[wg] = seq;
  }
}

// cp.async issue: the destination must be shared memory inside the launch;
// an access to bytes still pending is a race (also a second copy to them).
void smem_async_issue(const void *addr, size_t n) {
  const char *p = (const char *)addr;
  smem_shadow *base = nullptr;
  size_t off = 0;
  bool dynamic = false;
  if (g_dsmem && p >= (const char *)g_dsmem && p < (const char *)g_dsmem + kDynSmemMax + 65536) {
    off = (size_t)(p - (const char *)g_dsmem);
    if (off + n > g_launch.smem) {
      char why[160];
      snprintf(why, sizeof why, "cp.async destination: dynamic shared offset %zu is past the "
               "launch's %zu bytes", off, g_launch.smem);
      illegal(p, n, true, why);
    }
    base = g_dyn_shadow;
    dynamic = true;
  } else if (p >= g_static_lo && p < g_static_hi) {
    off = (size_t)(p - g_static_lo);
    base = g_static_shadow;
  } else {
    illegal(p, n, true, "cp.async destination is not shared memory");
  }
  if (!base) return;
  const int tid = cur_tid();
  bool reported = false;
  for (size_t i = 0; i < n; i++) {
    smem_shadow *e = &base[off + i];
    if (e->wgmask && dynamic && !reported) {  // the copy may land before the wgmma is done
      uint32_t seq = 0;
      const int g = wg_conflict(e, off + i, tid, &seq);
      if (g >= 0) {
        reported = true;
        report_wg_conflict(g, seq, p + i, dynamic, "issues a cp.async that writes", n);
      }
    }
    if (e->pend == g_block_gen && !reported) {
      reported = true;
      char me[128], them[64], where[160];
      cur_thread_desc(me, sizeof me);
      thread_desc_of(e->ptid, them, sizeof them);
      smem_where(p + i, dynamic, where, sizeof where);
      if (note_finding())
        report(g_launch.dev, "race",
               "kernel %s: a cp.async of %s targets a byte that a cp.async of %s has not "
               "written yet (%s)", g_launch.name, me, them, where);
    }
    e->pend = g_block_gen;
    e->ptid = (int16_t)tid;
  }
}

// cp.async completion (the issuing thread's wait): no longer pending; the
// caller then performs the write through kernel_access, so that the race
// checker sees it in the barrier interval of the wait.
void smem_async_land(const void *addr, size_t n) {
  const char *p = (const char *)addr;
  smem_shadow *base = nullptr;
  size_t off = 0;
  if (g_dsmem && p >= (const char *)g_dsmem && p < (const char *)g_dsmem + kDynSmemMax + 65536) {
    off = (size_t)(p - (const char *)g_dsmem);
    base = g_dyn_shadow;
  } else if (p >= g_static_lo && p < g_static_hi) {
    off = (size_t)(p - g_static_lo);
    base = g_static_shadow;
  }
  if (!base) return;
  for (size_t i = 0; i < n; i++) base[off + i].pend = 0;
}

// Record a read by c: it replaces its own stream's earlier read, or a read
// ordered before it (a write ordered after c is then ordered after that one
// too); two unordered readers are kept, and a third replaces the older.
static void note_reader(dev_shadow *e, const op_ctx &c) {
  const uint16_t me = (uint16_t)c.slot;
  auto done_before_me = [&](uint16_t slot, uint32_t clock) {
    return slot == kNoSlot || slot == me || c.vc[slot] >= clock;
  };
  if (done_before_me(e->r_slot, e->r_clock)) {
    e->r_slot = me;
    e->r_clock = c.clock;
    if (e->r2_slot == me) e->r2_slot = kNoSlot;
  } else if (done_before_me(e->r2_slot, e->r2_clock)) {
    e->r2_slot = me;
    e->r2_clock = c.clock;
  } else {
    e->r_slot = e->r2_slot;
    e->r_clock = e->r2_clock;
    e->r2_slot = me;
    e->r2_clock = c.clock;
  }
}

void shadow_access(const op_ctx &c, const region &r, const char *p, size_t n, bool write,
                   uint32_t block) {
  size_t span = 0;
  char *arena = device_arena(r.device, &span);
  if (!arena || r.device < 0 || r.device >= 16) return;
  if (!g_dev_shadow[r.device]) {
    static std::mutex mu;
    std::lock_guard<std::mutex> g(mu);
    if (!g_dev_shadow[r.device])
      g_dev_shadow[r.device] = (dev_shadow *)map_zero(span / kGrain * sizeof(dev_shadow));
    if (!g_dev_shadow[r.device]) return;
  }
  dev_shadow *sh = g_dev_shadow[r.device];
  const size_t w0 = (size_t)(p - arena) / kGrain, w1 = (size_t)(p + n - 1 - arena) / kGrain;
  bool reported = false;
  for (size_t w = w0; w <= w1; w++) {
    dev_shadow *e = &sh[w];
    if (e->gen != r.gen) *e = dev_shadow{r.gen, 0, 0, 0, 0, 0, kNoSlot, kNoSlot, kNoSlot};
    const char *finding = nullptr;
    uint16_t other_slot = kNoSlot;
    if (e->w_slot != kNoSlot && e->w_slot != c.slot && c.vc[e->w_slot] < e->w_clock) {
      finding = write ? "overwrites device memory written by" : "reads device memory written by";
      other_slot = e->w_slot;
    } else if (write && e->r_slot != kNoSlot && e->r_slot != c.slot && c.vc[e->r_slot] < e->r_clock) {
      finding = "overwrites device memory still being read by an operation of";
      other_slot = e->r_slot;
    } else if (write && e->r2_slot != kNoSlot && e->r2_slot != c.slot &&
               c.vc[e->r2_slot] < e->r2_clock) {
      finding = "overwrites device memory still being read by an operation of";
      other_slot = e->r2_slot;
    } else if (block && e->w_op == c.launch_id && (e->w_block & ~kAtomicBlock) !=
                                                     (block & ~kAtomicBlock) &&
               !(e->w_block & block & kAtomicBlock)) {  // atomics of two blocks: no race
      if (!reported && (reported = true) && note_finding()) {
        char me[128];
        cur_thread_desc(me, sizeof me);
        report(c.device, "race",
               "kernel %s: %s %s %zu bytes at %p that block %u of the same launch wrote "
               "(blocks are not ordered)",
               c.what, me, write ? "writes" : "reads", n, (const void *)p,
               (e->w_block & ~kAtomicBlock) - 1);
      }
    }
    if (finding && !reported) {
      reported = true;
      if (!block || note_finding())
        report(c.device, "stream-order",
               "%s on stream #%d %s %s (stream #%d) with no event wait or synchronisation "
               "between them (%zu bytes at %p, allocation %p + %zu)",
               c.what, c.slot, finding, other_slot == e->w_slot ? op_name(e->w_op) : "another stream",
               other_slot, n, (const void *)p, (void *)r.base, (size_t)(p - r.base));
    }
    if (write) { /* ordered after the readers (or reported): they are done with */
      e->w_slot = (uint16_t)c.slot;
      e->w_clock = c.clock;
      e->w_op = (uint32_t)c.launch_id;
      e->w_block = block;
      e->r_slot = e->r2_slot = kNoSlot;
    } else {
      note_reader(e, c);
    }
  }
}

void kernel_access(const void *addr, size_t n, bool write, bool atomic) {
  const char *p = (const char *)addr;
  if (p >= g_stk_lo && p < g_stk_hi) return;  // a local
  if (g_dsmem && p >= (const char *)g_dsmem && p < (const char *)g_dsmem + kDynSmemMax + 65536) {
    const size_t off = (size_t)(p - (const char *)g_dsmem);
    if (off + n > g_launch.smem) {
      char why[160];
      snprintf(why, sizeof why, "dynamic shared offset %zu is past the launch's %zu bytes", off,
               g_launch.smem);
      illegal(p, n, write, why);
    }
    interleave_point();
    if (g_dyn_shadow) smem_check(g_dyn_shadow, off, p, n, write, true);
    return;
  }
  if (p >= (const char *)&g_k && p < (const char *)(&g_k + 1)) return;  // threadIdx & co
  if (p >= g_static_lo && p < g_static_hi) {
    interleave_point();
    if (g_static_shadow) smem_check(g_static_shadow, (size_t)(p - g_static_lo), p, n, write, false);
    return;
  }
  region r;
  if (find_region(p, &r)) {
    if (r.kind == MEM_PINNED) return;
    if (p + n > r.base + r.size) {
      char why[160];
      snprintf(why, sizeof why, "%zu bytes past the end of the %zu-byte allocation at %p",
               (size_t)(p + n - (r.base + r.size)), r.size, (void *)r.base);
      illegal(p, n, write, why);
    }
    shadow_access(*g_launch.ctx, r, p, n, write,
                  (g_launch.block_linear + 1) | (atomic ? kAtomicBlock : 0u));
    return;
  }
  if (is_device_address(p)) {
    char why[200];
    if (find_region_below(p, &r))
      snprintf(why, sizeof why, "%zu bytes past the end of the %zu-byte allocation at %p "
               "(or in memory freed since)", (size_t)(p + n - (r.base + r.size)), r.size,
               (void *)r.base);
    else
      snprintf(why, sizeof why, "not inside any live device allocation");
    illegal(p, n, write, why);
  }
  illegal(p, n, write, "host memory (not device, shared or pinned memory)");
}

// atomicAdd on fp32 (RED/ATOM.ADD.F32). One block runs at a time, so the
// add itself needs no host atomics; what matters is the check: in global
// memory it is a write that other blocks' atomics on the same word do not
// race with (plain accesses of another block still do); in shared memory
// it is checked as a plain write (the kernels use no shared atomics).
float atomic_add_f32(float *p, float v) {
  kernel_access(p, sizeof *p, true, true);
  const float old = *p;
  *p = old + v;
  return old;
}

int device_arch() {
  const device_config *cfg = device(g_launch.dev);
  return cfg ? cfg->sm_major * 10 + cfg->sm_minor : 0;
}

void atomic_add_f32v(float *p, const float *v, int n, float *old) {
  if (device_arch() < 90) {
    char who[128];
    cur_thread_desc(who, sizeof who);
    report(g_launch.dev, "illegal-instruction", "kernel %s: a vector atomicAdd needs sm_90, the "
           "device is sm_%d (%s)", g_launch.name, device_arch(), who);
    abort_kernel(cudaErrorIllegalInstruction);
  }
  if ((uintptr_t)p % (sizeof(float) * (size_t)n)) {
    char why[96];
    snprintf(why, sizeof why, "a %zu-byte vector atomic needs %zu-byte alignment",
             sizeof(float) * (size_t)n, sizeof(float) * (size_t)n);
    illegal((const char *)p, sizeof(float) * (size_t)n, true, why);
  }
  kernel_access(p, sizeof(float) * (size_t)n, true, true);
  for (int i = 0; i < n; i++) {
    old[i] = p[i];
    p[i] += v[i];
  }
}

}  // namespace cuemu

using namespace cuemu;

// The instrumentation's entry points. Frames on a coroutine stack belong to
// an emulated GPU thread; everything else is host code and passes.
#define CUEMU_HOOK extern "C" __attribute__((visibility("hidden")))
static inline void hook(void *p, size_t n, bool write) {
  const char *fp = (const char *)__builtin_frame_address(0);
  if (fp < g_stk_lo || fp >= g_stk_hi || !cur_checking()) return;
  kernel_access(p, n, write);
}
#define CUEMU_RW(N)                                                          \
  CUEMU_HOOK void __tsan_read##N(void *p) { hook(p, N, false); }             \
  CUEMU_HOOK void __tsan_write##N(void *p) { hook(p, N, true); }             \
  CUEMU_HOOK void __tsan_unaligned_read##N(void *p) { hook(p, N, false); }   \
  CUEMU_HOOK void __tsan_unaligned_write##N(void *p) { hook(p, N, true); }   \
  CUEMU_HOOK void __tsan_volatile_read##N(void *p) { hook(p, N, false); }    \
  CUEMU_HOOK void __tsan_volatile_write##N(void *p) { hook(p, N, true); }
CUEMU_RW(1)
CUEMU_RW(2)
CUEMU_RW(4)
CUEMU_RW(8)
CUEMU_RW(16)
CUEMU_HOOK void __tsan_read_range(void *p, unsigned long n) { if (n) hook(p, n, false); }
CUEMU_HOOK void __tsan_write_range(void *p, unsigned long n) { if (n) hook(p, n, true); }
CUEMU_HOOK void __tsan_init(void) {}
CUEMU_HOOK void __tsan_func_entry(void *) {}
CUEMU_HOOK void __tsan_func_exit(void) {}
CUEMU_HOOK void __tsan_vptr_update(void **, void *) {}
CUEMU_HOOK void __tsan_vptr_read(void **) {}
