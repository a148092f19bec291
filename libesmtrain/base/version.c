/* SPDX-License-Identifier: MIT */
/* Version of the library actually loaded. */
#include "internal.h"

#define ESMT_STR2(x) #x
#define ESMT_STR(x) ESMT_STR2(x)

int esmt_version(int *major, int *minor, int *patch) {
  if (major) *major = ESMT_VERSION_MAJOR;
  if (minor) *minor = ESMT_VERSION_MINOR;
  if (patch) *patch = ESMT_VERSION_PATCH;
  return ESMT_VERSION_NUMBER;
}

const char *esmt_version_string(void) {
  return ESMT_STR(ESMT_VERSION_MAJOR) "." ESMT_STR(ESMT_VERSION_MINOR) "." ESMT_STR(
      ESMT_VERSION_PATCH);
}
