/* SPDX-License-Identifier: MIT */
/* The mark of `plot`'s figures (plot_signature.h). */
#define _POSIX_C_SOURCE 200809L
#include "plot_signature.h"

#include <string.h>
#include <unistd.h>

static const unsigned char k_png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
#define PNG_AFTER_IHDR 33 /* the magic, then IHDR: length, type, 13 bytes, CRC */
static const char k_svg_mark[] = "<!-- Software: " PLOT_SOFTWARE " -->\n";

static uint32_t crc32_of(const unsigned char *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

static void put_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* The PNG chunk: length, "tEXt", "Software\0esmtrain-example plot", CRC. */
static size_t png_mark(unsigned char *buf) {
  static const char text[] = "Software\0" PLOT_SOFTWARE;
  const size_t n = sizeof text - 1;
  put_be32(buf, (uint32_t)n);
  memcpy(buf + 4, "tEXt", 4);
  memcpy(buf + 8, text, n);
  put_be32(buf + 8 + n, crc32_of(buf + 4, n + 4));
  return n + 12;
}

static int put(plot_signer *s, const void *data, size_t len) {
  return fwrite(data, 1, len, s->out) == len ? 0 : -1;
}

int plot_signer_write(plot_signer *s, const unsigned char *data, size_t len) {
  if (s->stopped && s->stopped()) return -1;
  while (len) {
    size_t take = len; /* bytes before the mark's place, or all of them */
    if (!s->marked && !s->svg) {
      take = s->passed < PNG_AFTER_IHDR ? PNG_AFTER_IHDR - (size_t)s->passed : 0;
      if (take > len) take = len;
    } else if (!s->marked) {
      const unsigned char *nl = memchr(data, '\n', len);
      take = nl ? (size_t)(nl - data) + 1 : len;
    }
    if (take && put(s, data, take)) return -1;
    s->passed += take;
    data += take;
    len -= take;
    const int at_place = s->svg ? take && data[-1] == '\n' : s->passed == PNG_AFTER_IHDR;
    if (!s->marked && at_place) {
      unsigned char chunk[64];
      if (s->svg ? put(s, k_svg_mark, sizeof k_svg_mark - 1) : put(s, chunk, png_mark(chunk)))
        return -1;
      s->marked = 1;
    }
  }
  return 0;
}

int plot_is_figure(int fd, void *user, char *why, size_t cap) {
  (void)user;
  unsigned char head[256], chunk[64];
  const ssize_t n = pread(fd, head, sizeof head, 0);
  const size_t m = png_mark(chunk);
  if (n >= (ssize_t)(PNG_AFTER_IHDR + m) && !memcmp(head, k_png_magic, 8) &&
      !memcmp(head + PNG_AFTER_IHDR, chunk, m))
    return 1;
  const unsigned char *nl = n > 0 ? memchr(head, '\n', (size_t)n) : NULL;
  const size_t at = nl ? (size_t)(nl - head) + 1 : 0;
  if (nl && !memcmp(head, "<?xml", 5) && (size_t)n >= at + sizeof k_svg_mark - 1 &&
      !memcmp(head + at, k_svg_mark, sizeof k_svg_mark - 1))
    return 1;
  snprintf(why, cap, "is not a figure written by `plot` (it lacks the \"%s\" mark: a figure "
           "from an older esmtrain, or another file)", PLOT_SOFTWARE);
  return 0;
}
