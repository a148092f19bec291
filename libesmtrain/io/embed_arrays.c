/* SPDX-License-Identifier: MIT */
/* The arrays of an embedding output directory (embed_dir.h): lengths.npy,
 * per_tok.offsets.npy, {mean,cls,per_tok}.layer<L>.npy, attn.offsets.npy and
 * attn.layer<L>.npy (flat fp32: protein k's [heads, kept, kept] at elements
 * attn.offsets[k]..[k+1]) and ids.txt, all
 * appended protein by protein in input order and committed together
 * (headers rewritten, fsync) before embed.json records the new counts.
 * Each is created or re-opened under esmt_owned_file_* and written by an
 * esmt_npy_stream. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embed_dir.h"
#include "fs_util.h"

/* The id (esmt_owned_file_id) embed.json recorded for a file of OUT, or NULL. */
static const char *recorded_id(json_t *files, const char *name) {
  return json_string_value(json_object_get(files, name));
}

static esmt_status owned_open(const char *path, int resume, const char *recorded, int *fd) {
  return resume ? esmt_owned_file_reopen(path, recorded, fd) : esmt_owned_file_create(path, fd);
}

static esmt_status open_array(embed_npy *f, esmt_embed_dir *d, const char *name,
                              esmt_npy_dtype dtype, int64_t cols, int64_t resume_rows) {
  char file[128];
  snprintf(f->path, sizeof f->path, "%s/%s.npy", d->out, name);
  snprintf(file, sizeof file, "%s.npy", name);
  esmt_status st = owned_open(f->path, resume_rows >= 0, recorded_id(d->recorded, file), &f->fd);
  if (st) return st;
  esmt_owned_file_id(f->fd, f->id, sizeof f->id);
  return esmt_npy_stream_start(f->fd, f->path, dtype, cols, resume_rows, &f->s);
}

static void close_array(embed_npy *f) {
  esmt_npy_stream_end(f->s);
  f->s = NULL;
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
}

void embed_arrays_init(esmt_embed_dir *d) {
  d->ids_fd = -1;
  d->lengths.fd = d->offsets.fd = d->attn_offsets.fd = -1;
  for (int j = 0; j < EMBED_MAX_LAYERS; j++)
    d->mean[j].fd = d->cls[j].fd = d->tok[j].fd = d->attn[j].fd = -1;
}

/* The open arrays in a fixed order into out[EMBED_MAX_ARRAYS]. */
static int all_arrays(esmt_embed_dir *d, embed_npy **out) {
  int n = 0;
  if (d->lengths.fd >= 0) out[n++] = &d->lengths;
  if (d->offsets.fd >= 0) out[n++] = &d->offsets;
  if (d->attn_offsets.fd >= 0) out[n++] = &d->attn_offsets;
  for (int j = 0; j < d->nl; j++) {
    if (d->mean[j].fd >= 0) out[n++] = &d->mean[j];
    if (d->cls[j].fd >= 0) out[n++] = &d->cls[j];
    if (d->tok[j].fd >= 0) out[n++] = &d->tok[j];
    if (d->attn[j].fd >= 0) out[n++] = &d->attn[j];
  }
  return n;
}

esmt_status embed_arrays_open(esmt_embed_dir *d, int resume) {
  const embed_stats *r = resume ? &d->s : NULL;
  const int64_t n = r ? (int64_t)r->proteins : -1, rows = r ? (int64_t)r->per_tok_rows : -1;
  const int tok = (d->include & ESMT_EMBED_PER_TOKEN) != 0;
  const int att = (d->include & ESMT_EMBED_ATTENTION) != 0;
  const int64_t values = r ? (int64_t)r->attn_values : -1;
  const int64_t zero = 0;
  esmt_status st = open_array(&d->lengths, d, "lengths", ESMT_NPY_I64, 0, n);
  if (!st && tok) st = open_array(&d->offsets, d, "per_tok.offsets", ESMT_NPY_I64, 0, r ? n + 1 : -1);
  if (!st && tok && !r) st = esmt_npy_stream_append(d->offsets.s, &zero, 1);
  if (!st && att)
    st = open_array(&d->attn_offsets, d, "attn.offsets", ESMT_NPY_I64, 0, r ? n + 1 : -1);
  if (!st && att && !r) st = esmt_npy_stream_append(d->attn_offsets.s, &zero, 1);
  for (int j = 0; j < d->nl && !st; j++) {
    char name[64];
    if (d->include & ESMT_EMBED_MEAN) {
      snprintf(name, sizeof name, "mean.layer%d", d->layers[j]);
      if ((st = open_array(&d->mean[j], d, name, ESMT_NPY_F32, d->hidden, n))) break;
    }
    if (d->include & ESMT_EMBED_CLS) {
      snprintf(name, sizeof name, "cls.layer%d", d->layers[j]);
      if ((st = open_array(&d->cls[j], d, name, ESMT_NPY_F32, d->hidden, n))) break;
    }
    if (tok) {
      snprintf(name, sizeof name, "per_tok.layer%d", d->layers[j]);
      if ((st = open_array(&d->tok[j], d, name, ESMT_NPY_F32, d->hidden, rows))) break;
    }
    if (att) {
      snprintf(name, sizeof name, "attn.layer%d", d->layers[j]);
      if ((st = open_array(&d->attn[j], d, name, ESMT_NPY_F32, 0, values))) break;
    }
  }
  if (st) return st;
  char path[4200];
  snprintf(path, sizeof path, "%s/ids.txt", d->out);
  if ((st = owned_open(path, r != NULL, r ? recorded_id(d->recorded, "ids.txt") : NULL,
                       &d->ids_fd)))
    return st;
  esmt_owned_file_id(d->ids_fd, d->ids_id, sizeof d->ids_id);
  if (r) { /* every file is this writer's: only now cut them back to the commit */
    embed_npy *all[EMBED_MAX_ARRAYS];
    const int na = all_arrays(d, all);
    for (int i = 0; i < na; i++)
      if ((st = esmt_npy_stream_cut(all[i]->s))) return st;
    if (ftruncate(d->ids_fd, (off_t)r->ids_bytes) != 0 || lseek(d->ids_fd, 0, SEEK_END) < 0)
      return esmt_fail(ESMT_ERR_IO, "%s: %s", path, strerror(errno));
  }
  return embed_arrays_commit(d);
}

json_t *embed_arrays_files(esmt_embed_dir *d) {
  json_t *files = json_object();
  embed_npy *all[EMBED_MAX_ARRAYS];
  const int n = all_arrays(d, all);
  for (int i = 0; i < n && files; i++)
    if (all[i]->id[0]) {
      const char *base = strrchr(all[i]->path, '/');
      json_object_set_new(files, base ? base + 1 : all[i]->path, json_string(all[i]->id));
    }
  if (files && d->ids_fd >= 0 && d->ids_id[0])
    json_object_set_new(files, "ids.txt", json_string(d->ids_id));
  return files;
}

/* A temporary file this writer writes and renames (never recorded). */
static int temporary_name(const char *name) {
  return !strcmp(name, "embeddings.safetensors.tmp") || !strcmp(name, "embed.json.tmp");
}

/* A name this writer uses in OUT besides embed.json and run.lock. */
static int own_name(const char *name) {
  const size_t n = strlen(name);
  int layer = 0, end = 0;
  if (!strcmp(name, "ids.txt") || !strcmp(name, "lengths.npy") ||
      !strcmp(name, "per_tok.offsets.npy") || !strcmp(name, "attn.offsets.npy") ||
      temporary_name(name))
    return 1;
  return n > 4 && !strcmp(name + n - 4, ".npy") &&
         (sscanf(name, "mean.layer%d.npy%n", &layer, &end) == 1 ||
          sscanf(name, "cls.layer%d.npy%n", &layer, &end) == 1 ||
          sscanf(name, "per_tok.layer%d.npy%n", &layer, &end) == 1 ||
          sscanf(name, "attn.layer%d.npy%n", &layer, &end) == 1) &&
         (size_t)end == n;
}

esmt_status embed_arrays_clear(esmt_embed_dir *d, json_t *files, int check_only) {
  DIR *dd = opendir(d->out);
  if (!dd) return esmt_fail(ESMT_ERR_IO, "cannot read %s: %s", d->out, strerror(errno));
  esmt_status st = ESMT_OK;
  for (struct dirent *e; !st && (e = readdir(dd));) {
    const char *name = e->d_name;
    if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "run.lock") ||
        !strcmp(name, "embed.json"))
      continue;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", d->out, name);
    /* a file the record names must still be that file; an unrecorded one
     * is a file an attempt killed before its first record created */
    const char *id = recorded_id(files, name);
    if (!id && !temporary_name(name) && json_object_size(files)) id = "";
    if (!(own_name(name) && esmt_owned_file_is_own(path, id)))
      st = esmt_fail(ESMT_ERR_STATE, "%s holds %s, which embed did not create (or not as it "
                     "is now): nothing was changed; move it away or choose a new output "
                     "directory", d->out, name);
    else if (!check_only && unlink(path) != 0)
      st = esmt_fail(ESMT_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
  }
  closedir(dd);
  return st;
}

static esmt_status write_ids(esmt_embed_dir *d, const char *text, size_t n) {
  char path[4200];
  snprintf(path, sizeof path, "%s/ids.txt", d->out);
  return esmt_write_all(d->ids_fd, text, n, path);
}

esmt_status embed_arrays_append(esmt_embed_dir *d, int count, const char *const *ids,
                                const esmt_embedding *e) {
  embed_stats *s = &d->s;
  const int h = d->hidden;
  esmt_status st = ESMT_OK;
  for (int i = 0; i < count && !st; i++) {
    const esmt_embedding *p = &e[i];
    const int64_t len = p->length;
    if ((st = write_ids(d, ids[i], strlen(ids[i]))) || (st = write_ids(d, "\n", 1)) ||
        (st = esmt_npy_stream_append(d->lengths.s, &len, 1)))
      break;
    for (int j = 0; j < d->nl && !st; j++) {
      if (d->include & ESMT_EMBED_MEAN)
        st = esmt_npy_stream_append(d->mean[j].s, p->mean + (size_t)j * h, 1);
      if (!st && (d->include & ESMT_EMBED_CLS))
        st = esmt_npy_stream_append(d->cls[j].s, p->cls + (size_t)j * h, 1);
      if (!st && (d->include & ESMT_EMBED_PER_TOKEN))
        st = esmt_npy_stream_append(d->tok[j].s, p->per_token + (size_t)j * p->kept * h,
                                    (uint64_t)p->kept);
    }
    if (!st && (d->include & ESMT_EMBED_PER_TOKEN)) {
      const int64_t end = (int64_t)(s->per_tok_rows + (uint64_t)p->kept);
      st = esmt_npy_stream_append(d->offsets.s, &end, 1);
    }
    const uint64_t maps = (uint64_t)d->heads * (uint64_t)p->kept * (uint64_t)p->kept;
    if (d->include & ESMT_EMBED_ATTENTION) {
      for (int j = 0; j < d->nl && !st && maps; j++)
        st = esmt_npy_stream_append(d->attn[j].s, p->attention + (size_t)j * maps, maps);
      const int64_t end = (int64_t)(s->attn_values + maps);
      if (!st) st = esmt_npy_stream_append(d->attn_offsets.s, &end, 1);
      if (!st) s->attn_values += maps;
    }
    if (st) break;
    s->proteins++;
    s->residues += (uint64_t)len;
    s->per_tok_rows += (uint64_t)p->kept;
    s->truncated += p->kept < len;
    s->windowed += p->pieces > 1;
    s->empty += len == 0;
    s->ids_bytes += strlen(ids[i]) + 1;
    s->ids_hash = embed_id_hash(s->ids_hash, ids[i]);
  }
  return st;
}

esmt_status embed_arrays_commit(esmt_embed_dir *d) {
  embed_npy *all[EMBED_MAX_ARRAYS];
  const int n = all_arrays(d, all);
  for (int i = 0; i < n; i++) {
    esmt_status st = esmt_npy_stream_commit(all[i]->s);
    if (st) return st;
  }
  if (fsync(d->ids_fd) != 0)
    return esmt_fail(ESMT_ERR_IO, "%s/ids.txt: fsync: %s", d->out, strerror(errno));
  return ESMT_OK;
}

void embed_arrays_close(esmt_embed_dir *d) {
  close_array(&d->lengths);
  close_array(&d->offsets);
  close_array(&d->attn_offsets);
  for (int j = 0; j < EMBED_MAX_LAYERS; j++) {
    close_array(&d->mean[j]);
    close_array(&d->cls[j]);
    close_array(&d->tok[j]);
    close_array(&d->attn[j]);
  }
  if (d->ids_fd >= 0) close(d->ids_fd);
  d->ids_fd = -1;
}

int embed_arrays_remove_staging_left(esmt_embed_dir *d, json_t *files) {
  const char *name;
  json_t *id;
  int n = 0;
  json_object_foreach(files, name, id) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", d->out, name);
    if (strcmp(name, "ids.txt") && own_name(name) &&
        esmt_owned_file_is_own(path, json_string_value(id)) && unlink(path) == 0)
      n++;
  }
  return n;
}

/* "mean.layer6" from ".../mean.layer6.npy" */
static void tensor_name(const embed_npy *f, char *name, size_t cap) {
  const char *base = strrchr(f->path, '/');
  snprintf(name, cap, "%s", base ? base + 1 : f->path);
  char *dot = strrchr(name, '.');
  if (dot) *dot = 0;
}

/* --format safetensors: once every protein is committed, the .npy arrays
 * are copied into OUT/embeddings.safetensors (a new temporary file,
 * fsync'd, then renamed). The header's "__metadata__" points at ids.txt
 * for the protein ids, which safetensors cannot hold as a tensor. */
esmt_status embed_arrays_to_safetensors(esmt_embed_dir *d) {
  embed_npy *a[EMBED_MAX_ARRAYS];
  const int n = all_arrays(d, a);
  char path[4200], tmp[4300];
  snprintf(path, sizeof path, "%s/embeddings.safetensors", d->out);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  /* a copy an interrupted run left is a regular file with one link; a
   * symbolic link or anything else there is refused below */
  if (esmt_owned_file_is_own(tmp, NULL)) unlink(tmp);
  struct stat sb;
  if (lstat(path, &sb) == 0 && !esmt_owned_file_is_own(path, NULL))
    return esmt_fail(ESMT_ERR_STATE, "%s is %s that embed did not write: nothing was changed "
                     "(the .npy arrays are complete and kept); move it away and run the same "
                     "command again", path, S_ISLNK(sb.st_mode) ? "a symbolic link" : "a file");
  esmt_npy_stream *streams[EMBED_MAX_ARRAYS];
  char names[EMBED_MAX_ARRAYS][256];
  const char *name_of[EMBED_MAX_ARRAYS];
  for (int i = 0; i < n; i++) {
    streams[i] = a[i]->s;
    tensor_name(a[i], names[i], sizeof names[i]);
    name_of[i] = names[i];
  }
  static const char *const meta[] = {"format", "esmtrain-embeddings", "ids", "ids.txt"};
  esmt_status st = esmt_npy_streams_to_safetensors(tmp, streams, name_of, n, meta, 2);
  if (st) {
    esmt_fail_prefix(st, "cannot write %s: ", path);
    return esmt_fail_append(st, " (the .npy arrays are complete and kept)");
  }
  if (rename(tmp, path) != 0) {
    const int err = errno;
    unlink(tmp);
    return esmt_fail(ESMT_ERR_IO, "cannot write %s: %s (the .npy arrays are complete and "
                     "kept)", path, strerror(err));
  }
  return ESMT_OK;
}

void embed_arrays_remove_staging(esmt_embed_dir *d) {
  embed_npy *a[EMBED_MAX_ARRAYS];
  const int n = all_arrays(d, a);
  for (int i = 0; i < n; i++) {
    char gone[4096];
    snprintf(gone, sizeof gone, "%s", a[i]->path);
    close_array(a[i]);
    unlink(gone);
  }
}
