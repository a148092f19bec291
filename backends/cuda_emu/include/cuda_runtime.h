/* SPDX-License-Identifier: MIT */
/* Host emulation of the CUDA runtime API (ESMT_CUDA_EMULATE builds only):
 * exactly the types and calls the esmtrain GPU backends use, with the
 * values of the real toolkit's enums so that messages read the same.
 * Implemented by backends/cuda_emu/src (streams are real asynchronous
 * queues, device memory a reserved host arena). Valid C and C++; the
 * kernel-side builtins (threadIdx, __syncthreads, launches) come in
 * cuemu_kernel.h for C++ translation units. */
#ifndef CUEMU_CUDA_RUNTIME_H
#define CUEMU_CUDA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#define CUDART_VERSION 13000
#define CUDART_CB
#define CUEMU_HIDDEN __attribute__((visibility("hidden")))

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidPitchValue = 12,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchTimeout = 702,
  cudaErrorAssert = 710,
  cudaErrorIllegalInstruction = 715,
  cudaErrorMisalignedAddress = 716,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorUnknown = 999
} cudaError_t;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUmemPoolHandle_st *cudaMemPool_t;
typedef void (*cudaHostFn_t)(void *userData);

typedef enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
} cudaDeviceAttr;

typedef enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8
} cudaFuncAttribute;

typedef enum cudaMemPoolAttr {
  cudaMemPoolReuseFollowEventDependencies = 1,
  cudaMemPoolReuseAllowOpportunistic = 2,
  cudaMemPoolReuseAllowInternalDependencies = 3,
  cudaMemPoolAttrReleaseThreshold = 4,
  cudaMemPoolAttrReservedMemCurrent = 5,
  cudaMemPoolAttrReservedMemHigh = 6,
  cudaMemPoolAttrUsedMemCurrent = 7,
  cudaMemPoolAttrUsedMemHigh = 8
} cudaMemPoolAttr;

#define cudaStreamDefault 0x0
#define cudaStreamNonBlocking 0x1
#define cudaEventDefault 0x0
#define cudaEventDisableTiming 0x2
#define cudaHostAllocDefault 0x0

/* The fields of cudaDeviceProp the backends and tests read (the real
 * struct has many more; code compiled against this header sees these). */
typedef struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  int warpSize;
  int maxThreadsPerBlock;
  int major;
  int minor;
  int multiProcessorCount;
  int l2CacheSize;
  int pciBusID;
} cudaDeviceProp;

cudaError_t cudaGetDeviceCount(int *count) CUEMU_HIDDEN;
cudaError_t cudaSetDevice(int device) CUEMU_HIDDEN;
cudaError_t cudaGetDevice(int *device) CUEMU_HIDDEN;
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) CUEMU_HIDDEN;
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) CUEMU_HIDDEN;
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) CUEMU_HIDDEN;
cudaError_t cudaDeviceSynchronize(void) CUEMU_HIDDEN;
cudaError_t cudaDriverGetVersion(int *version) CUEMU_HIDDEN;
cudaError_t cudaRuntimeGetVersion(int *version) CUEMU_HIDDEN;
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) CUEMU_HIDDEN;

cudaError_t cudaMalloc(void **ptr, size_t size) CUEMU_HIDDEN;
cudaError_t cudaFree(void *ptr) CUEMU_HIDDEN;
cudaError_t cudaMallocHost(void **ptr, size_t size) CUEMU_HIDDEN;
cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags) CUEMU_HIDDEN;
cudaError_t cudaFreeHost(void *ptr) CUEMU_HIDDEN;
cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) CUEMU_HIDDEN;
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) CUEMU_HIDDEN;
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device) CUEMU_HIDDEN;
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr,
                                    void *value) CUEMU_HIDDEN;
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr,
                                    void *value) CUEMU_HIDDEN;
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t min_bytes_to_keep) CUEMU_HIDDEN;

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind) CUEMU_HIDDEN;
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) CUEMU_HIDDEN;
cudaError_t cudaMemset(void *dst, int value, size_t count) CUEMU_HIDDEN;
cudaError_t cudaMemsetAsync(void *dst, int value, size_t count, cudaStream_t stream) CUEMU_HIDDEN;

cudaError_t cudaStreamCreate(cudaStream_t *stream) CUEMU_HIDDEN;
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) CUEMU_HIDDEN;
cudaError_t cudaStreamDestroy(cudaStream_t stream) CUEMU_HIDDEN;
cudaError_t cudaStreamSynchronize(cudaStream_t stream) CUEMU_HIDDEN;
cudaError_t cudaStreamQuery(cudaStream_t stream) CUEMU_HIDDEN;
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int flags) CUEMU_HIDDEN;
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData) CUEMU_HIDDEN;

cudaError_t cudaEventCreate(cudaEvent_t *event) CUEMU_HIDDEN;
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) CUEMU_HIDDEN;
cudaError_t cudaEventDestroy(cudaEvent_t event) CUEMU_HIDDEN;
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) CUEMU_HIDDEN;
cudaError_t cudaEventSynchronize(cudaEvent_t event) CUEMU_HIDDEN;
cudaError_t cudaEventQuery(cudaEvent_t event) CUEMU_HIDDEN;
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) CUEMU_HIDDEN;

cudaError_t cudaGetLastError(void) CUEMU_HIDDEN;
cudaError_t cudaPeekAtLastError(void) CUEMU_HIDDEN;
const char *cudaGetErrorString(cudaError_t error) CUEMU_HIDDEN;
const char *cudaGetErrorName(cudaError_t error) CUEMU_HIDDEN;
cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) CUEMU_HIDDEN;

#ifdef __cplusplus
}  /* extern "C" */
/* The runtime's C++ overload, as in the real header. */
template <class T>
static inline cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute((const void *)entry, attr, value);
}
#include "cuemu_kernel.h"
#endif

#endif
