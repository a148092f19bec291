/* SPDX-License-Identifier: MIT */
/* `contacts --png DIR`: each protein's map as ID.png in DIR, an
 * esmt_contact_dir (built under DIR.PID.tmp, renamed whole at the end),
 * drawn by plot's plot_contact_map. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "contacts.h"
#ifdef ESMT_HAVE_CAIRO
#include "../plot/plot_contact_map.h"
#endif

int contacts_png_available(void) {
#ifdef ESMT_HAVE_CAIRO
  return 1;
#else
  return 0;
#endif
}

int contacts_png_write(esmt_contact_dir *dir, const char *id, const float *map, int n) {
#ifdef ESMT_HAVE_CAIRO
  int fd = -1;
  esmt_status st = esmt_contact_dir_add_file(dir, id, n, ".png", &fd);
  if (st) {
    cli_error("contacts: --png", st);
    return 1;
  }
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    close(fd);
    fprintf(stderr, CONTACTS_PREFIX "--png: record '%s': cannot write its figure\n", cli_esc(id));
    return 1;
  }
  plot_signer signer = {.out = f, .stopped = cli_signal_caught};
  char err[256] = "";
  int rc = plot_contact_map(map, n, id, &signer, err, sizeof err) != 0;
  if (!rc && (fflush(f) != 0 || fsync(fileno(f)) != 0)) {
    snprintf(err, sizeof err, "%s", strerror(errno));
    rc = 1;
  }
  if (fclose(f) != 0 && !rc) {
    snprintf(err, sizeof err, "%s", strerror(errno));
    rc = 1;
  }
  if (rc)
    fprintf(stderr, CONTACTS_PREFIX "--png: record '%s': %s\n", cli_esc(id), err);
  return rc;
#else
  (void)dir, (void)id, (void)map, (void)n;
  return 1;
#endif
}
