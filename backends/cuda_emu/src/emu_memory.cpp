/* SPDX-License-Identifier: MIT */
// Device memory: one reserved host range per emulated GPU (untouched pages
// cost nothing), first-fit allocation with 256-byte alignment and a red
// zone between allocations (an overrun lands outside every allocation and
// is reported), the stream-ordered pool of cudaMallocAsync with its release
// threshold, pinned host memory, and the byte counts and peaks the memory
// planner is checked against.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "emu_private.h"

namespace cuemu {

namespace {
constexpr size_t kAlign = 256, kRedZone = 256, kSlack = 64u << 20;

struct pool_state {
  uint64_t threshold = 0;                    // cudaMemPoolAttrReleaseThreshold
  size_t used = 0, used_high = 0;            // live pool allocations
  size_t reserved = 0, reserved_high = 0;    // used + cached
  std::multimap<size_t, char *> cached;      // freed blocks kept for reuse, by size
  // Blocks whose cudaFreeAsync is enqueued but not yet reached by its
  // stream, by size. CUDA's pool lets a later cudaMallocAsync on the same
  // stream reuse such a block at once (stream order makes that safe), so
  // the host running ahead of the stream does not grow the reservation: the
  // allocation takes over the block's reservation here (a fresh address
  // range: work enqueued before the free still reads the old one, which is
  // given back when the free runs). `taken` holds the taken-over blocks.
  struct pending_free {
    char *p;
    const void *stream;
  };
  std::multimap<size_t, pending_free> pending;
  std::set<char *> taken;
};

struct dev_mem {
  char *base = nullptr;
  size_t span = 0;                           // reserved range
  std::map<size_t, size_t> free_blocks;      // offset -> size
  size_t malloc_bytes = 0, malloc_high = 0;  // live cudaMalloc bytes
  size_t total_high = 0;                     // peak of malloc + pool reserved
  pool_state pool;
};

std::mutex g_mu;
dev_mem g_mem[16];
std::map<uintptr_t, region> g_regions;  // every live allocation by base
std::atomic<uint64_t> g_version{1};     // bumped by each change of g_regions
uint32_t g_gen;
size_t g_pinned_bytes, g_pinned_high;

thread_local region t_cache;
thread_local uint64_t t_cache_version;

dev_mem *mem_of(int dev) {
  const device_config *cfg = device(dev);
  if (!cfg) return nullptr;
  dev_mem *m = &g_mem[dev];
  if (!m->base) {
    m->span = cfg->total_mem + kSlack;
    void *p = mmap(nullptr, m->span + kSlack, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    m->base = (char *)p;
    m->free_blocks[0] = m->span;
  }
  return m;
}

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// First fit of `bytes` (+ red zone) in dev's range; the offset, or SIZE_MAX.
size_t carve(dev_mem *m, size_t bytes) {
  const size_t need = round_up(bytes ? bytes : 1, kAlign) + kRedZone;
  for (auto it = m->free_blocks.begin(); it != m->free_blocks.end(); ++it) {
    if (it->second < need) continue;
    const size_t off = it->first, sz = it->second;
    m->free_blocks.erase(it);
    if (sz > need) m->free_blocks[off + need] = sz - need;
    return off;
  }
  return SIZE_MAX;
}

void uncarve(dev_mem *m, size_t off, size_t bytes) {
  size_t sz = round_up(bytes ? bytes : 1, kAlign) + kRedZone;
  auto next = m->free_blocks.lower_bound(off);
  if (next != m->free_blocks.end() && off + sz == next->first) {
    sz += next->second;
    next = m->free_blocks.erase(next);
  }
  if (next != m->free_blocks.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      prev->second += sz;
      return;
    }
  }
  m->free_blocks[off] = sz;
}

void add_region(char *p, size_t bytes, mem_kind kind, int dev) {
  region r{p, bytes, kind, dev, ++g_gen};
  g_regions[(uintptr_t)p] = r;
  g_version++;
}

void note_peak(dev_mem *m) {
  const size_t total = m->malloc_bytes + m->pool.reserved;
  m->total_high = std::max(m->total_high, total);
  m->malloc_high = std::max(m->malloc_high, m->malloc_bytes);
  m->pool.used_high = std::max(m->pool.used_high, m->pool.used);
  m->pool.reserved_high = std::max(m->pool.reserved_high, m->pool.reserved);
}

size_t in_use(const dev_mem *m) { return m->malloc_bytes + m->pool.reserved; }
void pool_trim_locked(dev_mem *m, size_t keep);
}  // namespace

bool find_region(const void *p, region *out) {
  const uintptr_t a = (uintptr_t)p;
  const uint64_t v = g_version.load(std::memory_order_acquire);
  if (t_cache_version == v && a >= (uintptr_t)t_cache.base && a < (uintptr_t)t_cache.base + t_cache.size) {
    *out = t_cache;
    return true;
  }
  std::lock_guard<std::mutex> g(g_mu);
  auto it = g_regions.upper_bound(a);
  if (it == g_regions.begin()) return false;
  --it;
  const region &r = it->second;
  if (a >= (uintptr_t)r.base + std::max<size_t>(r.size, 1)) return false;
  t_cache = r;
  t_cache_version = g_version.load();
  *out = r;
  return true;
}

bool find_region_below(const void *p, region *out) {
  std::lock_guard<std::mutex> g(g_mu);
  auto it = g_regions.upper_bound((uintptr_t)p);
  if (it == g_regions.begin()) return false;
  --it;
  if (it->second.kind == MEM_PINNED) return false;
  *out = it->second;
  return true;
}

char *device_arena(int dev, size_t *span) {
  if (!device(dev)) return nullptr;
  if (span) *span = g_mem[dev].span + kSlack;
  return g_mem[dev].base;
}

bool is_device_address(const void *p) {
  const char *c = (const char *)p;
  for (int d = 0; d < device_count(); d++)
    if (g_mem[d].base && c >= g_mem[d].base && c < g_mem[d].base + g_mem[d].span + kSlack)
      return true;
  return false;
}

cudaError_t device_alloc(int dev, size_t bytes, mem_kind kind, void **out, const void *stream) {
  *out = nullptr;
  std::lock_guard<std::mutex> g(g_mu);
  dev_mem *m = mem_of(dev);
  if (!m) return cudaErrorInvalidDevice;
  const device_config *cfg = device(dev);
  char *p = nullptr;
  if (kind == MEM_POOL) {
    // Reuse a cached block that fits (smallest first), as the pool does.
    auto it = m->pool.cached.lower_bound(bytes);
    if (it != m->pool.cached.end() && it->first <= bytes * 2 + kAlign) {
      p = it->second;
      const size_t cap = it->first;
      m->pool.cached.erase(it);
      m->pool.reserved -= cap;  // re-added below with the size used now
      uncarve(m, (size_t)(p - m->base), cap);
      p = nullptr;
    } else {
      // Else a block freed earlier on this stream whose free has not run yet.
      for (auto pf = m->pool.pending.lower_bound(bytes);
           pf != m->pool.pending.end() && pf->first <= bytes * 2 + kAlign; ++pf) {
        if (pf->second.stream != stream) continue;
        m->pool.reserved -= pf->first;  // re-added below with the size used now
        m->pool.taken.insert(pf->second.p);
        m->pool.pending.erase(pf);
        break;
      }
    }
  }
  if (in_use(m) + bytes > cfg->total_mem) pool_trim_locked(m, m->pool.used);  // give back the cache
  if (in_use(m) + bytes > cfg->total_mem) return cudaErrorMemoryAllocation;
  const size_t off = carve(m, bytes);
  if (off == SIZE_MAX) return cudaErrorMemoryAllocation;
  p = m->base + off;
  if (kind == MEM_POOL) {
    m->pool.used += bytes;
    m->pool.reserved += bytes;
  } else {
    m->malloc_bytes += bytes;
  }
  note_peak(m);
  add_region(p, bytes, kind, dev);
  *out = p;
  return cudaSuccess;
}

bool device_release(void *p, mem_kind *kind, size_t *size) {
  std::lock_guard<std::mutex> g(g_mu);
  auto it = g_regions.find((uintptr_t)p);
  if (it == g_regions.end() || it->second.kind == MEM_PINNED) return false;
  const region r = it->second;
  g_regions.erase(it);
  g_version++;
  dev_mem *m = &g_mem[r.device];
  if (r.kind == MEM_POOL && m->pool.taken.erase(r.base)) {
    // Its reservation moved to a later allocation on the same stream.
    m->pool.used -= r.size;
    uncarve(m, (size_t)(r.base - m->base), r.size);
  } else if (r.kind == MEM_POOL) {
    // Back to the pool's cache: still reserved until a trim.
    for (auto pf = m->pool.pending.lower_bound(r.size);
         pf != m->pool.pending.end() && pf->first == r.size; ++pf)
      if (pf->second.p == r.base) {
        m->pool.pending.erase(pf);
        break;
      }
    m->pool.used -= r.size;
    m->pool.cached.emplace(r.size, r.base);
  } else {
    m->malloc_bytes -= r.size;
    uncarve(m, (size_t)(r.base - m->base), r.size);
  }
  if (kind) *kind = r.kind;
  if (size) *size = r.size;
  return true;
}

namespace {
void pool_trim_locked(dev_mem *m, size_t keep) {
  while (m->pool.reserved > keep && !m->pool.cached.empty()) {
    auto it = std::prev(m->pool.cached.end());  // largest first
    m->pool.reserved -= it->first;
    uncarve(m, (size_t)(it->second - m->base), it->first);
    m->pool.cached.erase(it);
  }
}
}  // namespace

void pool_trim(int dev) {
  if (!device(dev)) return;
  std::lock_guard<std::mutex> g(g_mu);
  dev_mem *m = &g_mem[dev];
  const uint64_t keep = std::max<uint64_t>(m->pool.threshold, m->pool.used);
  pool_trim_locked(m, keep > SIZE_MAX ? SIZE_MAX : (size_t)keep);
}

void memory_stats_json(FILE *f) {
  std::lock_guard<std::mutex> g(g_mu);
  fprintf(f, "\"devices\": [");
  for (int d = 0; d < device_count(); d++) {
    const dev_mem *m = &g_mem[d];
    fprintf(f,
            "%s{\"device\": %d, \"peak_bytes\": %zu, \"malloc_peak_bytes\": %zu, "
            "\"pool_used_peak_bytes\": %zu, \"pool_reserved_peak_bytes\": %zu, "
            "\"live_malloc_bytes\": %zu, \"pool_release_threshold\": %llu}",
            d ? ", " : "", d, m->total_high, m->malloc_high, m->pool.used_high,
            m->pool.reserved_high, m->malloc_bytes, (unsigned long long)m->pool.threshold);
  }
  fprintf(f, "], \"pinned_peak_bytes\": %zu", g_pinned_high);
}

}  // namespace cuemu

using namespace cuemu;

static int dev_checked(cudaError_t *err) {
  const int d = current_device();
  if (!device(d)) {
    *err = device_count() ? cudaErrorInvalidDevice : cudaErrorNoDevice;
    return -1;
  }
  *err = sticky(d);
  return d;
}

extern "C" {

cudaError_t cudaMalloc(void **ptr, size_t size) {
  if (!ptr) return record_error(cudaErrorInvalidValue);
  *ptr = nullptr;
  cudaError_t e;
  const int d = dev_checked(&e);
  if (e) return record_error(e);
  if (size == 0) return cudaSuccess;
  return record_error(device_alloc(d, size, MEM_DEVICE, ptr));
}

cudaError_t cudaFree(void *ptr) {
  cudaError_t e;
  const int d = dev_checked(&e);
  if (e && d < 0) return record_error(e);
  if (!ptr) return cudaSuccess;
  region r;
  if (!find_region(ptr, &r) || r.base != ptr || r.kind == MEM_PINNED) {
    report(current_device(), "api", "cudaFree(%p): not the start of a cudaMalloc allocation", ptr);
    return record_error(cudaErrorInvalidValue);
  }
  device_sync(r.device);  // cudaFree synchronises the device
  if (r.kind == MEM_POOL) {
    report(r.device, "api", "cudaFree(%p) of a cudaMallocAsync allocation", ptr);
    return record_error(cudaErrorInvalidValue);
  }
  device_release(ptr, nullptr, nullptr);
  return record_error(sticky(r.device));
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags) {
  if (!ptr) return record_error(cudaErrorInvalidValue);
  *ptr = nullptr;
  void *p = pinned_map(size ? size : 1);
  if (!p) return record_error(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> g(g_mu);
  add_region((char *)p, size, MEM_PINNED, -1);
  g_pinned_bytes += size;
  g_pinned_high = std::max(g_pinned_high, g_pinned_bytes);
  *ptr = p;
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void **ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }

cudaError_t cudaFreeHost(void *ptr) {
  if (!ptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_regions.find((uintptr_t)ptr);
    if (it == g_regions.end() || it->second.kind != MEM_PINNED) {
      report(current_device(), "api", "cudaFreeHost(%p): not a cudaMallocHost allocation", ptr);
      return record_error(cudaErrorInvalidValue);
    }
  }
  for (int d = 0; d < device_count(); d++) device_sync(d);  // it synchronises too
  std::lock_guard<std::mutex> g(g_mu);
  auto it = g_regions.find((uintptr_t)ptr);
  g_pinned_bytes -= it->second.size;
  g_regions.erase(it);
  g_version++;
  pinned_unmap(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) {
  if (!ptr) return record_error(cudaErrorInvalidValue);
  *ptr = nullptr;
  const int d = stream_device(stream);
  if (d < 0) return record_error(cudaErrorInvalidResourceHandle);
  if (sticky(d)) return record_error(sticky(d));
  return record_error(device_alloc(d, size ? size : 1, MEM_POOL, ptr, stream));
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  if (!ptr) return cudaSuccess;
  region r;
  if (!find_region(ptr, &r) || r.base != ptr || r.kind != MEM_POOL) {
    report(current_device(), "api", "cudaFreeAsync(%p): not the start of a cudaMallocAsync allocation", ptr);
    return record_error(cudaErrorInvalidValue);
  }
  // The memory stays valid for the work enqueued before; it returns to the
  // pool when the stream reaches this point (or, taken over by a later
  // cudaMallocAsync on the same stream, its reservation moves on now).
  {
    std::lock_guard<std::mutex> g(g_mu);
    g_mem[r.device].pool.pending.insert({r.size, {r.base, stream}});
  }
  const cudaError_t e = enqueue(stream, "cudaFreeAsync", [ptr](op_ctx &) {
    device_release(ptr, nullptr, nullptr);
    return cudaSuccess;
  });
  if (e != cudaSuccess) {  // never freed: not reusable either
    std::lock_guard<std::mutex> g(g_mu);
    pool_state &pl = g_mem[r.device].pool;
    for (auto pf = pl.pending.lower_bound(r.size); pf != pl.pending.end() && pf->first == r.size; ++pf)
      if (pf->second.p == r.base) {
        pl.pending.erase(pf);
        break;
      }
  }
  return record_error(e);
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device_ordinal) {
  if (!pool || !device(device_ordinal)) return record_error(cudaErrorInvalidValue);
  *pool = (cudaMemPool_t)(uintptr_t)(device_ordinal + 1);
  return cudaSuccess;
}

static dev_mem *pool_dev(cudaMemPool_t pool) {
  const int d = (int)(uintptr_t)pool - 1;
  return device(d) ? mem_of(d) : nullptr;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void *value) {
  std::lock_guard<std::mutex> g(g_mu);
  dev_mem *m = pool_dev(pool);
  if (!m || !value) return record_error(cudaErrorInvalidValue);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: m->pool.threshold = *(uint64_t *)value; return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh: m->pool.reserved_high = m->pool.reserved; return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh: m->pool.used_high = m->pool.used; return cudaSuccess;
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies: return cudaSuccess;
    default: return record_error(cudaErrorInvalidValue);
  }
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void *value) {
  std::lock_guard<std::mutex> g(g_mu);
  dev_mem *m = pool_dev(pool);
  if (!m || !value) return record_error(cudaErrorInvalidValue);
  uint64_t v = 0;
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: v = m->pool.threshold; break;
    case cudaMemPoolAttrReservedMemCurrent: v = m->pool.reserved; break;
    case cudaMemPoolAttrReservedMemHigh: v = m->pool.reserved_high; break;
    case cudaMemPoolAttrUsedMemCurrent: v = m->pool.used; break;
    case cudaMemPoolAttrUsedMemHigh: v = m->pool.used_high; break;
    default: *(int *)value = 1; return cudaSuccess;  // the reuse flags: on
  }
  *(uint64_t *)value = v;
  return cudaSuccess;
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  std::lock_guard<std::mutex> g(g_mu);
  dev_mem *m = pool_dev(pool);
  if (!m) return record_error(cudaErrorInvalidValue);
  pool_trim_locked(m, std::max(keep, m->pool.used));
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  cudaError_t e;
  const int d = dev_checked(&e);
  if (d < 0) return record_error(e);
  std::lock_guard<std::mutex> g(g_mu);
  dev_mem *m = mem_of(d);
  const size_t total = device(d)->total_mem, used = in_use(m);
  if (free_bytes) *free_bytes = total > used ? total - used : 0;
  if (total_bytes) *total_bytes = total;
  return record_error(e);
}

}  // extern "C"
