// The emulated CUDA runtime on its own: kernels compute, and each checker
// reports what it is for (a missing __syncthreads, shared and global
// bounds, host memory in a kernel, stream order without an event, blocks
// racing) and stays silent on correct code. Each case runs in a child
// process (a finding poisons the emulated device, as on a GPU) and the
// parent checks its exit status and the report it printed.
#include <cuda_runtime.h>
#include <semaphore.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

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
