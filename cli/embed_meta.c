/* embed.json (embed.h): the request that made an output directory, what
 * is committed so far, and whether it is complete. Written as a temporary
 * file, fsync'd and renamed, after the arrays it counts are committed: a
 * crash leaves the previous record, and the arrays are cut back to it on
 * resume. */
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

#include "embed.h"

#define EMBED_FORMAT "esmtrain-embeddings"
#define EMBED_VERSION 1

static const char *long_name(int p) { return p == EMBED_WINDOWS ? "windows" : "truncate"; }

static int64_t input_bytes(const char *path) {
  struct stat sb;
  return strcmp(path, "-") && stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? (int64_t)sb.st_size
                                                                           : -1;
}

/* The fields that must be equal for a resume to continue the same arrays. */
static json_t *request_json(const embed_options *o, const embed_model_info *mi) {
  json_t *layers = json_array(), *inc = json_array();
  for (int j = 0; j < o->nl; j++) json_array_append_new(layers, json_integer(o->layers[j]));
  if (o->include & EMBED_MEAN) json_array_append_new(inc, json_string("mean"));
  if (o->include & EMBED_PER_TOK) json_array_append_new(inc, json_string("per_tok"));
  if (o->include & EMBED_CLS) json_array_append_new(inc, json_string("cls"));
  char *model = realpath(o->model, NULL), *input = strcmp(o->input, "-") ? realpath(o->input, NULL)
                                                                          : NULL;
  json_t *r = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i,s:s,s:s,s:I,s:o,s:o,s:s,s:i,s:i,s:s}", "model",
                        model ? model : o->model, "model_kind", mi->kind, "backend", mi->backend,
                        "model_layers", mi->layers, "hidden", mi->hidden, "max_positions",
                        mi->max_positions, "input", input ? input : o->input, "split",
                        o->split ? o->split : "train", "input_bytes",
                        (json_int_t)input_bytes(o->input), "layers", layers, "include", inc,
                        "long", long_name(o->long_policy), "window", o->window, "stride",
                        o->long_policy == EMBED_WINDOWS ? o->stride : 0, "format",
                        o->safetensors ? "safetensors" : "npy");
  free(model);
  free(input);
  return r;
}

int embed_meta_write(const embed_options *o, const embed_model_info *mi, const embed_stats *s,
                     int complete, double seconds) {
  char hash[17];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)s->ids_hash);
  json_t *root = json_pack(
      "{s:s,s:i,s:b,s:o,s:{s:I,s:I,s:I,s:s},s:{s:I,s:I,s:I,s:I,s:I,s:f},s:s}", "format",
      EMBED_FORMAT, "version", EMBED_VERSION, "complete", complete, "request",
      request_json(o, mi), "committed", "proteins", (json_int_t)s->proteins, "per_tok_rows",
      (json_int_t)s->per_tok_rows, "ids_bytes", (json_int_t)s->ids_bytes, "ids_hash", hash,
      "stats", "residues", (json_int_t)s->residues, "truncated", (json_int_t)s->truncated,
      "windowed", (json_int_t)s->windowed, "unknown_residues", (json_int_t)s->unknown, "empty",
      (json_int_t)s->empty, "seconds", seconds, "note",
      "arrays: lengths [N] residues per protein; mean/cls.layer<L> [N, hidden]; "
      "per_tok.layer<L> [rows, hidden], protein k's rows per_tok.offsets[k]:[k+1] (cls/eos "
      "excluded); ids.txt one id per line; long proteins: 'truncate' keeps the first 'window' "
      "residues, 'windows' averages overlapping windows of 'window' residues 'stride' apart");
  char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
  json_decref(root);
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/embed.json", o->out);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = text ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
  const size_t n = text ? strlen(text) : 0;
  int bad = fd < 0 || write(fd, text, n) != (ssize_t)n || write(fd, "\n", 1) != 1 ||
            fsync(fd) != 0;
  const int err = errno;
  if (fd >= 0) close(fd);
  if (!bad) bad = rename(tmp, path) != 0;
  free(text);
  if (bad) {
    fprintf(stderr, "esmtrain-example: embed: cannot write %s: %s\n", path, strerror(err));
    unlink(tmp);
    return -1;
  }
  int dfd = open(o->out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    if (fsync(dfd) != 0) { /* the rename is durable on most file systems anyway */ }
    close(dfd);
  }
  return 0;
}

/* Entries of dir other than . .. and run.lock; -1 when it cannot be read. */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "run.lock");
  closedir(d);
  return n;
}

static int differs(json_t *was, json_t *now) {
  int n = 0;
  const char *key;
  json_t *v;
  json_object_foreach(now, key, v) {
    json_t *w = json_object_get(was, key);
    if (w && json_equal(w, v)) continue;
    char *a = w ? json_dumps(w, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    char *b = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    fprintf(stderr, "  %s: was %s, now %s\n", key, a ? a : "(absent)", b ? b : "?");
    free(a);
    free(b);
    n++;
  }
  return n;
}

int embed_meta_check(const embed_options *o, const embed_model_info *mi, embed_stats *s,
                     int say) {
  memset(s, 0, sizeof *s);
  struct stat sb;
  if (stat(o->out, &sb) != 0) return 0;
  if (!S_ISDIR(sb.st_mode)) {
    fprintf(stderr, "esmtrain-example: embed: -o %s exists and is not a directory: nothing was "
            "changed; choose a new output directory\n", o->out);
    return -1;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/embed.json", o->out);
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  if (!root) {
    if (entries(o->out) == 0) return 0;
    fprintf(stderr, "esmtrain-example: embed: -o %s is not empty and holds no embed output "
            "(%s): nothing was changed; choose a new or empty directory\n", o->out,
            access(path, F_OK) == 0 ? je.text : "no embed.json");
    return -1;
  }
  int rc = -1;
  json_t *req = request_json(o, mi);
  const char *fmt = json_string_value(json_object_get(root, "format"));
  json_t *com = json_object_get(root, "committed");
  if (!fmt || strcmp(fmt, EMBED_FORMAT) || !json_is_object(com)) {
    fprintf(stderr, "esmtrain-example: embed: %s is not an esmtrain embed record: nothing was "
            "changed\n", path);
  } else if (json_is_true(json_object_get(root, "complete"))) {
    fprintf(stderr, "esmtrain-example: embed: %s is complete already (%lld proteins): nothing "
            "was changed; choose a new output directory to embed again\n", o->out,
            (long long)json_integer_value(json_object_get(com, "proteins")));
  } else {
    json_t *was = json_object_get(root, "request");
    if (!json_is_object(was) || json_equal(was, req)) {
      s->proteins = (uint64_t)json_integer_value(json_object_get(com, "proteins"));
      s->per_tok_rows = (uint64_t)json_integer_value(json_object_get(com, "per_tok_rows"));
      s->ids_bytes = (uint64_t)json_integer_value(json_object_get(com, "ids_bytes"));
      const char *h = json_string_value(json_object_get(com, "ids_hash"));
      s->ids_hash = h ? strtoull(h, NULL, 16) : 0;
      json_t *st = json_object_get(root, "stats");
      s->residues = (uint64_t)json_integer_value(json_object_get(st, "residues"));
      s->truncated = (uint64_t)json_integer_value(json_object_get(st, "truncated"));
      s->windowed = (uint64_t)json_integer_value(json_object_get(st, "windowed"));
      s->unknown = (uint64_t)json_integer_value(json_object_get(st, "unknown_residues"));
      s->empty = (uint64_t)json_integer_value(json_object_get(st, "empty"));
      if (say)
        fprintf(stderr, "esmtrain-example: embed: %s holds an unfinished embed of the same "
                "request: resuming after %llu proteins\n", o->out,
                (unsigned long long)s->proteins);
      rc = 1;
    } else {
      fprintf(stderr, "esmtrain-example: embed: %s holds an unfinished embed of another "
              "request; nothing was changed. What differs:\n", o->out);
      differs(was, req);
      fprintf(stderr, "Rerun with the original options to finish it, or choose a new output "
              "directory\n");
    }
  }
  json_decref(req);
  json_decref(root);
  return rc;
}
