/* SPDX-License-Identifier: MIT */
/* Monotonic time for timings and progress. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "internal.h"

double esmt_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double esmt_clock_seconds(void) { return esmt_now_s(); }
