/* SPDX-License-Identifier: MIT */
/* Checked parsing of numeric command-line values (cli.h): atoi and atof
 * turn "4294967296" into 0, "12abc" into 12 and "1e-400" into 0 without a
 * word; these refuse them, naming the flag and the range. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cli_int_arg(const char *cmd, const char *flag, const char *text, long long min,
                long long max, long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = text ? strtoll(text, &end, 10) : 0;
  if (!text || end == text || *end || errno == ERANGE || v < min || v > max) {
    fprintf(stderr, "%s: %s '%s': expected a whole number in [%lld, %lld]%s\n", cmd, flag,
            text ? text : "", min, max,
            errno == ERANGE ? " (it does not fit in 64 bits)" : "");
    return 0;
  }
  *out = v;
  return 1;
}

int cli_double_arg(const char *cmd, const char *flag, const char *text, double min, double max,
                   double *out) {
  char *end = NULL;
  errno = 0;
  double v = text ? strtod(text, &end) : 0;
  const int bad_text = !text || end == text || *end;
  const int underflow = !bad_text && errno == ERANGE && fabs(v) < 1.0; /* 1e-400 -> 0 */
  if (bad_text || underflow || !isfinite(v) || v < min || v > max) {
    fprintf(stderr, "%s: %s '%s': expected a number in [%g, %g]%s\n", cmd, flag,
            text ? text : "", min, max,
            underflow ? " (it underflows to 0 in double precision)" : "");
    return 0;
  }
  *out = v;
  return 1;
}
