/* SPDX-License-Identifier: MIT */
// Pinned host memory and the host's accesses to it while an asynchronous
// copy is pending. Each cudaHostAlloc block is a shared memory object
// mapped twice: the user's mapping, and an alias through which the stream
// workers perform the copies. While a cudaMemcpyAsync into pinned memory is
// pending (until the host synchronises with the stream, or with an event or
// query that covers the copy), the user's pages are PROT_NONE; while one
// reads from pinned memory, they are read-only. A host access that faults
// there is reported with the host code's location when it touches the
// copy's bytes ("host-sync"); an access to other bytes of the same page, or
// one by a stream worker (kernels, host callbacks), is let through one
// instruction at a time (the page opened, the trap flag set, closed again
// at the SIGTRAP), so that buffers sharing a page stay usable.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "emu_private.h"

namespace cuemu {

namespace {
constexpr size_t kPage = 4096;
struct guard {
  char *lo, *hi;      // the copy's bytes in the user's mapping
  bool host_may_read; // a copy from pinned memory: the host may read, not write
  int slot, device;
  uint32_t clock;
  const char *api;
  bool reported;
};
struct block {
  char *alias;
  size_t span;
};
// Never destroyed: workers and signal handlers may use them at exit.
std::mutex &g_mu = *new std::mutex;
std::map<char *, block> &g_blocks = *new std::map<char *, block>;
std::vector<guard> &g_guards = *new std::vector<guard>;
// Threads that run stream work (their accesses are the device's) and the
// page each thread is stepping through (opened for one instruction).
constexpr int kMaxTids = 256;
pid_t g_workers[kMaxTids];
struct step {
  pid_t tid;
  char *page;
};
step g_steps[kMaxTids];
struct sigaction g_old_segv, g_old_trap;

pid_t my_tid() { return (pid_t)syscall(SYS_gettid); }
char *page_of(const void *p) { return (char *)((uintptr_t)p & ~(uintptr_t)(kPage - 1)); }

// The protection page `pg` needs now (g_mu held).
int protection_locked(const char *pg) {
  int prot = PROT_READ | PROT_WRITE;
  for (const guard &g : g_guards)
    if (g.lo < pg + kPage && g.hi > pg) prot &= g.host_may_read ? PROT_READ : PROT_NONE;
  return prot;
}
// Set the protection of the pages of [lo, hi) from the guards now.
void protect_pages_locked(char *lo, char *hi) {
  char *first = page_of(lo), *last = page_of(hi - 1);
  mprotect(first, kPage, protection_locked(first));
  if (last != first) mprotect(last, kPage, protection_locked(last));
  if (last > first + kPage) {
    // Interior pages in runs that no guard starts or ends inside.
    for (char *pg = first + kPage; pg < last;) {
      const int prot = protection_locked(pg);
      char *end = pg + kPage, *next = last;
      for (const guard &g : g_guards) {
        char *a = page_of(g.lo), *b = page_of(g.hi - 1) + kPage;
        if (a > pg && a < next) next = a;
        if (b > pg && b < next) next = b;
      }
      end = next > end ? next : end;
      mprotect(pg, (size_t)(end - pg), prot);
      pg = end;
    }
  }
}

bool is_worker(pid_t tid) {
  for (pid_t w : g_workers)
    if (w == tid) return true;
  return false;
}

void chain(const struct sigaction &old, int sig, siginfo_t *si, void *uc) {
  if (old.sa_flags & SA_SIGINFO && old.sa_sigaction) {
    old.sa_sigaction(sig, si, uc);
  } else if (old.sa_handler != SIG_IGN && old.sa_handler != SIG_DFL && old.sa_handler) {
    old.sa_handler(sig);
  } else {
    signal(sig, SIG_DFL);  // the access faults again and the process dies
  }
}

void where(void *ip, char *buf, size_t n) {
  Dl_info di;
  if (dladdr(ip, &di) && di.dli_sname)
    snprintf(buf, n, "%s+0x%zx in %s", di.dli_sname, (size_t)((char *)ip - (char *)di.dli_saddr),
             di.dli_fname ? di.dli_fname : "?");
  else if (dladdr(ip, &di) && di.dli_fname)
    snprintf(buf, n, "%p (%s+0x%zx)", ip, di.dli_fname,
             (size_t)((char *)ip - (char *)di.dli_fbase));
  else
    snprintf(buf, n, "%p", ip);
}

void on_segv(int sig, siginfo_t *si, void *ucv) {
  ucontext_t *uc = (ucontext_t *)ucv;
  char *addr = (char *)si->si_addr, *pg = page_of(addr);
  const pid_t tid = my_tid();
  std::unique_lock<std::mutex> lk(g_mu);
  const guard *hit = nullptr;
  bool guarded = false;
  for (guard &g : g_guards) {
    if (!(g.lo < pg + kPage && g.hi > pg)) continue;
    guarded = true;
    if (addr >= g.lo && addr < g.hi && !hit && !g.reported) {
      g.reported = true;
      hit = &g;
    }
  }
  if (!guarded) {
    lk.unlock();
    chain(g_old_segv, sig, si, ucv);
    return;
  }
  if (hit && !is_worker(tid)) {
    char at[256];
    where((void *)uc->uc_mcontext.gregs[REG_RIP], at, sizeof at);
    const bool write = uc->uc_mcontext.gregs[REG_ERR] & 2;
    report(hit->device, "host-sync",
           "host code at %s %s pinned memory at %p (byte %zu of %zu) that %s on stream #%d has "
           "not %s yet: no cudaStreamSynchronize, cudaEventSynchronize or successful query "
           "covering the copy before the access",
           at, write ? "writes" : "reads", (void *)addr, (size_t)(addr - hit->lo),
           (size_t)(hit->hi - hit->lo), hit->api, hit->slot,
           hit->host_may_read ? "read it" : "written it");
  }
  // Let this one instruction through, then close the page again (on_trap).
  for (step &s : g_steps)
    if (!s.tid || s.tid == tid) {
      s.tid = tid;
      s.page = pg;
      break;
    }
  mprotect(pg, kPage, PROT_READ | PROT_WRITE);
  uc->uc_mcontext.gregs[REG_EFL] |= 0x100;  // the trap flag
}

void on_trap(int sig, siginfo_t *si, void *ucv) {
  ucontext_t *uc = (ucontext_t *)ucv;
  const pid_t tid = my_tid();
  std::unique_lock<std::mutex> lk(g_mu);
  for (step &s : g_steps)
    if (s.tid == tid && s.page) {
      mprotect(s.page, kPage, protection_locked(s.page));
      s.page = nullptr;
      s.tid = 0;
      uc->uc_mcontext.gregs[REG_EFL] &= ~0x100;
      return;
    }
  lk.unlock();
  chain(g_old_trap, sig, si, ucv);
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sa.sa_sigaction = on_segv;
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sa.sa_sigaction = on_trap;
    sigaction(SIGTRAP, &sa, &g_old_trap);
  });
}
}  // namespace

// The file behind a pinned block: anonymous shared memory (memfd), or, with
// $ESMT_EMU_HOST_BACKING naming a directory, an unlinked sparse file there,
// whose pages the kernel can write back under memory pressure, so a
// memory-plan test can hold more host state than the machine has RAM
// (esm2_t36_3B's 48 GiB on a 24 GiB host).
static int pinned_fd() {
  const char *dir = getenv("ESMT_EMU_HOST_BACKING");
  if (!dir || !*dir) return (int)syscall(SYS_memfd_create, "cuemu-pinned", 1u /* MFD_CLOEXEC */);
  std::string path = std::string(dir) + "/esmt-emu-pinned-XXXXXX";
  std::vector<char> name(path.begin(), path.end());
  name.push_back('\0');
  const int fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) unlink(name.data());
  return fd;
}

void *pinned_map(size_t size) {
  const size_t span = (size + kPage - 1) / kPage * kPage;
  const int fd = pinned_fd();
  if (fd < 0) return nullptr;
  void *user = MAP_FAILED, *alias = MAP_FAILED;
  if (ftruncate(fd, (off_t)span) == 0) {
    user = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    alias = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (user == MAP_FAILED || alias == MAP_FAILED) {
    if (user != MAP_FAILED) munmap(user, span);
    if (alias != MAP_FAILED) munmap(alias, span);
    return nullptr;
  }
  install_handlers();
  std::lock_guard<std::mutex> g(g_mu);
  g_blocks[(char *)user] = block{(char *)alias, span};
  return user;
}

void pinned_unmap(void *p) {
  std::lock_guard<std::mutex> g(g_mu);
  auto it = g_blocks.find((char *)p);
  if (it == g_blocks.end()) return;
  char *lo = it->first, *hi = lo + it->second.span;
  size_t keep = 0;
  for (size_t i = 0; i < g_guards.size(); i++)
    if (!(g_guards[i].lo >= lo && g_guards[i].lo < hi)) g_guards[keep++] = g_guards[i];
  g_guards.resize(keep);
  munmap(it->second.alias, it->second.span);
  munmap(lo, it->second.span);
  g_blocks.erase(it);
}

void *pinned_alias(const void *p) {
  std::lock_guard<std::mutex> g(g_mu);
  auto it = g_blocks.upper_bound((char *)p);
  if (it == g_blocks.begin()) return (void *)p;
  --it;
  const size_t off = (size_t)((const char *)p - it->first);
  return off < it->second.span ? it->second.alias + off : (void *)p;
}

void pinned_guard(const void *p, size_t n, bool host_may_read, int device, int slot,
                  uint32_t clock, const char *api) {
  if (!n) return;
  std::lock_guard<std::mutex> g(g_mu);
  char *lo = (char *)p;
  g_guards.push_back(guard{lo, lo + n, host_may_read, slot, device, clock, api, false});
  protect_pages_locked(lo, lo + n);
}

void pinned_host_saw(const uint32_t *host_vc) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_guards.empty()) return;
  std::vector<guard> done;
  size_t keep = 0;
  for (size_t i = 0; i < g_guards.size(); i++) {
    if (host_vc[g_guards[i].slot] >= g_guards[i].clock)
      done.push_back(g_guards[i]);
    else
      g_guards[keep++] = g_guards[i];
  }
  g_guards.resize(keep);
  for (const guard &d : done) protect_pages_locked(d.lo, d.hi);
}

void pinned_worker_starts() {
  const pid_t tid = my_tid();
  std::lock_guard<std::mutex> g(g_mu);
  for (pid_t &w : g_workers)
    if (!w) {
      w = tid;
      return;
    }
}

}  // namespace cuemu
