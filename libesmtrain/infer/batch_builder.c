/* SPDX-License-Identifier: MIT */
/* esmt_batch_builder (infer.h): proteins into a padded or packed batch. */
#include <stdlib.h>
#include <string.h>

#include "infer_rows.h"

struct esmt_batch_builder {
  esmt_row_layout layout;
  int row_len;
  int n, cap;                  /* proteins added */
  int32_t **res;               /* copies of their residues */
  int *len;
  int32_t *tokens, *seg_start, *seg_len;
};

void esmt_row_write(int32_t *row, int T, const int32_t *residues, int n) {
  row[0] = ESMT_TOKEN_CLS;
  if (n) memcpy(row + 1, residues, (size_t)n * sizeof *row);
  row[n + 1] = ESMT_TOKEN_EOS;
  for (int t = n + 2; t < T; t++) row[t] = ESMT_TOKEN_PAD;
}

esmt_status esmt_batch_builder_create(esmt_row_layout layout, int row_len,
                                      esmt_batch_builder **out) {
  const char *fn = "esmt_batch_builder_create";
  ESMT_CHECK_ARG(out, fn, "out must not be NULL");
  *out = NULL;
  ESMT_CHECK_ARG(layout == ESMT_ROWS_PADDED || layout == ESMT_ROWS_PACKED, fn,
                 "layout must be ESMT_ROWS_PADDED or ESMT_ROWS_PACKED");
  if (row_len < 3)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: rows of %d positions (3 or more: <cls> a "
                     "residue <eos>)", fn, row_len);
  esmt_batch_builder *b = calloc(1, sizeof *b);
  if (!b) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  b->layout = layout;
  b->row_len = row_len;
  *out = b;
  return ESMT_OK;
}

static void free_layout(esmt_batch_builder *b) {
  free(b->tokens);
  free(b->seg_start);
  free(b->seg_len);
  b->tokens = b->seg_start = b->seg_len = NULL;
}

void esmt_batch_builder_reset(esmt_batch_builder *b) {
  if (!b) return;
  for (int i = 0; i < b->n; i++) free(b->res[i]);
  b->n = 0;
  free_layout(b);
}

void esmt_batch_builder_destroy(esmt_batch_builder *b) {
  if (!b) return;
  esmt_batch_builder_reset(b);
  free(b->res);
  free(b->len);
  free(b);
}

esmt_status esmt_batch_builder_add(esmt_batch_builder *b, const int32_t *residues, int n) {
  const char *fn = "esmt_batch_builder_add";
  ESMT_CHECK_ARG(b && (residues || n == 0) && n >= 0, fn, "builder and residues must not be NULL");
  if (n > b->row_len - 2)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: a protein of %d residues is longer than a "
                     "row holds (%d residues with <cls> and <eos>); esmt_embed truncates or "
                     "windows long proteins", fn, n, b->row_len - 2);
  for (int i = 0; i < n; i++)
    if (residues[i] < 0 || residues[i] >= ESMT_VOCAB_SIZE)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: residue %d is token id %d (0..%d)", fn,
                       i + 1, residues[i], ESMT_VOCAB_SIZE - 1);
  if (b->n == b->cap) {
    const int cap = b->cap ? 2 * b->cap : 16;
    int32_t **res = realloc(b->res, (size_t)cap * sizeof *res);
    if (res) b->res = res;
    int *len = realloc(b->len, (size_t)cap * sizeof *len);
    if (len) b->len = len;
    if (!res || !len) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    b->cap = cap;
  }
  int32_t *copy = malloc((size_t)(n ? n : 1) * sizeof *copy);
  if (!copy) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  if (n) memcpy(copy, residues, (size_t)n * sizeof *copy);
  b->res[b->n] = copy;
  b->len[b->n++] = n;
  free_layout(b);
  return ESMT_OK;
}

/* Packed: proteins in order, a new row when the next does not fit. */
static int packed_rows(const esmt_batch_builder *b) {
  int rows = 0, used = b->row_len;
  for (int i = 0; i < b->n; i++) {
    if (used + b->len[i] + 2 > b->row_len) rows++, used = 0;
    used += b->len[i] + 2;
  }
  return rows;
}

esmt_status esmt_batch_builder_get(esmt_batch_builder *b, esmt_batch *batch) {
  const char *fn = "esmt_batch_builder_get";
  ESMT_CHECK_ARG(b && batch, fn, "builder and batch must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_batch", batch->struct_size, sizeof(esmt_batch));
  if (st) return st;
  if (!b->n) return esmt_fail(ESMT_ERR_STATE, "%s: no protein was added", fn);
  const int packed = b->layout == ESMT_ROWS_PACKED;
  int rows = b->n, T = 0;
  if (packed) {
    rows = packed_rows(b);
    T = b->row_len;
  } else {
    for (int i = 0; i < b->n; i++) T = b->len[i] + 2 > T ? b->len[i] + 2 : T;
  }
  free_layout(b);
  b->tokens = malloc((size_t)rows * (size_t)T * sizeof *b->tokens);
  if (packed) {
    b->seg_start = malloc((size_t)b->n * sizeof *b->seg_start);
    b->seg_len = malloc((size_t)b->n * sizeof *b->seg_len);
  }
  if (!b->tokens || (packed && (!b->seg_start || !b->seg_len))) {
    free_layout(b);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory for %d x %d tokens", fn, rows, T);
  }
  if (!packed) {
    for (int i = 0; i < b->n; i++)
      esmt_row_write(b->tokens + (size_t)i * T, T, b->res[i], b->len[i]);
  } else {
    for (size_t k = 0; k < (size_t)rows * (size_t)T; k++) b->tokens[k] = ESMT_TOKEN_PAD;
    int row = -1, used = T;
    for (int i = 0; i < b->n; i++) {
      const int w = b->len[i] + 2;
      if (used + w > T) row++, used = 0;
      b->seg_start[i] = row * T + used;
      b->seg_len[i] = w;
      esmt_row_write(b->tokens + b->seg_start[i], w, b->res[i], b->len[i]);
      used += w;
    }
  }
  const uint32_t size = batch->struct_size;
  esmt_batch out = ESMT_BATCH_INIT;
  out.batch = rows;
  out.seq_len = T;
  out.tokens = b->tokens;
  if (packed) {
    out.num_segments = b->n;
    out.seg_start = b->seg_start;
    out.seg_len = b->seg_len;
  }
  out.struct_size = size;
  memcpy(batch, &out, size < sizeof out ? size : sizeof out);
  return ESMT_OK;
}
