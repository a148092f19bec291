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

#endif
