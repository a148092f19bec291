/* See micro_batch_fixture.h. */
#include "micro_batch_fixture.h"

#include <string.h>

void fill_micro_batch(esmt_micro_batch *mb, int B, int T, int u, int k, int32_t *tok,
                      int32_t *lab) {
  for (int i = 0; i < B * T; i++) {
    int t = i % T, row = i / T, len = T - (row + u + k) % 5;
    tok[i] = t >= len ? ESMT_TOKEN_PAD : t % 6 == 3 ? ESMT_TOKEN_MASK : 4 + (i * 7 + u * 3 + k) % 20;
    lab[i] = t < len && (t % 6 == 3 || t % 11 == 1) ? 4 + (i + u + k) % 20 : ESMT_LABEL_IGNORE;
  }
  memset(mb, 0, sizeof *mb); /* right-padded: no segments */
  mb->B = B;
  mb->T = T;
  mb->tokens = tok;
  mb->labels = lab;
  esmt_micro_batch_count(mb);
}
