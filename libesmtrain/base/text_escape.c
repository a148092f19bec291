/* SPDX-License-Identifier: MIT */
/* Control characters escaped for printing (esmt_escape_text, esmtrain.h). */
#include "internal.h"

#include <stdio.h>

char *esmt_escape_text(const char *text, char *out, size_t cap) {
  if (!out || cap == 0) return out;
  if (!text) text = "(null)";
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    /* U+0080-U+009F is 0xc2 0x80..0x9f in UTF-8: escaped as its two bytes */
    const int c1 = p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
    const int control = *p < 0x20 || *p == 0x7f || c1;
    const size_t need = control ? (c1 ? 8 : 4) : 1;
    if (n + need >= cap) break;
    if (!control) {
      out[n++] = (char)*p;
      continue;
    }
    snprintf(out + n, cap - n, "\\x%02x", *p);
    n += 4;
    if (c1) {
      p++;
      snprintf(out + n, cap - n, "\\x%02x", *p);
      n += 4;
    }
  }
  out[n] = '\0';
  return out;
}
