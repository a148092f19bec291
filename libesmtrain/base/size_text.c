/* SPDX-License-Identifier: MIT */
/* Sizes written as text ("8GiB", "512MiB", "1.5G", "1000"): the context's
 * memory limit and every size-typed configuration key read them alike. */
#include <math.h>
#include <stdlib.h>
#include <strings.h>

#include "esmtrain/esmtrain.h"
#include "size_text.h"

int esmt_parse_bytes(const char *s, uint64_t *out) {
  char *end = NULL;
  while (*s == ' ') s++;
  if (*s == '-' || *s == '+') return 0;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0) || !isfinite(v)) return 0;
  while (*end == ' ') end++;
  static const struct { const char *u; double m; } units[] = {
      {"", 1}, {"B", 1}, {"K", 1024.0}, {"KiB", 1024.0}, {"KB", 1e3}, {"M", 1048576.0},
      {"MiB", 1048576.0}, {"MB", 1e6}, {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9},
      {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strcasecmp(end, units[i].u) == 0) {
      double bytes = v * units[i].m;
      if (!(bytes < 18446744073709551616.0)) return 0; /* beyond uint64: reject, don't wrap */
      *out = (uint64_t)bytes;
      return 1;
    }
  return 0;
}

esmt_status esmt_parse_size(const char *text, uint64_t *bytes) {
  ESMT_CHECK_ARG(text && bytes, "esmt_parse_size", "text and bytes must not be NULL");
  if (!esmt_parse_bytes(text, bytes))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "'%s' is not a size such as 8GiB, 512MiB or "
                     "1000000", text);
  return ESMT_OK;
}
