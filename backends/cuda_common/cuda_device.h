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
static inline void cuda_use_device(const esmtb_device *dev) {
  if (dev) cudaSetDevice(dev->ordinal);
}

/* Map a CUDA error to a status and message naming the call. */
CUDA_HIDDEN esmtb_status cuda_check(cudaError_t err, const char *what);

#endif
