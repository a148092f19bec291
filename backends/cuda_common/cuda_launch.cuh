/* SPDX-License-Identifier: MIT */
// Kernel launch and dynamic shared memory, written as macros so that the
// same kernel sources also compile as host code for the emulated build
// (ESMT_CUDA_EMULATE, backends/cuda_emu), where <<<>>> does not exist and
// the emulated cuda_runtime.h defines both macros.
#ifndef ESMTRAIN_CUDA_LAUNCH_CUH
#define ESMTRAIN_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>

#ifndef ESMT_CUDA_EMULATE
// ESMT_LAUNCH(grid, block, smem, stream, kernel)(args) is
// kernel<<<grid, block, smem, stream>>>(args).
#define ESMT_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define ESMT_DYNAMIC_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

#endif
