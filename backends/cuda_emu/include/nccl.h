/* SPDX-License-Identifier: MIT */
/* Host emulation of the NCCL calls the nccl_dp backend makes, with the real
 * library's enum values (NCCL 2.x); ranks are processes on one machine
 * meeting in POSIX shared memory. Implemented in src/emu_nccl.cpp. */
#ifndef CUEMU_NCCL_H
#define CUEMU_NCCL_H

#include <stddef.h>

#include "cuda_runtime.h"

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#define NCCL_VERSION_CODE 22800
#define NCCL_UNIQUE_ID_BYTES 128

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuemu_nccl_comm *ncclComm_t;
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7
} ncclResult_t;

typedef enum {
  ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
  ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9
} ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;
  int splitShare;
} ncclConfig_t;
#define NCCL_CONFIG_UNDEF_INT (-2147483647 - 1)
#define NCCL_CONFIG_INITIALIZER                                                         \
  {sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT,          \
   NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NULL,            \
   NCCL_CONFIG_UNDEF_INT}

ncclResult_t ncclGetVersion(int *version) CUEMU_HIDDEN;
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) CUEMU_HIDDEN;
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) CUEMU_HIDDEN;
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) CUEMU_HIDDEN;
ncclResult_t ncclCommFinalize(ncclComm_t comm) CUEMU_HIDDEN;
ncclResult_t ncclCommDestroy(ncclComm_t comm) CUEMU_HIDDEN;
ncclResult_t ncclCommAbort(ncclComm_t comm) CUEMU_HIDDEN;
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error) CUEMU_HIDDEN;
const char *ncclGetErrorString(ncclResult_t result) CUEMU_HIDDEN;
const char *ncclGetLastError(ncclComm_t comm) CUEMU_HIDDEN;
ncclResult_t ncclGroupStart(void) CUEMU_HIDDEN;
ncclResult_t ncclGroupEnd(void) CUEMU_HIDDEN;
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) CUEMU_HIDDEN;
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) CUEMU_HIDDEN;
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) CUEMU_HIDDEN;
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) CUEMU_HIDDEN;
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream) CUEMU_HIDDEN;

#ifdef __cplusplus
}
#endif

#endif
