/* SPDX-License-Identifier: MIT */
/* Text from files printed safely (cli.h: cli_esc). */
#include "cli.h"

#define SLOTS 4
#define SLOT_BYTES 1024

const char *cli_esc(const char *text) {
  static _Thread_local char slot[SLOTS][SLOT_BYTES];
  static _Thread_local int next;
  char *out = slot[next];
  next = (next + 1) % SLOTS;
  return esmt_escape_text(text, out, SLOT_BYTES);
}
