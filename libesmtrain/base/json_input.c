/* SPDX-License-Identifier: MIT */
/* JSON input files without blocking; see json_input.h. */
#define _POSIX_C_SOURCE 200809L
#include "json_input.h"

#include <stdio.h>
#include <unistd.h>

#include "input_file.h"

#define JSON_INPUT_MAX (64ll << 20)

esmt_status esmt_json_load_input(const char *path, const char *what, json_t **out) {
  *out = NULL;
  int fd;
  struct stat sb;
  esmt_status st = esmt_open_input(path, what, &fd, &sb);
  if (st) return st;
  if ((long long)sb.st_size > JSON_INPUT_MAX) {
    close(fd);
    return esmt_fail(ESMT_ERR_FORMAT, "%s: %lld bytes is too large for a %s (at most 64 MiB)",
                     path, (long long)sb.st_size, what);
  }
  json_error_t jerr;
  json_t *root = json_loadfd(fd, 0, &jerr);
  close(fd);
  if (!root)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: not valid JSON (%s, line %d): the %s is damaged", path,
                     jerr.text, jerr.line, what);
  *out = root;
  return ESMT_OK;
}
