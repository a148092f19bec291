/* SPDX-License-Identifier: MIT */
/* Host emulation: __half and its conversions (see cuemu_half.h). */
#ifndef CUEMU_CUDA_FP16_H
#define CUEMU_CUDA_FP16_H
#include "cuemu_half.h"
#endif
