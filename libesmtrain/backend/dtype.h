/* SPDX-License-Identifier: MIT */
/* The backend ABI's element types on the host: their sizes and names, and
 * fp16/bf16 <-> fp32 conversions that round as the kernels do. */
#ifndef ESMTRAIN_DTYPE_H
#define ESMTRAIN_DTYPE_H

#include "esmtrain/backend.h"
#include "internal.h"

ESMT_HIDDEN size_t esmt_dtype_size(esmtb_dtype t);
ESMT_HIDDEN const char *esmt_dtype_name(esmtb_dtype t);

/* Host conversions (round to nearest even; NaN stays NaN). */
ESMT_HIDDEN float esmt_bf16_to_f32(uint16_t h);
ESMT_HIDDEN uint16_t esmt_f32_to_bf16(float f);
ESMT_HIDDEN float esmt_f16_to_f32(uint16_t h);
ESMT_HIDDEN uint16_t esmt_f32_to_f16(float f);
/* dst[i] = float(src[i]) for n values of dtype (F32, F16 or BF16); dst may
 * not overlap src unless dtype is F32. */
ESMT_HIDDEN void esmt_to_f32(esmtb_dtype dtype, const void *src, float *dst, uint64_t n);

#endif
