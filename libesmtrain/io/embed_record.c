/* SPDX-License-Identifier: MIT */
/* embed.json (embed_dir.h): the request that made an output directory,
 * what is committed so far, and whether it is complete. Written as a
 * temporary file, fsync'd and renamed, after the arrays it counts are
 * committed: a crash leaves the previous record, and the arrays are cut
 * back to it on resume. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embed_dir.h"
#include "fs_util.h"

#define EMBED_FORMAT "esmtrain-embeddings"
/* 2: the model's and the input's checksums and the files' ids recorded */
#define EMBED_VERSION 2

static int64_t input_bytes(const char *path) {
  struct stat sb;
  return strcmp(path, "-") && stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? (int64_t)sb.st_size
                                                                           : -1;
}

/* The fields that must be equal for a resume to continue the same arrays. */
static json_t *request_json(const esmt_embed_dir *d) {
  json_t *layers = json_array(), *inc = json_array();
  for (int j = 0; j < d->nl; j++) json_array_append_new(layers, json_integer(d->layers[j]));
  if (d->include & ESMT_EMBED_MEAN) json_array_append_new(inc, json_string("mean"));
  if (d->include & ESMT_EMBED_PER_TOKEN) json_array_append_new(inc, json_string("per_tok"));
  if (d->include & ESMT_EMBED_CLS) json_array_append_new(inc, json_string("cls"));
  if (d->include & ESMT_EMBED_ATTENTION) json_array_append_new(inc, json_string("attention"));
  char *model = realpath(d->model_path, NULL), *input = strcmp(d->input, "-")
                                                           ? realpath(d->input, NULL)
                                                           : NULL;
  json_t *r = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:s,s:s,s:I,s:s,s:o,s:o,s:s,s:i,s:i,s:s}",
                        "model", model ? model : d->model_path, "model_kind", d->model_kind,
                        "model_weights", d->weights, "backend", d->backend,
                        "model_layers", d->model_layers, "hidden", d->hidden, "max_positions",
                        d->max_positions, "input", input ? input : d->input, "split",
                        d->split, "input_bytes", (json_int_t)input_bytes(d->input),
                        "input_content", d->input_content, "layers", layers, "include", inc,
                        "long", d->windows ? "windows" : "truncate", "window", d->window,
                        "stride", d->windows ? d->stride : 0, "format",
                        d->safetensors ? "safetensors" : "npy");
  free(model);
  free(input);
  return r;
}

esmt_status embed_record_write(esmt_embed_dir *d, json_t *files, int complete, double seconds) {
  const embed_stats *s = &d->s;
  char hash[17];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)s->ids_hash);
  /* the record holds its own reference to the files table (a new empty one without) */
  json_t *table = files ? json_incref(files) : json_object();
  json_t *root = json_pack(
      "{s:s,s:i,s:b,s:o,s:{s:I,s:I,s:I,s:I,s:s},s:{s:I,s:I,s:I,s:I,s:I,s:f},s:o,s:s}",
      "format", EMBED_FORMAT, "version", EMBED_VERSION, "complete", complete, "request",
      request_json(d), "committed", "proteins", (json_int_t)s->proteins, "per_tok_rows",
      (json_int_t)s->per_tok_rows, "attention_values", (json_int_t)s->attn_values, "ids_bytes", (json_int_t)s->ids_bytes, "ids_hash", hash,
      "stats", "residues", (json_int_t)s->residues, "truncated", (json_int_t)s->truncated,
      "windowed", (json_int_t)s->windowed, "unknown_residues", (json_int_t)s->unknown, "empty",
      (json_int_t)s->empty, "seconds", seconds, "files", table, "note",
      "arrays: lengths [N] residues per protein; mean/cls.layer<L> [N, hidden]; "
      "per_tok.layer<L> [rows, hidden], protein k's rows per_tok.offsets[k]:[k+1] (cls/eos "
      "excluded); attn.layer<L> flat float32, protein k's [heads, kept, kept] attention "
      "(query by key, residues only) at attn.offsets[k]:[k+1]; ids.txt one id per line; "
      "long proteins: 'truncate' keeps the first 'window' "
      "residues, 'windows' averages overlapping windows of 'window' residues 'stride' apart; "
      "files: the device, inode and creation time of each file embed created (a resume "
      "re-opens only those)");
  char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
  json_decref(root);
  char path[4200], tmp[4300];
  snprintf(path, sizeof path, "%s/embed.json", d->out);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  /* a temporary an interrupted run left is this writer's own: a regular
   * file with one link; anything else there is refused by O_EXCL|O_NOFOLLOW */
  if (esmt_owned_file_is_own(tmp, NULL)) unlink(tmp);
  int fd = text ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644) : -1;
  const size_t n = text ? strlen(text) : 0;
  int bad = fd < 0 || write(fd, text, n) != (ssize_t)n || write(fd, "\n", 1) != 1 ||
            fsync(fd) != 0;
  int err = text ? errno : ENOMEM;
  if (fd >= 0) close(fd);
  if (!bad && rename(tmp, path) != 0) bad = 1, err = errno;
  free(text);
  if (bad) {
    if (fd >= 0) unlink(tmp);
    return esmt_fail(ESMT_ERR_IO, "cannot write %s: %s", path, strerror(err));
  }
  /* the rename is durable on most file systems anyway */
  esmt_fsync_dir_published(d->out);
  return ESMT_OK;
}

/* Entries of OUT other than . .. run.lock and a temporary record an
 * interrupted first write left; -1 when it cannot be read. */
static int entries(const char *dir) {
  DIR *dd = opendir(dir);
  if (!dd) return -1;
  int n = 0;
  char tmp[4300];
  snprintf(tmp, sizeof tmp, "%s/embed.json.tmp", dir);
  for (struct dirent *e; (e = readdir(dd));)
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "run.lock") &&
         !(!strcmp(e->d_name, "embed.json.tmp") && esmt_owned_file_is_own(tmp, NULL));
  closedir(dd);
  return n;
}

/* What a differing request key means, for the message. */
static const char *meaning(const char *key) {
  if (!strcmp(key, "model_weights"))
    return "the model's weights changed (trained further, another checkpoint or export)";
  if (!strcmp(key, "input_content"))
    return "the input's content changed (the FASTA file was edited or replaced, or the "
           "dataset re-ingested)";
  return NULL;
}

/* The differing request keys appended to msg ("key: was A, now B: why; ..."). */
static void differs(json_t *was, json_t *now, char *msg, size_t cap) {
  const char *key;
  json_t *v;
  int n = 0;
  json_object_foreach(now, key, v) {
    json_t *w = json_object_get(was, key);
    if (w && json_equal(w, v)) continue;
    char *a = w ? json_dumps(w, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    char *b = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    const char *why = meaning(key);
    const size_t len = strlen(msg);
    snprintf(msg + len, cap - len, "%s%s: was %s, now %s%s%s", n++ ? "; " : " ", key,
             a ? a : "(absent)", b ? b : "?", why ? ": " : "", why ? why : "");
    free(a);
    free(b);
  }
}

/* A count of the record: a non-negative integer at obj.key; 0, or -1
 * after naming what is wrong in why[]. */
static int count_field(json_t *obj, const char *section, const char *key, uint64_t *out,
                       char *why, size_t cap) {
  json_t *v = json_object_get(obj, key);
  if (!json_is_integer(v) || json_integer_value(v) < 0) {
    snprintf(why, cap, "%s.%s is %s, not a count", section, key,
             !v ? "missing" : json_is_integer(v) ? "negative" : "not an integer");
    return -1;
  }
  *out = (uint64_t)json_integer_value(v);
  return 0;
}

/* The record's fields a resume uses, checked and read into *s; 0, or -1
 * with why[] naming the first damaged field. */
static int read_record(json_t *root, embed_stats *s, char *why, size_t cap) {
  json_t *com = json_object_get(root, "committed"), *st = json_object_get(root, "stats");
  json_t *req = json_object_get(root, "request"), *files = json_object_get(root, "files");
  json_t *ver = json_object_get(root, "version");
  if (!json_is_integer(ver) || json_integer_value(ver) != EMBED_VERSION)
    return snprintf(why, cap, "version is %s, not %d (an embed of another esmtrain version, "
                    "which recorded neither the model's nor the input's checksum)",
                    json_is_integer(ver) ? "another" : "missing", EMBED_VERSION), -1;
  if (!json_is_boolean(json_object_get(root, "complete")))
    return snprintf(why, cap, "'complete' is not true or false"), -1;
  if (!json_is_object(req)) return snprintf(why, cap, "'request' is not an object"), -1;
  if (!json_is_object(com)) return snprintf(why, cap, "'committed' is not an object"), -1;
  if (!json_is_object(st)) return snprintf(why, cap, "'stats' is not an object"), -1;
  if (!json_is_object(files)) return snprintf(why, cap, "'files' is not an object"), -1;
  const char *key;
  json_t *v;
  json_object_foreach(files, key, v) if (!json_is_string(v))
    return snprintf(why, cap, "files.%s is not a string", key), -1;
  if (count_field(com, "committed", "proteins", &s->proteins, why, cap) ||
      count_field(com, "committed", "per_tok_rows", &s->per_tok_rows, why, cap) ||
      /* recorded since attention maps; a record from before has none */
      (json_object_get(com, "attention_values") &&
       count_field(com, "committed", "attention_values", &s->attn_values, why, cap)) ||
      count_field(com, "committed", "ids_bytes", &s->ids_bytes, why, cap) ||
      count_field(st, "stats", "residues", &s->residues, why, cap) ||
      count_field(st, "stats", "truncated", &s->truncated, why, cap) ||
      count_field(st, "stats", "windowed", &s->windowed, why, cap) ||
      count_field(st, "stats", "unknown_residues", &s->unknown, why, cap) ||
      count_field(st, "stats", "empty", &s->empty, why, cap))
    return -1;
  const char *h = json_string_value(json_object_get(com, "ids_hash"));
  char *end = NULL;
  if (h) s->ids_hash = strtoull(h, &end, 16);
  if (!h || strlen(h) != 16 || *end)
    return snprintf(why, cap, "committed.ids_hash is not 16 hexadecimal digits"), -1;
  if (s->proteins > s->ids_bytes || s->truncated > s->proteins || s->windowed > s->proteins ||
      s->empty > s->proteins)
    return snprintf(why, cap, "its counts contradict each other (%llu proteins in %llu bytes "
                    "of ids)", (unsigned long long)s->proteins,
                    (unsigned long long)s->ids_bytes), -1;
  return 0;
}

esmt_status embed_record_check(esmt_embed_dir *d) {
  embed_stats *s = &d->s;
  memset(s, 0, sizeof *s);
  json_decref(d->recorded);
  d->recorded = NULL;
  d->staging_removed = 0;
  d->state = ESMT_EMBED_DIR_NEW;
  const char *out = d->out;
  struct stat sb;
  if (stat(out, &sb) != 0) return ESMT_OK;
  if (!S_ISDIR(sb.st_mode))
    return esmt_fail(ESMT_ERR_STATE, "-o %s exists and is not a directory: nothing was "
                     "changed; choose a new output directory", out);
  char path[4200];
  snprintf(path, sizeof path, "%s/embed.json", out);
  if (lstat(path, &sb) != 0) {
    if (entries(out) == 0) return ESMT_OK;
    return esmt_fail(ESMT_ERR_STATE, "-o %s is not empty and holds no embed output (no "
                     "embed.json): nothing was changed; choose a new or empty directory", out);
  }
  if (!S_ISREG(sb.st_mode))
    return esmt_fail(ESMT_ERR_STATE, "%s is %s, not the record embed writes: nothing was "
                     "changed; choose a new or empty directory", path,
                     S_ISLNK(sb.st_mode) ? "a symbolic link" : "not a regular file");
  char tmp[4300];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if (lstat(tmp, &sb) == 0 && !esmt_owned_file_is_own(tmp, NULL))
    return esmt_fail(ESMT_ERR_STATE, "%s is not a temporary record embed wrote (%s): nothing "
                     "was changed; move it away or choose a new output directory", tmp,
                     S_ISLNK(sb.st_mode) ? "a symbolic link" : "not a regular file of one link");
  json_error_t je;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return esmt_fail(ESMT_ERR_STATE, "-o %s is not empty and holds no embed output (%s: %s): "
                     "nothing was changed; choose a new or empty directory", out, path, je.text);
  esmt_status st = ESMT_ERR_STATE;
  char why[512], msg[4096];
  json_t *req = request_json(d);
  json_t *was = json_object_get(root, "request");
  const char *fmt = json_string_value(json_object_get(root, "format"));
  if (!json_is_object(root) || !fmt || strcmp(fmt, EMBED_FORMAT)) {
    esmt_fail(st, "%s is not an esmtrain embed record: nothing was changed", path);
  } else if (read_record(root, s, why, sizeof why)) {
    esmt_fail(st, "%s is damaged: %s. It cannot tell what %s holds: nothing was changed; "
              "embed into a new output directory", path, why, out);
  } else if (json_is_true(json_object_get(root, "complete"))) {
    const char *fmt_was = json_string_value(json_object_get(was, "format"));
    /* a run stopped after recording it complete, before the removal */
    d->staging_removed = fmt_was && !strcmp(fmt_was, "safetensors")
                             ? embed_arrays_remove_staging_left(d, json_object_get(root, "files"))
                             : 0;
    if (json_equal(was, req)) { /* the same embed again: done, as make would say */
      d->state = ESMT_EMBED_DIR_COMPLETE;
      st = ESMT_OK;
    } else {
      snprintf(msg, sizeof msg, "%s is complete already (%llu proteins) for another request: "
               "%s. What differs:", out, (unsigned long long)s->proteins,
               d->staging_removed
                   ? "only the staging .npy arrays an interrupted run left were removed"
                   : "nothing was changed");
      differs(was, req, msg, sizeof msg);
      esmt_fail(st, "%s. Choose a new output directory to embed again", msg);
    }
  } else if (s->proteins == 0) {
    /* an attempt that committed nothing (it failed on its input, or was
     * stopped at once): its files hold nothing, any request starts anew */
    memset(s, 0, sizeof *s);
    d->state = ESMT_EMBED_DIR_RESTART;
    st = ESMT_OK;
  } else if (json_equal(was, req)) {
    d->state = ESMT_EMBED_DIR_RESUME;
    st = ESMT_OK;
  } else {
    snprintf(msg, sizeof msg, "%s holds an unfinished embed of another request; nothing was "
             "changed. What differs:", out);
    differs(was, req, msg, sizeof msg);
    esmt_fail(st, "%s. Rerun with the original options, model and input to finish it, or "
              "choose a new output directory", msg);
  }
  if (d->state == ESMT_EMBED_DIR_RESUME || d->state == ESMT_EMBED_DIR_RESTART)
    d->recorded = json_incref(json_object_get(root, "files"));
  if (st) memset(s, 0, sizeof *s);
  json_decref(req);
  json_decref(root);
  return st;
}
