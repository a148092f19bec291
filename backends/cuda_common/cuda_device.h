/* The device object of the CUDA backends (private to cuda_common). */
#ifndef ESMTRAIN_CUDA_DEVICE_H
#define ESMTRAIN_CUDA_DEVICE_H

#include <cuda_runtime.h>

#include "cuda_common.h"

struct esmtb_device {
  int ordinal;
  int num_threads;
  unsigned long long memory_limit;  /* bytes, 0 = none */
  unsigned long long allocated;     /* live device bytes from alloc() */
};

/* esmtb_stream* and esmtb_event* are cudaStream_t / cudaEvent_t. */
static inline cudaStream_t cuda_stream_of(esmtb_stream *s) { return (cudaStream_t)s; }

/* Map a CUDA error to a status and message naming the call. */
CUDA_HIDDEN esmtb_status cuda_check(cudaError_t err, const char *what);

#endif
