/* SPDX-License-Identifier: MIT */
/* What a checkpoint's state.json must record before any file it names is
 * read: the format and version, a file table listing every file a
 * checkpoint has (each with its size and crc32, so none escapes the
 * checksum check), and the same step as the directory's name. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

static const char *const k_required_files[] = {"model.safetensors", "optimizer.safetensors"};

static esmt_status check_files(json_t *files, const char *path) {
  if (!json_is_object(files))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: no 'files' table (the file names with their sizes and "
                     "checksums): the checkpoint cannot be verified; it is damaged", path);
  for (size_t i = 0; i < sizeof k_required_files / sizeof k_required_files[0]; i++)
    if (!json_object_get(files, k_required_files[i]))
      return esmt_fail(ESMT_ERR_FORMAT, "%s: the 'files' table %s %s: that file would be read "
                       "unverified; the checkpoint is damaged (resume from another one)", path,
                       json_object_size(files) ? "does not list" : "is empty, it lacks",
                       k_required_files[i]);
  const char *name;
  json_t *e;
  json_object_foreach(files, name, e) {
    json_t *bytes = json_object_get(e, "bytes"), *crc = json_object_get(e, "crc32");
    if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
      return esmt_fail(ESMT_ERR_FORMAT, "%s: the 'files' table names '%s', which is not a file "
                       "of the checkpoint directory", path, name);
    if (!json_is_integer(bytes) || json_integer_value(bytes) < 0 || !json_is_integer(crc) ||
        json_integer_value(crc) < 0 || json_integer_value(crc) > 0xffffffffll)
      return esmt_fail(ESMT_ERR_FORMAT, "%s: the 'files' entry of %s needs 'bytes' (a size) and "
                       "'crc32' (0 to 2^32-1): the checkpoint cannot be verified", path, name);
  }
  return ESMT_OK;
}

/* The step state.json records must be the one the directory is named for
 * (a checkpoint copied under another name than step-N is not checked). */
static esmt_status check_step(json_t *root, const char *path, const char *ckpt_dir) {
  json_t *step = json_object_get(root, "step");
  if (!json_is_integer(step) || json_integer_value(step) < 0)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: 'step' is missing or negative", path);
  long long s = (long long)json_integer_value(step);
  json_t *ts = json_object_get(json_object_get(root, "trainer"), "step");
  if (ts && (!json_is_integer(ts) || json_integer_value(ts) != s))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: records step %lld but its trainer state step %s: the "
                     "file was edited or mixed from two checkpoints", path, s,
                     json_is_integer(ts) ? "differs" : "is not an integer");
  const char *base = strrchr(ckpt_dir, '/');
  base = base ? base + 1 : ckpt_dir;
  if (!esmt_checkpoint_name_ok(base)) return ESMT_OK;
  long long named = strtoll(base + 5, NULL, 10);
  if (named != s)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: records step %lld but its directory is %s (step %lld): "
                     "a checkpoint was copied or renamed into the wrong place; rename the "
                     "directory to step-%08lld or resume from another checkpoint", path, s, base,
                     named, s);
  return ESMT_OK;
}

esmt_status esmt_checkpoint_check_state(json_t *root, const char *ckpt_dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/state.json", ckpt_dir);
  if (!json_is_object(root))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: not an esmtrain checkpoint (not a JSON object)", path);
  const char *fmt = json_string_value(json_object_get(root, "format"));
  json_t *ver = json_object_get(root, "version");
  if (!fmt || strcmp(fmt, ESMT_CKPT_FORMAT) != 0)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: not an esmtrain checkpoint (format is '%s')", path,
                     fmt ? fmt : "missing");
  if (!json_is_integer(ver) || json_integer_value(ver) != ESMT_CKPT_VERSION)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: checkpoint version %lld, this library reads %d", path,
                     json_is_integer(ver) ? (long long)json_integer_value(ver) : -1LL,
                     ESMT_CKPT_VERSION);
  esmt_status st = check_files(json_object_get(root, "files"), path);
  if (!st) st = check_step(root, path, ckpt_dir);
  return st;
}
