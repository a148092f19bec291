/* SPDX-License-Identifier: MIT */
/* The window rule every long-protein caller shares (infer_rows.h). */
#include "infer_rows.h"

int esmt_window_starts(int64_t n, int W, int S, int64_t *starts) {
  int k = 0;
  int64_t s = 0;
  for (; s + W < n; s += S, k++)
    if (starts) starts[k] = s;
  if (starts) starts[k] = n - W;
  return k + 1;
}
