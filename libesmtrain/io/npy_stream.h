/* SPDX-License-Identifier: MIT */
/* What npy_safetensors.c reads of an esmt_npy_stream (infer.h). */
#ifndef ESMT_NPY_STREAM_H
#define ESMT_NPY_STREAM_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

ESMT_HIDDEN uint64_t esmt_npy_row_bytes(const esmt_npy_stream *f);
ESMT_HIDDEN int esmt_npy_fd(const esmt_npy_stream *f);
ESMT_HIDDEN esmt_npy_dtype esmt_npy_type(const esmt_npy_stream *f);
ESMT_HIDDEN int64_t esmt_npy_cols(const esmt_npy_stream *f);

#endif
