/* SPDX-License-Identifier: MIT */
// NCCL across processes on one machine: the ranks of a communicator meet in
// a POSIX shared-memory segment named by the unique id (unlinked as soon as
// every rank has joined, so a crash leaves nothing in /dev/shm). Each rank
// has a 1 MiB slot; a collective moves its buffers through the slots chunk
// by chunk, with a barrier after the slots are filled and after they are
// read. Reductions add the ranks in rank order 0..n-1 in fp32 (fp64 for
// f64) and round once, so every rank gets the same bits every time; real
// NCCL sums in ring order, chunk by chunk, and rounds 16-bit types at each
// hop. A collective is a stream operation (ordered with the kernels and
// copies of its stream; its buffers declared to the stream-order checker).
// A rank that exited, or aborted its communicator, is treated as NCCL's
// shared-memory and P2P transports on one node treat it: the survivors'
// collectives never complete (their stream stays busy, no async error)
// until each survivor calls ncclCommAbort, which ends them with
// ncclRemoteError. A collective still waiting 2 x ESMTRAIN_COMM_TIMEOUT
// (seconds, default 300) + 2 s after a peer died is a finding: on a GPU
// it would hang for ever. Joining (ncclCommInitRank) fails at once when a
// peer is gone, and after ESMTRAIN_COMM_TIMEOUT when one never comes.
// Test only: ESMT_EMU_NCCL_KILL=RANK:KIND:N raises SIGKILL in rank RANK's
// N-th collective of KIND (allreduce, reduce, broadcast, allgather,
// reducescatter; counted per communicator from 1) after half of its first
// chunk is in its slot, so the others are left mid-transfer.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "cuemu_half.h"
#include "emu_internal.h"
#include "nccl.h"

namespace {
constexpr int kMaxRanks = 8;
constexpr size_t kSlot = 1 << 20;
constexpr uint32_t kMagic = 0x4e43434c;  // "NCCL"

struct shm_seg {
  std::atomic<uint32_t> magic;
  int world;
  pthread_mutex_t mu;  // robust: a rank that dies holding it does not wedge the rest
  pthread_cond_t cv;
  int joined;
  pid_t pid[kMaxRanks];
  int aborted_by;     // rank + 1 of a rank that aborted, else 0
  uint64_t arrived;   // barrier arrivals, all ranks
  unsigned char slot[kMaxRanks][kSlot];
};

enum kind { ALLREDUCE, REDUCE, BROADCAST, ALLGATHER, REDUCESCATTER };
constexpr int kKinds = REDUCESCATTER + 1;
const char *kind_name(kind k) {
  static const char *n[] = {"ncclAllReduce", "ncclReduce", "ncclBroadcast", "ncclAllGather",
                            "ncclReduceScatter"};
  return n[k];
}

// The kinds ESMT_EMU_NCCL_KILL names.
const char *kill_kind_name(int k) {
  static const char *n[] = {"allreduce", "reduce", "broadcast", "allgather", "reducescatter"};
  return n[k];
}

// ESMT_EMU_NCCL_KILL, parsed once: rank, kind and count, or rank -1.
struct kill_point {
  int rank = -1;
  int kind = -1;
  unsigned long long nth = 0;
};
const kill_point &kill_at() {
  static const kill_point k = [] {
    kill_point p;
    const char *v = getenv("ESMT_EMU_NCCL_KILL");
    if (!v || !*v) return p;
    char name[32];
    int rank;
    unsigned long long nth;
    if (sscanf(v, "%d:%31[a-z]:%llu", &rank, name, &nth) == 3 && nth > 0)
      for (int i = 0; i < kKinds; i++)
        if (!strcmp(name, kill_kind_name(i))) p = {rank, i, nth};
    if (p.rank < 0) {
      fprintf(stderr, "cuda-emu: nccl: ESMT_EMU_NCCL_KILL=%s is not RANK:KIND:N (KIND one of "
              "allreduce, reduce, broadcast, allgather, reducescatter)\n", v);
      abort();  // a test that meant to kill a rank must not pass without it
    }
    return p;
  }();
  return k;
}
}  // namespace

struct cuemu_nccl_comm {
  shm_seg *seg = nullptr;
  int rank = 0, world = 0;
  uint64_t barriers = 0;  // barriers this rank has passed (its worker only)
  unsigned long long calls[kKinds] = {};  // collectives enqueued, per kind
  unsigned long long group = 0;           // the last group counted (g_group_serial)
  std::atomic<int> async{ncclSuccess};
  std::atomic<bool> local_abort{false};
  std::mutex err_mu;
  std::string last_error;
};

namespace {
using namespace cuemu;

int g_group_depth;
unsigned long long g_group_serial;  // outermost groups begun

// Counts the collective for ESMT_EMU_NCCL_KILL; true when this rank dies in
// it. A group of ncclReduce (ncclBroadcast) calls, one per root, is how
// nccl_dp reduce-scatters (all-gathers) uneven parts: it counts once, as a
// reducescatter (allgather), and its first call is where the rank dies.
bool count_for_kill(cuemu_nccl_comm *c, kind k) {
  int counted = k;
  if (g_group_depth > 0) {
    if (c->group == g_group_serial) return false;
    c->group = g_group_serial;
    if (k == REDUCE) counted = REDUCESCATTER;
    if (k == BROADCAST) counted = ALLGATHER;
  }
  const kill_point &kp = kill_at();
  return ++c->calls[counted] == kp.nth && kp.rank == c->rank && kp.kind == counted;
}

double timeout_s() {
  const char *t = getenv("ESMTRAIN_COMM_TIMEOUT");
  return t && *t && atof(t) > 0 ? atof(t) : 300.0;
}
double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void fail(cuemu_nccl_comm *c, ncclResult_t r, const std::string &why) {
  std::lock_guard<std::mutex> g(c->err_mu);
  if (c->async.load() == ncclSuccess) {
    c->last_error = why;
    c->async = r;
  }
}

void lock(shm_seg *s) {
  if (pthread_mutex_lock(&s->mu) == EOWNERDEAD) pthread_mutex_consistent(&s->mu);
}

// Why the ranks cannot go on, or "" while they can. Called with the lock.
std::string trouble(cuemu_nccl_comm *c) {
  shm_seg *s = c->seg;
  if (c->local_abort) return "the communicator was aborted";
  if (s->aborted_by)
    return "rank " + std::to_string(s->aborted_by - 1) + " aborted the communicator";
  for (int r = 0; r < c->world; r++)
    if (r != c->rank && s->pid[r] && kill(s->pid[r], 0) != 0 && errno == ESRCH)
      return "rank " + std::to_string(r) + " (pid " + std::to_string(s->pid[r]) + ") exited";
  return "";
}

// Wait with the lock held until done() or trouble; false with the reason.
// In a collective (`hang`) only the local abort ends the wait early; a lost
// or absent peer leaves it waiting, and past the finding's limit it is
// reported on `dev`.
template <typename F>
bool wait_until(cuemu_nccl_comm *c, F done, std::string *why, int dev = -1, bool hang = false) {
  shm_seg *s = c->seg;
  const double t0 = now_s();
  const double deadline = t0 + (hang ? 2 * timeout_s() + 2 : timeout_s());
  while (!done()) {
    *why = trouble(c);
    if (!why->empty() && (!hang || c->local_abort)) return false;
    if (now_s() > deadline) {
      if (!hang) {
        *why = "timed out after " + std::to_string((int)timeout_s()) +
               " s waiting for the other ranks";
        return false;
      }
      const std::string cause = why->empty() ? "the other ranks never came" : *why;
      report(dev, "nccl", "rank %d of %d waited %.0f s in a collective and its communicator was "
             "never aborted (%s): on a GPU this hangs for ever", c->rank, c->world,
             now_s() - t0, cause.c_str());
      *why = "never aborted after " + cause;
      return false;
    }
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == EOWNERDEAD) pthread_mutex_consistent(&s->mu);
  }
  return true;
}

bool barrier(cuemu_nccl_comm *c, int dev, std::string *why) {
  shm_seg *s = c->seg;
  lock(s);
  s->arrived++;
  const uint64_t target = (++c->barriers) * (uint64_t)c->world;
  pthread_cond_broadcast(&s->cv);
  const bool ok = wait_until(c, [&] { return s->arrived >= target; }, why, dev, true);
  pthread_mutex_unlock(&s->mu);
  return ok;
}

size_t dsize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// out[i] = sum over ranks of slot[r][i], in rank order.
void reduce_into(cuemu_nccl_comm *c, ncclDataType_t t, void *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    switch (t) {
      case ncclFloat32: {
        float a = 0;
        for (int r = 0; r < c->world; r++) a += ((const float *)c->seg->slot[r])[i];
        ((float *)out)[i] = a;
        break;
      }
      case ncclFloat64: {
        double a = 0;
        for (int r = 0; r < c->world; r++) a += ((const double *)c->seg->slot[r])[i];
        ((double *)out)[i] = a;
        break;
      }
      case ncclFloat16:
      case ncclBfloat16: {
        const bool h = t == ncclFloat16;
        float a = 0;
        for (int r = 0; r < c->world; r++) {
          const uint16_t v = ((const uint16_t *)c->seg->slot[r])[i];
          a += h ? cuemu_h2f(v) : cuemu_bf2f(v);
        }
        ((uint16_t *)out)[i] = h ? cuemu_f2h(a) : cuemu_f2bf(a);
        break;
      }
      default: {  // integers: two's complement sums of their width
        const size_t es = dsize(t);
        uint64_t a = 0;
        for (int r = 0; r < c->world; r++) {
          uint64_t v = 0;
          memcpy(&v, c->seg->slot[r] + i * es, es);
          a += v;
        }
        memcpy((char *)out + i * es, &a, es);
      }
    }
  }
}

// One collective, run by the stream's worker.
ncclResult_t run(cuemu_nccl_comm *c, kind k, const char *send, char *recv, size_t count,
                 ncclDataType_t t, int root, bool die, op_ctx &ctx) {
  const size_t es = dsize(t), per = kSlot / es, W = (size_t)c->world;
  const bool data = data_moves(count * es);
  const size_t in_elems = k == REDUCESCATTER ? count * W : count;
  const size_t out_elems = k == ALLGATHER ? count * W : count;
  const bool writes = k != REDUCE || c->rank == root;
  if ((send && !access(ctx, send, in_elems * es, false)) ||
      (writes && !access(ctx, recv, out_elems * es, true)))
    return ncclInvalidArgument;
  std::string why;
  const size_t rounds = k == REDUCESCATTER ? W : 1;
  for (size_t t_seg = 0; t_seg < rounds; t_seg++)
    for (size_t off = 0; off < count || (count == 0 && off == 0); off += per) {
      const size_t n = count - off < per ? count - off : per;
      unsigned char *mine = c->seg->slot[c->rank];
      if (data && n) {
        if (k == BROADCAST) {
          if (c->rank == root) memcpy(mine, send + off * es, n * es);
        } else if (k == REDUCESCATTER) {
          memcpy(mine, send + (t_seg * count + off) * es, n * es);
        } else {
          memcpy(mine, send + off * es, n * es);
        }
      }
      if (die) {  // ESMT_EMU_NCCL_KILL: the chunk's second half never arrives
        memset(mine + n * es / 2, 0xff, n * es - n * es / 2);
        timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        fprintf(stderr, "cuda-emu: nccl: ESMT_EMU_NCCL_KILL: rank %d killed in its %s #%llu (%s) "
                "at %.3f\n", c->rank, kill_kind_name(kill_at().kind), kill_at().nth, kind_name(k),
                wall.tv_sec + wall.tv_nsec * 1e-9);
        raise(SIGKILL);
      }
      if (!barrier(c, ctx.device, &why)) return fail(c, ncclRemoteError, why), ncclRemoteError;
      if (data && n) switch (k) {
          case ALLREDUCE: reduce_into(c, t, recv + off * es, n); break;
          case REDUCE: if (c->rank == root) reduce_into(c, t, recv + off * es, n); break;
          case BROADCAST: memcpy(recv + off * es, c->seg->slot[root], n * es); break;
          case ALLGATHER:
            for (size_t r = 0; r < W; r++)
              memcpy(recv + (r * count + off) * es, c->seg->slot[r], n * es);
            break;
          case REDUCESCATTER:
            if (t_seg == (size_t)c->rank) reduce_into(c, t, recv + off * es, n);
            break;
        }
      if (!barrier(c, ctx.device, &why)) return fail(c, ncclRemoteError, why), ncclRemoteError;
      if (count == 0) break;
    }
  return ncclSuccess;
}

ncclResult_t enqueue_coll(ncclComm_t c, kind k, const void *send, void *recv, size_t count,
                          ncclDataType_t t, ncclRedOp_t op, int root, cudaStream_t stream) {
  if (!c || !c->seg) return ncclInvalidArgument;
  if (c->async.load() != ncclSuccess) return (ncclResult_t)c->async.load();
  if (op != ncclSum && k != BROADCAST && k != ALLGATHER) {
    fail(c, ncclInvalidArgument, "only ncclSum is emulated");
    return ncclInvalidArgument;
  }
  if (root < 0 || root >= c->world) return ncclInvalidArgument;
  if ((count && (!recv || !send)) || (unsigned)t > ncclBfloat16) return ncclInvalidArgument;
  const char *sp = (const char *)send;
  char *rp = (char *)recv;
  const bool die = count_for_kill(c, k);
  cudaError_t e = enqueue(stream, kind_name(k), [=](op_ctx &ctx) -> cudaError_t {
    if (c->async.load() == ncclSuccess) run(c, k, sp, rp, count, t, root, die, ctx);
    return cudaSuccess;  // an NCCL failure is the communicator's, not the stream's
  });
  return e == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *v) {
  if (!v) return ncclInvalidArgument;
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id) return ncclInvalidArgument;
  memset(id, 0, sizeof *id);
  unsigned char rnd[16];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd) {
    if (fd >= 0) close(fd);
    return ncclSystemError;
  }
  close(fd);
  int n = snprintf(id->internal, sizeof id->internal, "/esmt-nccl-");
  for (int i = 0; i < 16; i++) n += snprintf(id->internal + n, sizeof id->internal - n, "%02x", rnd[i]);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  (void)config;  // blocking or not, the emulation joins before it returns
  if (!out || nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks ||
      strncmp(id.internal, "/esmt-nccl-", 11))
    return ncclInvalidArgument;
  *out = nullptr;
  int fd = shm_open(id.internal, O_RDWR | O_CREAT | O_EXCL, 0600);
  const bool creator = fd >= 0;
  const double deadline = now_s() + timeout_s();
  if (!creator) {
    while ((fd = shm_open(id.internal, O_RDWR, 0600)) < 0 && now_s() < deadline) usleep(10000);
    if (fd < 0) return ncclSystemError;
    struct stat st;
    while (fstat(fd, &st) == 0 && (size_t)st.st_size < sizeof(shm_seg) && now_s() < deadline)
      usleep(10000);
  } else if (ftruncate(fd, sizeof(shm_seg)) != 0) {
    close(fd);
    shm_unlink(id.internal);
    return ncclSystemError;
  }
  void *p = mmap(nullptr, sizeof(shm_seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return ncclSystemError;
  shm_seg *s = (shm_seg *)p;
  if (creator) {
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->mu, &ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    s->world = nranks;
    s->magic.store(kMagic, std::memory_order_release);
  }
  while (s->magic.load(std::memory_order_acquire) != kMagic && now_s() < deadline) usleep(10000);
  cuemu_nccl_comm *c = new cuemu_nccl_comm;
  c->seg = s;
  c->rank = rank;
  c->world = nranks;
  std::string why;
  bool ok = s->magic.load() == kMagic && s->world == nranks;
  if (ok) {
    lock(s);
    ok = s->pid[rank] == 0;  // a rank joins once
    if (ok) {
      s->pid[rank] = getpid();
      s->joined++;
      pthread_cond_broadcast(&s->cv);
      ok = wait_until(c, [&] { return s->joined == nranks; }, &why);
    }
    pthread_mutex_unlock(&s->mu);
  }
  shm_unlink(id.internal);  // everyone is in (or it failed): the name goes
  if (!ok) {
    fprintf(stderr, "cuda-emu: nccl: rank %d of %d could not join: %s\n", rank, nranks,
            why.empty() ? "bad segment or duplicate rank" : why.c_str());
    delete c;
    return ncclRemoteError;
  }
  *out = c;
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

// The segment stays mapped (a few MiB): a queued collective may still touch it.
ncclResult_t ncclCommFinalize(ncclComm_t c) { return c ? ncclSuccess : ncclInvalidArgument; }
ncclResult_t ncclCommDestroy(ncclComm_t c) { return c ? ncclSuccess : ncclInvalidArgument; }

ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (!c) return ncclSuccess;
  c->local_abort = true;
  if (c->seg) {
    lock(c->seg);
    if (!c->seg->aborted_by) c->seg->aborted_by = c->rank + 1;
    pthread_cond_broadcast(&c->seg->cv);
    pthread_mutex_unlock(&c->seg->mu);
  }
  fail(c, ncclRemoteError, "the communicator was aborted");
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) {
  if (!c || !e) return ncclInvalidArgument;
  *e = (ncclResult_t)c->async.load();
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t c) {
  static thread_local std::string copy;
  if (!c) return "";
  std::lock_guard<std::mutex> g(c->err_mu);
  copy = c->last_error;
  return copy.c_str();
}

ncclResult_t ncclGroupStart(void) {
  if (g_group_depth++ == 0) g_group_serial++;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
  if (g_group_depth <= 0) return ncclInvalidUsage;
  g_group_depth--;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t st) {
  return enqueue_coll(c, ALLREDUCE, s, r, n, t, op, 0, st);
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t c, cudaStream_t st) {
  return enqueue_coll(c, REDUCE, s, r, n, t, op, root, st);
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t st) {
  return enqueue_coll(c, BROADCAST, s, r, n, t, ncclSum, root, st);
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t st) {
  return enqueue_coll(c, REDUCESCATTER, s, r, n, t, op, 0, st);
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t st) {
  return enqueue_coll(c, ALLGATHER, s, r, n, t, ncclSum, 0, st);
}

}  // extern "C"
