/* SPDX-License-Identifier: MIT */
/* The device object of the CUDA backends (private to cuda_common). */
#ifndef ESMTRAIN_CUDA_DEVICE_H
#define ESMTRAIN_CUDA_DEVICE_H

#include <cuda_runtime.h>
#include <pthread.h>

#include "cuda_common.h"

struct esmtb_device {
  int ordinal;
  int num_threads;
  unsigned long long memory_limit;  /* bytes, 0 = none */
  unsigned long long allocated;     /* live device bytes from alloc() */
  /* cuBLASLt handle, workspace and matmul-plan cache, made by the first
   * gemm (cuda_gemm.cu) and released by close(); `lock` guards them. */
  struct cuda_gemm_state *gemm;
  pthread_mutex_t lock;
  /* The wrapping backend's own per-device state (nccl_dp: its NCCL
   * communicator); that backend's close() releases it first. */
  void *ext;
};

/* Release dev->gemm (cuda_gemm.cu); called by close(). */
CUDA_HIDDEN void cuda_gemm_release(esmtb_device *dev);

/* esmtb_stream* and esmtb_event* are cudaStream_t / cudaEvent_t. */
static inline cudaStream_t cuda_stream_of(esmtb_stream *s) { return (cudaStream_t)s; }

/* Make dev the calling thread's current device: every entry point that
 * touches CUDA calls it first, since the core may drive a device from any
 * thread (cheap when it is current already). */
CUDA_HIDDEN extern __thread const esmtb_device *cuda_current_dev;
static inline void cuda_use_device(const esmtb_device *dev) {
  if (dev) {
    cudaSetDevice(dev->ordinal);
    cuda_current_dev = dev;  /* whose budget stream-ordered scratch counts against */
  }
}

/* Bytes the device's async pool holds (used + cached); 0 if unknown. */
CUDA_HIDDEN uint64_t cuda_pool_reserved(int ordinal);
/* Fail (status 2, advice in the message) when `bytes` more on top of
 * dev's allocations and its pool's reservation would exceed
 * device_memory_limit; first gives the pool's cached memory back. */
CUDA_HIDDEN esmtb_status cuda_budget_check(const esmtb_device *dev, size_t bytes, const char *what);

/* Map a CUDA error to a status and message naming the call. */
CUDA_HIDDEN esmtb_status cuda_check(cudaError_t err, const char *what);

/* Stream-ordered scratch (freed with cudaFreeAsync on the same stream),
 * counted against the calling device's device_memory_limit. */
static inline esmtb_status cuda_scratch(void **p, size_t bytes, cudaStream_t st, const char *op) {
  *p = NULL;
  esmtb_status bs = cuda_budget_check(cuda_current_dev, bytes, op);
  if (bs) return bs;
  cudaError_t e = cudaMallocAsync(p, bytes ? bytes : 1, st);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cuda_fail(e == cudaErrorMemoryAllocation ? 2 : 6, "%s: scratch of %zu bytes: %s", op,
                     bytes, cudaGetErrorString(e));
  }
  return 0;
}


#endif
