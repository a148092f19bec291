/* SPDX-License-Identifier: MIT */
/* Packed rows: checks and the token -> segment map (cpu_segs.h). */
#include "cpu_segs.h"

#include <stdlib.h>

esmtb_status cpu_segs_check(const esmtb_segments *s, int B, int T, const char *op) {
  if (!s->start || !s->len) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: %d segments but NULL start/len", op, s->nseg);
  const long N = (long)B * T;
  if (s->nseg > N) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: %d segments for %ld tokens", op, s->nseg, N);
  long end = 0; /* first token after the previous segment */
  for (int i = 0; i < s->nseg; i++) {
    const long st = s->start[i], len = s->len[i];
    if (len < 1 || len > s->max_len || st < end || st + len > N || st / T != (st + len - 1) / T)
      return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: segment %d (start %ld, len %ld) must have 1 <= len <= max_len "
                      "(%d), follow segment %d and lie inside one row of %d tokens",
                      op, i, st, len, s->max_len, i - 1, T);
    end = st + len;
  }
  return 0;
}

int32_t *cpu_segs_owner(const esmtb_segments *s, int B, int T) {
  const size_t N = (size_t)B * (size_t)T;
  int32_t *owner = malloc(N * sizeof *owner);
  if (!owner) return NULL;
  for (size_t r = 0; r < N; r++) owner[r] = -1;
  for (int i = 0; i < s->nseg; i++)
    for (int32_t k = 0; k < s->len[i]; k++) owner[s->start[i] + k] = i;
  return owner;
}
