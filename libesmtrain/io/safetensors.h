/* SPDX-License-Identifier: MIT */
/* safetensors files: an 8-byte little-endian header length, a JSON header
 * {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then
 * the raw little-endian tensor bytes. Used for checkpoints, HF import and
 * the reference fixtures. */
#ifndef ESMTRAIN_SAFETENSORS_H
#define ESMTRAIN_SAFETENSORS_H

#include "internal.h"

typedef enum esmt_st_dtype {
  ESMT_ST_F64, ESMT_ST_F32, ESMT_ST_F16, ESMT_ST_BF16, ESMT_ST_I64, ESMT_ST_I32,
  ESMT_ST_I16, ESMT_ST_I8, ESMT_ST_U8, ESMT_ST_BOOL
} esmt_st_dtype;

typedef struct esmt_st_tensor {
  char *name;
  esmt_st_dtype dtype;
  int ndim;
  int64_t shape[8];
  uint64_t numel;
  const uint8_t *data;       /* inside the mapping */
  uint64_t nbytes;
} esmt_st_tensor;

typedef struct esmt_st_meta {
  char *key, *value;
} esmt_st_meta;

typedef struct esmt_st_file {
  void *map;
  uint64_t size;
  esmt_st_tensor *tensors;
  int count;
  esmt_st_meta *meta;
  int meta_count;
} esmt_st_file;

/* Map and validate a file: header length within the file, JSON well
 * formed, known dtypes, shapes that match the byte ranges, ranges inside
 * the data area. Errors name the file and what is wrong. */
ESMT_HIDDEN esmt_status esmt_st_open(const char *path, esmt_st_file *f);
ESMT_HIDDEN void esmt_st_close(esmt_st_file *f);

ESMT_HIDDEN const esmt_st_tensor *esmt_st_find(const esmt_st_file *f, const char *name);
/* Metadata value for `key`, or NULL. */
ESMT_HIDDEN const char *esmt_st_meta_get(const esmt_st_file *f, const char *key);

/* Convert a floating tensor (F64/F32/F16/BF16) to float / double. */
ESMT_HIDDEN void esmt_st_to_f32(const esmt_st_tensor *t, float *out);
ESMT_HIDDEN void esmt_st_to_f64(const esmt_st_tensor *t, double *out);

/* Streaming writer: the header (names, dtypes, shapes, sizes) first, then
 * the tensors' bytes appended in the same order; finish() checks the byte
 * count and fsyncs. Writes `path` directly: callers make it atomic by
 * writing into a temporary directory or name and renaming. */
typedef struct esmt_st_entry {
  const char *name;
  esmt_st_dtype dtype;
  int ndim;
  int64_t shape[8];
} esmt_st_entry;

typedef struct esmt_st_writer esmt_st_writer;

ESMT_HIDDEN esmt_status esmt_st_writer_begin(const char *path, const esmt_st_entry *entries,
                                             int count, const esmt_st_meta *meta, int meta_count,
                                             esmt_st_writer **out);
/* The same for a file that must not exist (O_EXCL; a symbolic link there is
 * not followed): nothing of another is ever truncated. */
ESMT_HIDDEN esmt_status esmt_st_writer_begin_new(const char *path, const esmt_st_entry *entries,
                                                 int count, const esmt_st_meta *meta,
                                                 int meta_count, esmt_st_writer **out);
ESMT_HIDDEN esmt_status esmt_st_writer_append(esmt_st_writer *w, const void *data, uint64_t bytes);
/* Completes the file (error if fewer bytes were appended than declared);
 * *crc (may be NULL) receives the zlib crc32 of the whole file. */
ESMT_HIDDEN esmt_status esmt_st_writer_finish(esmt_st_writer *w, uint32_t *crc);

/* zlib crc32 of a whole file (to verify what finish() reported). */
ESMT_HIDDEN esmt_status esmt_file_crc32(const char *path, uint32_t *crc);
/* Abandon and delete a partly written file (NULL accepted). */
ESMT_HIDDEN void esmt_st_writer_abort(esmt_st_writer *w);

/* Bytes per element of a dtype. */
ESMT_HIDDEN int esmt_st_dtype_size(esmt_st_dtype dt);

#endif
