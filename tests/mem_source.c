/* SPDX-License-Identifier: MIT */
/* See mem_source.h. */
#include "mem_source.h"

#include <stdio.h>
#include <stdlib.h>

/* Batch k, row r: a protein-like row with ~15% masked positions. */
void mem_source_row(int64_t k, int r, int32_t *tok, int32_t *lab) {
  uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(k * 131 + r + 1);
  int len = MEM_T - (int)(s % 5);
  for (int t = 0; t < MEM_T; t++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int32_t id = t == 0 ? 0 : t == len - 1 ? 2 : t >= len ? 1 : 4 + (int32_t)((s >> 33) % 20);
    tok[t] = id;
    lab[t] = -100;
    if (t > 0 && t < len - 1 && (s >> 45) % 100 < 15) {
      lab[t] = id;
      tok[t] = 32;
    }
  }
}

static esmt_status src_next(void *user, esmt_batch *b) {
  mem_source *m = user;
  if (m->limit && m->index >= m->limit) return ESMT_ERR_STATE;
  int64_t k = m->repeat ? 0 : m->offset + (m->stride > 0 ? m->stride : 1) * m->index;
  for (int r = 0; r < m->rows; r++) mem_source_row(k, r, m->tok + r * MEM_T, m->lab + r * MEM_T);
  m->index++;
  b->batch = m->rows;
  b->seq_len = MEM_T;
  b->tokens = m->tok;
  b->labels = m->lab;
  return ESMT_OK;
}
static esmt_status src_reset(void *user) { ((mem_source *)user)->index = 0; return ESMT_OK; }
static esmt_status src_save(void *user, char *buf, size_t cap) {
  snprintf(buf, cap, "%lld", (long long)((mem_source *)user)->index);
  return ESMT_OK;
}
static esmt_status src_restore(void *user, const char *json) {
  ((mem_source *)user)->index = atoll(json);
  return ESMT_OK;
}

esmt_batch_source mem_source_as_source(mem_source *m) {
  esmt_batch_source s = {sizeof s, m, src_next, src_reset, src_save, src_restore, NULL};
  return s;
}
