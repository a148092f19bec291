/* SPDX-License-Identifier: MIT */
/* Host emulation: __nv_bfloat16 and its conversions (see cuemu_half.h). */
#ifndef CUEMU_CUDA_BF16_H
#define CUEMU_CUDA_BF16_H
#include "cuemu_half.h"
#endif
