/* SPDX-License-Identifier: MIT */
/* The arrays of an embed output directory (embed.h): lengths.npy,
 * per_tok.offsets.npy, {mean,cls,per_tok}.layer<L>.npy and ids.txt, all
 * appended protein by protein in input order and committed together
 * (headers rewritten, fsync) before embed.json records the new counts. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "embed.h"

/* The id (esmt_owned_file_id) embed.json recorded for a file of OUT, or NULL. */
static const char *recorded_id(json_t *files, const char *name) {
  return json_string_value(json_object_get(files, name));
}

static int open_array(cli_npy *f, const embed_options *o, const char *name,
                      esmt_npy_dtype dtype, int64_t cols, int64_t resume_rows, json_t *files) {
  char path[4096], file[128];
  snprintf(path, sizeof path, "%s/%s.npy", o->out, name);
  snprintf(file, sizeof file, "%s.npy", name);
  return cli_npy_open(f, "embed", path, dtype, cols, resume_rows, recorded_id(files, file));
}

void embed_output_init(embed_output *w, const embed_options *o, int d) {
  memset(w, 0, sizeof *w);
  w->o = o;
  w->d = d;
  w->ids_fd = -1;
  w->lengths.fd = w->offsets.fd = -1;
  for (int j = 0; j < EMBED_MAX_LAYERS; j++) w->mean[j].fd = w->cls[j].fd = w->tok[j].fd = -1;
}

int embed_output_open(embed_output *w, const embed_options *o, int d, const embed_stats *r,
                      json_t *files) {
  embed_output_init(w, o, d);
  const int64_t n = r ? (int64_t)r->proteins : -1, rows = r ? (int64_t)r->per_tok_rows : -1;
  if (open_array(&w->lengths, o, "lengths", ESMT_NPY_I64, 0, n, files)) return -1;
  if ((o->include & EMBED_PER_TOK) && open_array(&w->offsets, o, "per_tok.offsets", ESMT_NPY_I64, 0,
                                                 r ? n + 1 : -1, files))
    return -1;
  if ((o->include & EMBED_PER_TOK) && !r) {
    const int64_t zero = 0;
    if (cli_npy_append(&w->offsets, "embed", &zero, 1)) return -1;
  }
  for (int j = 0; j < o->nl; j++) {
    char name[64];
    if (o->include & EMBED_MEAN) {
      snprintf(name, sizeof name, "mean.layer%d", o->layers[j]);
      if (open_array(&w->mean[j], o, name, ESMT_NPY_F32, d, n, files)) return -1;
    }
    if (o->include & EMBED_CLS) {
      snprintf(name, sizeof name, "cls.layer%d", o->layers[j]);
      if (open_array(&w->cls[j], o, name, ESMT_NPY_F32, d, n, files)) return -1;
    }
    if (o->include & EMBED_PER_TOK) {
      snprintf(name, sizeof name, "per_tok.layer%d", o->layers[j]);
      if (open_array(&w->tok[j], o, name, ESMT_NPY_F32, d, rows, files)) return -1;
    }
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/ids.txt", o->out);
  w->ids_fd = cli_owned_open("embed", path, r != 0, r ? recorded_id(files, "ids.txt") : NULL);
  if (w->ids_fd < 0) return -1;
  esmt_owned_file_id(w->ids_fd, w->ids_id, sizeof w->ids_id);
  if (r) { /* every file is embed's: only now cut them back to the commit */
    cli_npy *all[3 * EMBED_MAX_LAYERS + 2];
    const int na = embed_output_arrays(w, all);
    for (int i = 0; i < na; i++)
      if (cli_npy_cut(all[i], "embed")) return -1;
    if (ftruncate(w->ids_fd, (off_t)r->ids_bytes) != 0 || lseek(w->ids_fd, 0, SEEK_END) < 0) {
      fprintf(stderr, "esmtrain-example: embed: %s: %s\n", path, strerror(errno));
      return -1;
    }
  }
  return embed_output_commit(w);
}

int embed_output_arrays(embed_output *w, cli_npy **out) {
  int n = 0;
  if (w->lengths.fd >= 0) out[n++] = &w->lengths;
  if (w->offsets.fd >= 0) out[n++] = &w->offsets;
  for (int j = 0; j < w->o->nl; j++) {
    if (w->mean[j].fd >= 0) out[n++] = &w->mean[j];
    if (w->cls[j].fd >= 0) out[n++] = &w->cls[j];
    if (w->tok[j].fd >= 0) out[n++] = &w->tok[j];
  }
  return n;
}

json_t *embed_output_files(embed_output *w) {
  json_t *files = json_object();
  cli_npy *all[3 * EMBED_MAX_LAYERS + 2];
  const int n = embed_output_arrays(w, all);
  for (int i = 0; i < n; i++)
    if (all[i]->id[0]) {
      const char *base = strrchr(all[i]->path, '/');
      json_object_set_new(files, base ? base + 1 : all[i]->path, json_string(all[i]->id));
    }
  if (w->ids_fd >= 0 && w->ids_id[0]) json_object_set_new(files, "ids.txt", json_string(w->ids_id));
  return files;
}

/* A temporary file embed writes and renames (never recorded). */
static int embed_temporary_name(const char *name) {
  return !strcmp(name, "embeddings.safetensors.tmp") || !strcmp(name, "embed.json.tmp");
}

/* A name embed writes in OUT besides embed.json and run.lock. */
static int embed_file_name(const char *name) {
  const size_t n = strlen(name);
  int layer = 0, end = 0;
  if (!strcmp(name, "ids.txt") || !strcmp(name, "lengths.npy") ||
      !strcmp(name, "per_tok.offsets.npy") || embed_temporary_name(name))
    return 1;
  return n > 4 && !strcmp(name + n - 4, ".npy") &&
         (sscanf(name, "mean.layer%d.npy%n", &layer, &end) == 1 ||
          sscanf(name, "cls.layer%d.npy%n", &layer, &end) == 1 ||
          sscanf(name, "per_tok.layer%d.npy%n", &layer, &end) == 1) &&
         (size_t)end == n;
}

int embed_output_clear(const embed_options *o, json_t *files, int check_only) {
  DIR *d = opendir(o->out);
  if (!d) {
    fprintf(stderr, "esmtrain-example: embed: cannot read %s: %s\n", o->out, strerror(errno));
    return -1;
  }
  int rc = 0;
  for (struct dirent *e; !rc && (e = readdir(d));) {
    const char *name = e->d_name;
    if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "run.lock") ||
        !strcmp(name, "embed.json"))
      continue;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", o->out, name);
    /* a file the record names must still be that file; an unrecorded one
     * is a file an attempt killed before its first record created */
    const char *id = recorded_id(files, name);
    if (!id && !embed_temporary_name(name) && json_object_size(files)) id = "";
    const int own = embed_file_name(name) && esmt_owned_file_is_own(path, id);
    if (!own) {
      fprintf(stderr, "esmtrain-example: embed: %s holds %s, which embed did not create (or "
              "not as it is now): nothing was changed; move it away or choose a new output "
              "directory\n", o->out, name);
      rc = -1;
    } else if (!check_only && unlink(path) != 0) {
      fprintf(stderr, "esmtrain-example: embed: cannot remove %s: %s\n", path, strerror(errno));
      rc = -1;
    }
  }
  closedir(d);
  return rc;
}

static int write_ids(embed_output *w, const char *text, size_t n) {
  while (n) {
    ssize_t k = write(w->ids_fd, text, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      fprintf(stderr, "esmtrain-example: embed: %s/ids.txt: cannot write: %s\n", w->o->out,
              strerror(errno));
      return -1;
    }
    text += k;
    n -= (size_t)k;
  }
  return 0;
}

int embed_output_write(embed_output *w, const embed_chunk *c, embed_stats *s) {
  const embed_options *o = w->o;
  const int d = w->d;
  for (int i = 0; i < c->n; i++) {
    const embed_protein *p = &c->p[i];
    const int64_t len = p->length;
    if (write_ids(w, p->id, strlen(p->id)) || write_ids(w, "\n", 1)) return -1;
    if (cli_npy_append(&w->lengths, "embed", &len, 1)) return -1;
    for (int j = 0; j < o->nl; j++) {
      if ((o->include & EMBED_MEAN) &&
          cli_npy_append(&w->mean[j], "embed", p->e.mean + (size_t)j * d, 1))
        return -1;
      if ((o->include & EMBED_CLS) &&
          cli_npy_append(&w->cls[j], "embed", p->e.cls + (size_t)j * d, 1))
        return -1;
      if ((o->include & EMBED_PER_TOK) &&
          cli_npy_append(&w->tok[j], "embed", p->e.per_token + (size_t)j * p->e.kept * d,
                         (uint64_t)p->e.kept))
        return -1;
    }
    if (o->include & EMBED_PER_TOK) {
      const int64_t end = (int64_t)(s->per_tok_rows + (uint64_t)p->e.kept);
      if (cli_npy_append(&w->offsets, "embed", &end, 1)) return -1;
    }
    s->proteins++;
    s->residues += (uint64_t)len;
    s->per_tok_rows += (uint64_t)p->e.kept;
    s->truncated += p->e.kept < len;
    s->windowed += p->e.pieces > 1;
    s->empty += len == 0;
    s->ids_bytes += strlen(p->id) + 1;
    s->ids_hash = embed_id_hash(s->ids_hash, p->id);
  }
  return 0;
}

int embed_output_commit(embed_output *w) {
  cli_npy *all[] = {&w->lengths, &w->offsets};
  for (int i = 0; i < 2; i++)
    if (all[i]->fd >= 0 && cli_npy_commit(all[i], "embed")) return -1;
  for (int j = 0; j < w->o->nl; j++) {
    cli_npy *f[] = {&w->mean[j], &w->cls[j], &w->tok[j]};
    for (int i = 0; i < 3; i++)
      if (f[i]->fd >= 0 && cli_npy_commit(f[i], "embed")) return -1;
  }
  if (fsync(w->ids_fd) != 0) {
    fprintf(stderr, "esmtrain-example: embed: %s/ids.txt: fsync: %s\n", w->o->out,
            strerror(errno));
    return -1;
  }
  return 0;
}

void embed_output_close(embed_output *w) {
  cli_npy_close(&w->lengths);
  cli_npy_close(&w->offsets);
  for (int j = 0; j < EMBED_MAX_LAYERS; j++) {
    cli_npy_close(&w->mean[j]);
    cli_npy_close(&w->cls[j]);
    cli_npy_close(&w->tok[j]);
  }
  if (w->ids_fd >= 0) close(w->ids_fd);
  w->ids_fd = -1;
}

int embed_output_remove_staging_left(const embed_options *o, json_t *files) {
  const char *name;
  json_t *id;
  int n = 0;
  json_object_foreach(files, name, id) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", o->out, name);
    if (strcmp(name, "ids.txt") && embed_file_name(name) &&
        esmt_owned_file_is_own(path, json_string_value(id)) && unlink(path) == 0)
      n++;
  }
  return n;
}
