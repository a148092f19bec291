/* SPDX-License-Identifier: MIT */
// Streams as real asynchronous queues (one worker thread each, work in
// order), events, cross-stream waits, host callbacks, copies and memsets,
// and the vector clocks that the stream-order checker compares: every
// operation carries its stream's clock as it was enqueued; event waits and
// host synchronisation join clocks, exactly the orderings CUDA guarantees.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "emu_private.h"

namespace cuemu {

namespace {
constexpr uint32_t kStreamMagic = 0x5354524d, kEventMagic = 0x45564e54, kDead = 0xdead;
constexpr int kLegacySlots = 16;  // slot d = device d's legacy default stream

struct stream_obj;
struct op {
  std::function<cudaError_t(op_ctx &)> fn;
  const char *what;
  uint64_t seq;
  uint32_t clock, id;
  uint32_t vc[kMaxSlots];
  std::vector<std::pair<stream_obj *, uint64_t>> waits;  // to complete first
};

struct stream_obj {
  uint32_t magic = kStreamMagic;
  int slot = 0, device = 0;
  unsigned flags = 0;
  bool legacy = false, stop = false, exited = false;
  std::deque<op *> q;
  uint64_t enq_seq = 0, done_seq = 0;
  uint32_t vc[kMaxSlots] = {};
};

struct event_obj {
  uint32_t magic = kEventMagic;
  unsigned flags = 0;
  bool recorded = false;
  stream_obj *s = nullptr;
  uint64_t seq = 0;
  uint32_t vc[kMaxSlots] = {};
  double when = 0;  // host seconds when the stream reached the record
};

// One lock for every queue and clock: the emulator favours being obviously
// right over contention it does not have (a handful of streams). Never
// destroyed: detached workers still wait on them when the process exits
// (destroying a condition variable with waiters blocks forever).
std::mutex &g_mu = *new std::mutex;
std::condition_variable &g_cv = *new std::condition_variable;
uint32_t g_host_vc[kMaxSlots];
uint32_t g_slot_clock[kMaxSlots];
bool g_slot_used[kMaxSlots];
stream_obj *g_legacy[kLegacySlots];
std::set<stream_obj *> &g_live = *new std::set<stream_obj *>;  // never freed: events name them
std::set<event_obj *> &g_events = *new std::set<event_obj *>;
uint32_t g_op_id;
const char *g_names[4096];

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void join(uint32_t *into, const uint32_t *from) {
  for (int i = 0; i < kMaxSlots; i++)
    if (from[i] > into[i]) into[i] = from[i];
}

void worker(stream_obj *s) {
  pinned_worker_starts();
  std::unique_lock<std::mutex> lk(g_mu);
  for (;;) {
    g_cv.wait(lk, [&] { return s->stop || !s->q.empty(); });
    if (s->q.empty()) break;
    op *o = s->q.front();
    g_cv.wait(lk, [&] {
      for (auto &w : o->waits)
        if (w.first->done_seq < w.second) return false;
      return true;
    });
    lk.unlock();
    cudaError_t e = sticky(s->device);
    if (!e) {
      op_ctx c{s->device, s->slot, o->clock, o->vc, o->id, o->what};
      e = o->fn(c);
    }
    if (e) set_sticky(s->device, e);
    lk.lock();
    s->done_seq = o->seq;
    s->q.pop_front();
    delete o;
    g_cv.notify_all();
  }
  s->exited = true;
  g_cv.notify_all();
}

stream_obj *new_stream(int dev, unsigned flags, bool legacy, int slot) {
  stream_obj *s = new stream_obj;
  s->device = dev;
  s->flags = flags;
  s->legacy = legacy;
  s->slot = slot;
  g_slot_used[slot] = true;
  s->vc[slot] = g_slot_clock[slot];
  g_live.insert(s);
  std::thread(worker, s).detach();
  return s;
}

// The stream behind a handle (NULL: the current device's legacy stream);
// nullptr when the handle is not a live stream. Call with g_mu held.
stream_obj *resolve_locked(cudaStream_t h) {
  if (!h || (uintptr_t)h == 1) {
    const int d = current_device();
    if (!device(d) || d >= kLegacySlots) return nullptr;
    if (!g_legacy[d]) g_legacy[d] = new_stream(d, cudaStreamDefault, true, d);
    return g_legacy[d];
  }
  stream_obj *s = (stream_obj *)h;
  if (!g_live.count(s) || s->magic != kStreamMagic) return nullptr;
  return s;
}

// Enqueue with g_mu held; returns the operation's sequence number.
uint64_t enqueue_locked(stream_obj *s, const char *what, std::function<cudaError_t(op_ctx &)> fn,
                        stream_obj *wait_s = nullptr, uint64_t wait_seq = 0) {
  op *o = new op;
  o->fn = std::move(fn);
  o->what = what;
  join(s->vc, g_host_vc);  // what the host saw complete is ordered before
  if (s->legacy) {
    // The legacy stream waits for every blocking stream of its device.
    for (stream_obj *t : g_live)
      if (t != s && !t->legacy && !t->stop && t->device == s->device &&
          !(t->flags & cudaStreamNonBlocking)) {
        join(s->vc, t->vc);
        o->waits.emplace_back(t, t->enq_seq);
      }
  } else if (!(s->flags & cudaStreamNonBlocking) && s->device < kLegacySlots &&
             g_legacy[s->device]) {
    stream_obj *l = g_legacy[s->device];
    join(s->vc, l->vc);
    o->waits.emplace_back(l, l->enq_seq);
  }
  if (wait_s) o->waits.emplace_back(wait_s, wait_seq);
  o->clock = ++g_slot_clock[s->slot];
  s->vc[s->slot] = o->clock;
  memcpy(o->vc, s->vc, sizeof o->vc);
  o->seq = ++s->enq_seq;
  o->id = ++g_op_id;
  g_names[o->id % 4096] = what;
  s->q.push_back(o);
  g_cv.notify_all();
  return o->seq;
}

// Wait (g_mu held through lk) until s has completed seq; then the host has
// seen everything up to the clock vc.
void host_wait(std::unique_lock<std::mutex> &lk, stream_obj *s, uint64_t seq, const uint32_t *vc) {
  g_cv.wait(lk, [&] { return s->done_seq >= seq; });
  join(g_host_vc, vc);
  pinned_host_saw(g_host_vc);
}

void sync_device_locked(std::unique_lock<std::mutex> &lk, int dev) {
  std::vector<std::pair<stream_obj *, uint64_t>> targets;
  uint32_t vc[kMaxSlots] = {};
  for (stream_obj *s : g_live)
    if (s->device == dev && !s->exited) {
      targets.emplace_back(s, s->enq_seq);
      join(vc, s->vc);
    }
  for (auto &t : targets) g_cv.wait(lk, [&] { return t.first->done_seq >= t.second; });
  join(g_host_vc, vc);
  pinned_host_saw(g_host_vc);
}
}  // namespace

cudaError_t enqueue(cudaStream_t stream, const char *what, std::function<cudaError_t(op_ctx &)> fn) {
  std::lock_guard<std::mutex> g(g_mu);
  stream_obj *s = resolve_locked(stream);
  if (!s) return cudaErrorInvalidResourceHandle;
  if (sticky(s->device)) return sticky(s->device);
  enqueue_locked(s, what, std::move(fn));
  return cudaSuccess;
}

int stream_device(cudaStream_t stream) {
  std::lock_guard<std::mutex> g(g_mu);
  stream_obj *s = resolve_locked(stream);
  return s ? s->device : -1;
}

bool stream_on_current_device(cudaStream_t stream, const char *what) {
  const int sdev = stream_device(stream), cur = current_device();
  if (!stream || sdev < 0 || sdev == cur) return true;
  report(cur, "api",
         "%s on a stream of device %d while the thread's current device is %d (cudaSetDevice "
         "missing)", what, sdev, cur);
  return false;
}

void device_sync(int dev) {
  std::unique_lock<std::mutex> lk(g_mu);
  sync_device_locked(lk, dev);
  lk.unlock();
  pool_trim(dev);
}

const char *op_name(uint32_t id) {
  const char *n = g_names[id % 4096];
  return n ? n : "an earlier operation";
}

bool access(op_ctx &c, const void *p, size_t bytes, bool write) {
  if (!bytes) return true;
  region r;
  if (!find_region(p, &r) || r.kind == MEM_PINNED ||
      (const char *)p + bytes > r.base + r.size) {
    if (r.kind == MEM_PINNED && find_region(p, &r) && (const char *)p + bytes <= r.base + r.size)
      return true;  // pinned host memory: not device memory, nothing to order
    report(c.device, "bounds",
           "%s %s %zu bytes at %p: %s", c.what, write ? "writes" : "reads", bytes, p,
           find_region(p, &r) ? "past the end of its allocation" : "not inside any live allocation");
    return false;
  }
  if (compute_enabled()) shadow_access(c, r, (const char *)p, bytes, write, 0);
  return true;
}

}  // namespace cuemu

using namespace cuemu;

namespace {
enum ptr_class { P_HOST, P_DEVICE, P_PINNED };
ptr_class classify(const void *p) {
  region r;
  if (find_region(p, &r)) return r.kind == MEM_PINNED ? P_PINNED : P_DEVICE;
  return is_device_address(p) ? P_DEVICE : P_HOST;
}
const char *kind_name(cudaMemcpyKind k) {
  switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    default: return "cudaMemcpyDefault";
  }
}

// Pinned host bytes an asynchronous copy writes (or reads, host_may_read):
// guarded against the host until it has seen the copy complete.
struct host_span {
  const void *p;
  size_t n;
  bool host_may_read;
};

// Enqueue a copy or memset; with `wait` the host waits for it (and has seen
// it complete), else `guards` are set on the pinned bytes it touches.
cudaError_t submit(cudaStream_t h, const char *api, std::function<cudaError_t(op_ctx &)> fn,
                   bool wait, std::vector<host_span> guards = {}) {
  std::unique_lock<std::mutex> lk(g_mu);
  stream_obj *s = resolve_locked(h);
  if (!s) return record_error(cudaErrorInvalidResourceHandle);
  if (sticky(s->device)) return record_error(sticky(s->device));
  const uint64_t seq = enqueue_locked(s, api, std::move(fn));
  if (!wait && compute_enabled())
    for (const host_span &g : guards)
      pinned_guard(g.p, g.n, g.host_may_read, s->device, s->slot, s->vc[s->slot], api);
  if (wait) {
    uint32_t vc[kMaxSlots];
    memcpy(vc, s->vc, sizeof vc);
    host_wait(lk, s, seq, vc);
  }
  return record_error(wait ? sticky(s->device) : cudaSuccess);
}

// The copy as a stream operation; `sync` waits for it like a copy to
// pageable memory (or cudaMemcpy) does.
cudaError_t memcpy_impl(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t h,
                        bool sync, const char *api) {
  if (n == 0) return cudaSuccess;
  if (!dst || !src) return record_error(cudaErrorInvalidValue);
  if (!stream_on_current_device(h, api)) return record_error(cudaErrorInvalidResourceHandle);
  const ptr_class cd = classify(dst), cs = classify(src);
  const bool ddev = cd == P_DEVICE, sdev = cs == P_DEVICE;
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToDevice: ok = ddev && !sdev; break;
    case cudaMemcpyDeviceToHost: ok = sdev && !ddev; break;
    case cudaMemcpyDeviceToDevice: ok = sdev && ddev; break;
    case cudaMemcpyHostToHost: ok = !sdev && !ddev; break;
    case cudaMemcpyDefault: break;
    default: return record_error(cudaErrorInvalidMemcpyDirection);
  }
  if (!ok) {
    const bool want_ddev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool dst_wrong = ddev != want_ddev;
    report(current_device(), "api", "%s(%p <- %p, %zu bytes, %s): the %s is %s memory", api, dst,
           src, n, kind_name(kind), dst_wrong ? "destination" : "source",
           (dst_wrong ? ddev : sdev) ? "device" : "host");
    return record_error(cudaErrorInvalidValue);
  }
  // A pageable source is staged at the call (the caller may reuse it at
  // once); pinned memory is read when the stream gets there, as on a GPU.
  std::shared_ptr<std::vector<char>> staged;
  if (cs == P_HOST && data_moves(n))
    staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + n);
  const bool wait = sync || cd == P_HOST;
  auto fn = [=](op_ctx &c) -> cudaError_t {
    if (sdev && !access(c, src, n, false)) return cudaErrorIllegalAddress;
    if (ddev && !access(c, dst, n, true)) return cudaErrorIllegalAddress;
    // Pinned memory through its alias: the host's pages may be guarded.
    if (data_moves(n))
      memcpy(cd == P_PINNED ? pinned_alias(dst) : dst,
             staged ? staged->data() : cs == P_PINNED ? pinned_alias(src) : src, n);
    return cudaSuccess;
  };
  std::vector<host_span> guards;
  if (cd == P_PINNED) guards.push_back(host_span{dst, n, false});
  if (cs == P_PINNED) guards.push_back(host_span{src, n, true});
  return submit(h, api, fn, wait, guards);
}

cudaError_t memset_impl(void *dst, int value, size_t n, cudaStream_t h, bool sync, const char *api) {
  if (n == 0) return cudaSuccess;
  if (!stream_on_current_device(h, api)) return record_error(cudaErrorInvalidResourceHandle);
  if (classify(dst) != P_DEVICE) {
    report(current_device(), "api", "%s(%p, %zu bytes): not device memory", api, dst, n);
    return record_error(cudaErrorInvalidValue);
  }
  auto fn = [=](op_ctx &c) -> cudaError_t {
    if (!access(c, dst, n, true)) return cudaErrorIllegalAddress;
    if (compute_enabled()) memset(dst, value, n);
    return cudaSuccess;
  };
  return submit(h, api, fn, sync);
}
}  // namespace

extern "C" {

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return memcpy_impl(dst, src, n, kind, stream, false, "cudaMemcpyAsync");
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
  return memcpy_impl(dst, src, n, kind, nullptr, true, "cudaMemcpy");
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t stream) {
  return memset_impl(dst, value, n, stream, false, "cudaMemsetAsync");
}
cudaError_t cudaMemset(void *dst, int value, size_t n) {
  return memset_impl(dst, value, n, nullptr, true, "cudaMemset");
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags) {
  if (!out) return record_error(cudaErrorInvalidValue);
  const int d = current_device();
  if (!device(d)) return record_error(device_count() ? cudaErrorInvalidDevice : cudaErrorNoDevice);
  if (sticky(d)) return record_error(sticky(d));
  std::lock_guard<std::mutex> g(g_mu);
  for (int slot = kLegacySlots; slot < kMaxSlots; slot++)
    if (!g_slot_used[slot]) {
      *out = (cudaStream_t)new_stream(d, flags, false, slot);
      return cudaSuccess;
    }
  report(d, "api", "more than %d streams alive at once (the emulator's limit)",
         kMaxSlots - kLegacySlots);
  return record_error(cudaErrorMemoryAllocation);
}
cudaError_t cudaStreamCreate(cudaStream_t *out) { return cudaStreamCreateWithFlags(out, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t h) {
  std::unique_lock<std::mutex> lk(g_mu);
  stream_obj *s = resolve_locked(h);
  if (!s || s->legacy || !h) return record_error(cudaErrorInvalidResourceHandle);
  // Work already enqueued still runs; the handle is dead at once.
  s->stop = true;
  g_cv.notify_all();
  g_cv.wait(lk, [&] { return s->exited; });
  s->magic = kDead;
  g_slot_used[s->slot] = false;
  return cudaSuccess;
}

// Mutation testing: ESMT_EMU_DROP_HOST_SYNC=1 makes cudaStreamSynchronize
// and cudaEventSynchronize return at once, as if each were deleted.
static bool host_sync_dropped() {
  static const bool drop = getenv("ESMT_EMU_DROP_HOST_SYNC") && atoi(getenv("ESMT_EMU_DROP_HOST_SYNC"));
  return drop;
}

cudaError_t cudaStreamSynchronize(cudaStream_t h) {
  std::unique_lock<std::mutex> lk(g_mu);
  stream_obj *s = resolve_locked(h);
  if (!s) return record_error(cudaErrorInvalidResourceHandle);
  if (host_sync_dropped()) return record_error(sticky(s->device));
  uint32_t vc[kMaxSlots];
  memcpy(vc, s->vc, sizeof vc);
  host_wait(lk, s, s->enq_seq, vc);
  const int d = s->device;
  lk.unlock();
  pool_trim(d);
  return record_error(sticky(d));
}

cudaError_t cudaStreamQuery(cudaStream_t h) {
  std::lock_guard<std::mutex> g(g_mu);
  stream_obj *s = resolve_locked(h);
  if (!s) return record_error(cudaErrorInvalidResourceHandle);
  if (sticky(s->device)) return record_error(sticky(s->device));
  if (s->done_seq < s->enq_seq) return cudaErrorNotReady;
  join(g_host_vc, s->vc);
  pinned_host_saw(g_host_vc);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  const int d = current_device();
  if (!device(d)) return record_error(device_count() ? cudaErrorInvalidDevice : cudaErrorNoDevice);
  device_sync(d);
  return record_error(sticky(d));
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *user) {
  if (!fn) return record_error(cudaErrorInvalidValue);
  return record_error(enqueue(stream, "cudaLaunchHostFunc", [fn, user](op_ctx &) {
    fn(user);
    return cudaSuccess;
  }));
}

static event_obj *event_of(cudaEvent_t e) {
  event_obj *ev = (event_obj *)e;
  return e && g_events.count(ev) && ev->magic == kEventMagic ? ev : nullptr;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags) {
  if (!out) return record_error(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> g(g_mu);
  event_obj *e = new event_obj;
  e->flags = flags;
  g_events.insert(e);
  *out = (cudaEvent_t)e;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *out) { return cudaEventCreateWithFlags(out, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t h) {
  std::lock_guard<std::mutex> g(g_mu);
  event_obj *e = event_of(h);
  if (!e) return record_error(cudaErrorInvalidResourceHandle);
  e->magic = kDead;  // kept: a queued wait may still name it
  g_events.erase(e);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t h, cudaStream_t stream) {
  std::lock_guard<std::mutex> g(g_mu);
  event_obj *e = event_of(h);
  stream_obj *s = resolve_locked(stream);
  if (!e || !s) return record_error(cudaErrorInvalidResourceHandle);
  if (sticky(s->device)) return record_error(sticky(s->device));
  e->recorded = true;
  e->s = s;
  e->seq = enqueue_locked(s, "cudaEventRecord", [e](op_ctx &) {
    e->when = now_s();
    return cudaSuccess;
  });
  memcpy(e->vc, s->vc, sizeof e->vc);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t h, unsigned int flags) {
  std::lock_guard<std::mutex> g(g_mu);
  event_obj *e = event_of(h);
  stream_obj *s = resolve_locked(stream);
  if (!e || !s) return record_error(cudaErrorInvalidResourceHandle);
  if (!e->recorded) return cudaSuccess;  // waits on nothing, as in CUDA
  // Mutation testing: ESMT_EMU_DROP_EVENT_WAIT=1 deletes every wait.
  static const bool drop = getenv("ESMT_EMU_DROP_EVENT_WAIT") && atoi(getenv("ESMT_EMU_DROP_EVENT_WAIT"));
  if (drop) return cudaSuccess;
  join(s->vc, e->vc);
  enqueue_locked(s, "cudaStreamWaitEvent", [](op_ctx &) { return cudaSuccess; }, e->s, e->seq);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t h) {
  std::unique_lock<std::mutex> lk(g_mu);
  event_obj *e = event_of(h);
  if (!e) return record_error(cudaErrorInvalidResourceHandle);
  if (!e->recorded || host_sync_dropped()) return cudaSuccess;
  host_wait(lk, e->s, e->seq, e->vc);
  const int d = e->s->device;
  lk.unlock();
  pool_trim(d);
  return record_error(sticky(d));
}

cudaError_t cudaEventQuery(cudaEvent_t h) {
  std::lock_guard<std::mutex> g(g_mu);
  event_obj *e = event_of(h);
  if (!e) return record_error(cudaErrorInvalidResourceHandle);
  if (!e->recorded) return cudaSuccess;
  if (sticky(e->s->device)) return record_error(sticky(e->s->device));
  if (e->s->done_seq < e->seq) return cudaErrorNotReady;
  join(g_host_vc, e->vc);
  pinned_host_saw(g_host_vc);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  std::lock_guard<std::mutex> g(g_mu);
  event_obj *x = event_of(a), *y = event_of(b);
  if (!ms || !x || !y) return record_error(cudaErrorInvalidResourceHandle);
  if ((x->flags | y->flags) & cudaEventDisableTiming) return record_error(cudaErrorInvalidResourceHandle);
  if (!x->recorded || !y->recorded || x->s->done_seq < x->seq || y->s->done_seq < y->seq)
    return cudaErrorNotReady;
  *ms = (float)((y->when - x->when) * 1e3);
  return cudaSuccess;
}

}  // extern "C"
