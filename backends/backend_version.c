/* SPDX-License-Identifier: MIT */
/* Built into every shipped backend: the libesmtrain version it was built
 * with, so that the core refuses a plugin of another installation
 * (ESMTB_LIBRARY_VERSION_SYMBOL in esmtrain/backend.h). */
#include "esmtrain/backend.h"

ESMTB_EXPORT const char *esmt_backend_library_version(void);

ESMTB_EXPORT const char *esmt_backend_library_version(void) {
  return ESMT_BACKEND_LIBRARY_VERSION;
}
