/* SPDX-License-Identifier: MIT */
/* --format safetensors (embed.h): once every protein is committed, the
 * .npy arrays are copied into OUT/embeddings.safetensors by the library
 * (esmt_npy_streams_to_safetensors: a new temporary file, fsync'd, then
 * renamed here); once embed.json says so, the .npy files, which this
 * command created, are removed. The header's "__metadata__" points at
 * ids.txt for the protein ids, which safetensors cannot hold as a tensor. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embed.h"

/* "mean.layer6" from ".../mean.layer6.npy" */
static void tensor_name(const cli_npy *f, char *name, size_t cap) {
  const char *base = strrchr(f->path, '/');
  snprintf(name, cap, "%s", base ? base + 1 : f->path);
  char *dot = strrchr(name, '.');
  if (dot) *dot = 0;
}

int embed_output_finish(embed_output *w, const embed_stats *s) {
  (void)s;
  if (!w->o->safetensors) return 0;
  cli_npy *a[3 * EMBED_MAX_LAYERS + 2];
  const int n = embed_output_arrays(w, a);
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/embeddings.safetensors", w->o->out);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  /* a copy an interrupted run of this command left is a regular file with
   * one link; a symbolic link or anything else there is refused below */
  if (esmt_owned_file_is_own(tmp, NULL)) unlink(tmp);
  struct stat sb;
  if (lstat(path, &sb) == 0 && !esmt_owned_file_is_own(path, NULL)) {
    fprintf(stderr, "esmtrain-example: embed: %s is %s that embed did not write: nothing was "
            "changed (the .npy arrays are complete and kept); move it away and run the same "
            "command again\n", path, S_ISLNK(sb.st_mode) ? "a symbolic link" : "a file");
    return -1;
  }
  esmt_npy_stream *streams[3 * EMBED_MAX_LAYERS + 2];
  char names[3 * EMBED_MAX_LAYERS + 2][256];
  const char *name_of[3 * EMBED_MAX_LAYERS + 2];
  for (int i = 0; i < n; i++) {
    streams[i] = a[i]->s;
    tensor_name(a[i], names[i], sizeof names[i]);
    name_of[i] = names[i];
  }
  static const char *const meta[] = {"format", "esmtrain-embeddings", "ids", "ids.txt"};
  esmt_status st = esmt_npy_streams_to_safetensors(tmp, streams, name_of, n, meta, 2);
  if (!st && rename(tmp, path) != 0) {
    fprintf(stderr, "esmtrain-example: embed: cannot write %s: %s (the .npy arrays are "
            "complete and kept)\n", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  if (st) {
    fprintf(stderr, "esmtrain-example: embed: cannot write %s: %s (the .npy arrays are "
            "complete and kept)\n", path, esmt_last_error());
    return -1;
  }
  return 0;
}

int embed_output_remove_staging(embed_output *w) {
  if (!w->o->safetensors) return 0;
  cli_npy *a[3 * EMBED_MAX_LAYERS + 2];
  const int n = embed_output_arrays(w, a);
  for (int i = 0; i < n; i++) {
    char gone[4096];
    snprintf(gone, sizeof gone, "%s", a[i]->path);
    cli_npy_close(a[i]);
    unlink(gone);
  }
  return 0;
}
