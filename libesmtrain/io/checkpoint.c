/* SPDX-License-Identifier: MIT */
/* Checkpoint directories: atomic save, verification on load, retention.
 * See checkpoint.h for the layout. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "carried_tensors.h"
#include "checkpoint.h"
#include "checkpoint_task.h"
#include "optimizer.h"
#include "fs_util.h"
#include "input_file.h"
#include "json_input.h"
#include "model_record.h"
#include "safetensors.h"

#define PATH_CAP 4096

static int is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Write a small text file atomically (tmp + fsync + rename + dir fsync). */
static esmt_status write_small_file(const char *dir, const char *name, const char *text) {
  char tmp[PATH_CAP], final_path[PATH_CAP];
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp-%ld", dir, name, (long)getpid());
  snprintf(final_path, sizeof final_path, "%s/%s", dir, name);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return esmt_fail(ESMT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
  esmt_status st = esmt_write_all(fd, text, strlen(text), tmp);
  if (!st && fsync(fd) != 0) st = esmt_fail(ESMT_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
  if (close(fd) != 0 && !st) st = esmt_fail(ESMT_ERR_IO, "%s: close: %s", tmp, strerror(errno));
  if (!st && rename(tmp, final_path) != 0)
    st = esmt_fail(ESMT_ERR_IO, "%s: rename: %s", final_path, strerror(errno));
  if (st) unlink(tmp);
  else esmt_fsync_dir_published(dir);
  return st;
}

static esmt_status read_small_file(const char *path, char *out, size_t cap) {
  FILE *f = NULL;
  esmt_status st = esmt_fopen_input(path, "checkpoint pointer", &f);
  if (st) return st;
  size_t n = fread(out, 1, cap - 1, f);
  fclose(f);
  out[n] = '\0';
  out[strcspn(out, "\r\n")] = '\0';
  return ESMT_OK;
}

static json_t *file_entry(uint32_t crc, const char *path) {
  struct stat sb;
  long long size = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
  return json_pack("{s:I,s:I}", "crc32", (json_int_t)crc, "bytes", (json_int_t)size);
}

/* Keep the newest keep_last step-* dirs plus those `latest` and `best` name. */
static esmt_status prune(const char *ckdir, int keep_last) {
  if (keep_last <= 0) return ESMT_OK;
  char latest[256] = "", best[256] = "", path[PATH_CAP];
  snprintf(path, sizeof path, "%s/latest", ckdir);
  if (access(path, F_OK) == 0) read_small_file(path, latest, sizeof latest);
  snprintf(path, sizeof path, "%s/best", ckdir);
  if (access(path, F_OK) == 0) read_small_file(path, best, sizeof best);
  DIR *d = opendir(ckdir);
  if (!d) return esmt_fail(ESMT_ERR_IO, "%s: cannot list: %s", ckdir, strerror(errno));
  char **names = NULL;
  int n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (strncmp(de->d_name, ".tmp-", 5) == 0 || strncmp(de->d_name, ".old-", 5) == 0) {
      /* left by a process killed mid-save (never by this one: it renamed
       * or removed its own); they were never a valid checkpoint */
      char stale[PATH_CAP];
      snprintf(stale, sizeof stale, "%s/%s", ckdir, de->d_name);
      esmt_remove_tree(stale);
      continue;
    }
    if (strncmp(de->d_name, "step-", 5) != 0) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      char **nn = realloc(names, (size_t)cap * sizeof *nn);
      if (!nn) break;
      names = nn;
    }
    if ((names[n] = strdup(de->d_name))) n++;
  }
  closedir(d);
  /* Zero-padded step numbers: lexical order is step order. */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char *t = names[j]; names[j] = names[j - 1]; names[j - 1] = t;
    }
  esmt_status st = ESMT_OK;
  for (int i = 0; i < n - keep_last; i++) {
    if (strcmp(names[i], latest) == 0 || strcmp(names[i], best) == 0) continue;
    snprintf(path, sizeof path, "%s/%s", ckdir, names[i]);
    if (!st) st = esmt_remove_tree(path);
  }
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return st;
}

esmt_status esmt_checkpoint_write_files(esmt_model *m, const char *tmp, int64_t step,
                                        json_t *trainer, const float *host_w,
                                        const float *host_m, const float *host_v) {
  char path[PATH_CAP];
  esmt_status st = ESMT_OK;
  /* Moments first into a host buffer, then weights into the same buffer
   * size again: peak host memory is two flat buffers. */
  uint64_t n = m->layout.total;
  const int ns = esmt_optimizer_state_count(m->cfg.optimizer); /* AdamW 2, Lion 1 */
  float *a = malloc(n * sizeof *a), *b = (host_m || ns < 2) ? a : malloc(n * sizeof *b);
  uint32_t crc_model = 0, crc_opt = 0;
  if (!a || !b) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "saving checkpoint: out of host memory");
  if (!st && !host_w) st = esmt_flat_download(m, a, m->mem.master);
  if (!st) {
    snprintf(path, sizeof path, "%s/model.safetensors", tmp);
    const float *bufs[] = {host_w ? host_w : a};
    const char *pre[] = {""};
    esmt_st_meta meta[] = {{"format", "pt"}, {"producer", "esmtrain"}};
    st = esmt_write_flat(m, path, bufs, pre, 1, 1, meta, 2, &crc_model);
  }
  if (!st && !host_m) st = esmt_flat_download(m, a, m->mem.moment1);
  if (!st && !host_m && ns > 1) st = esmt_flat_download(m, b, m->mem.moment2);
  if (!st) {
    snprintf(path, sizeof path, "%s/optimizer.safetensors", tmp);
    /* the state buffers under the optimizer's names (optimizer.h) */
    const float *bufs[] = {host_m ? host_m : a, host_m ? host_v : b};
    const char *pre[] = {esmt_optimizer_state_prefix(m->cfg.optimizer, 0),
                         esmt_optimizer_state_prefix(m->cfg.optimizer, 1)};
    esmt_st_meta meta[] = {{"producer", "esmtrain"}};
    st = esmt_write_flat(m, path, bufs, pre, ns, 0, meta, 1, &crc_opt);
  }
  if (b != a) free(b);
  free(a);
  if (!st) {
    char mp[PATH_CAP], op[PATH_CAP];
    snprintf(mp, sizeof mp, "%s/model.safetensors", tmp);
    snprintf(op, sizeof op, "%s/optimizer.safetensors", tmp);
    json_t *root = json_pack("{s:s,s:i,s:I,s:{s:o,s:o},s:s,s:O}", "format", ESMT_CKPT_FORMAT,
                             "version", ESMT_CKPT_VERSION, "step", (json_int_t)step, "files",
                             "model.safetensors", file_entry(crc_model, mp),
                             "optimizer.safetensors", file_entry(crc_opt, op), "optimizer",
                             esmt_optimizer_name(m->cfg.optimizer), "trainer", trainer);
    if (root) st = esmt_checkpoint_task_add(m, root);
    char *text = root && !st ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!text && !st) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "saving checkpoint: state.json");
    else if (!st) st = write_small_file(tmp, "state.json", text);
    free(text);
  }
  if (!st) st = esmt_fsync_dir(tmp);
  return st;
}

esmt_status esmt_checkpoint_save(esmt_model *m, const char *run_dir, int64_t step,
                                 const char *trainer_json, int keep_last, char *out_dir,
                                 size_t cap) {
  return esmt_checkpoint_save_with(m, run_dir, step, trainer_json, keep_last, NULL, NULL, NULL,
                                   out_dir, cap);
}

esmt_status esmt_checkpoint_save_with(esmt_model *m, const char *run_dir, int64_t step,
                                      const char *trainer_json, int keep_last,
                                      const float *host_w, const float *host_m,
                                      const float *host_v, char *out_dir, size_t cap) {
  /* a frozen prefix (env.opt_lo) holds no moments; anything narrower is a shard */
  if (!host_m && (m->mem.opt_lo != m->mem.env.opt_lo || m->mem.opt_hi != m->layout.total))
    return esmt_fail(ESMT_ERR_STATE, "saving checkpoint: this rank holds a ZeRO-1 shard of the "
                     "optimizer state; gather the moments first");
  char ckdir[PATH_CAP], tmp[PATH_CAP], final_dir[PATH_CAP], path[PATH_CAP], name[64];
  snprintf(ckdir, sizeof ckdir, "%s/checkpoints", run_dir);
  esmt_status st = esmt_mkdir_p(ckdir);
  if (st) return esmt_fail_prefix(st, "saving checkpoint: ");
  json_error_t jerr;
  json_t *trainer = json_loads(trainer_json ? trainer_json : "{}", 0, &jerr);
  if (!trainer) return esmt_fail(ESMT_ERR_INTERNAL, "saving checkpoint: bad trainer state JSON");
  snprintf(name, sizeof name, "step-%08lld", (long long)step);
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%ld", ckdir, name, (long)getpid());
  snprintf(final_dir, sizeof final_dir, "%s/%s", ckdir, name);
  esmt_remove_tree(tmp);
  if (mkdir(tmp, 0755) != 0) {
    json_decref(trainer);
    return esmt_fail(ESMT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
  }

  st = esmt_checkpoint_write_files(m, tmp, step, trainer, host_w, host_m, host_v);
  json_decref(trainer);
  if (!st && is_dir(final_dir)) {
    /* Re-saving a step: move the old one aside, never delete it first. */
    char old[PATH_CAP];
    snprintf(old, sizeof old, "%s/.old-%s-%ld", ckdir, name, (long)getpid());
    if (rename(final_dir, old) != 0)
      st = esmt_fail(ESMT_ERR_IO, "%s: rename: %s", final_dir, strerror(errno));
    else if (rename(tmp, final_dir) != 0) {
      st = esmt_fail(ESMT_ERR_IO, "%s: rename: %s", final_dir, strerror(errno));
      rename(old, final_dir);
    } else {
      esmt_remove_tree(old);
    }
  } else if (!st && rename(tmp, final_dir) != 0) {
    st = esmt_fail(ESMT_ERR_IO, "%s: rename: %s", final_dir, strerror(errno));
  }
  if (!st) st = esmt_fsync_dir(ckdir);
  if (!st) st = write_small_file(ckdir, "latest", name);
  if (st) {
    esmt_cleanup_tree(tmp);
    char prev[256] = "";
    snprintf(path, sizeof path, "%s/latest", ckdir);
    if (access(path, F_OK) == 0) read_small_file(path, prev, sizeof prev);
    esmt_fail_prefix(st, "saving checkpoint %s: ", name);
    return prev[0] ? esmt_fail_append(st, "; the previous checkpoint, %s, is intact", prev)
                   : esmt_fail_append(st, "; no checkpoint of this run existed before");
  }
  if (out_dir) snprintf(out_dir, cap, "%s", final_dir);
  return prune(ckdir, keep_last);
}

esmt_status esmt_checkpoint_mark_best(const char *run_dir, const char *ckpt_dir) {
  char ckdir[PATH_CAP];
  snprintf(ckdir, sizeof ckdir, "%s/checkpoints", run_dir);
  const char *base = strrchr(ckpt_dir, '/');
  return write_small_file(ckdir, "best", base ? base + 1 : ckpt_dir);
}

/* Parse state.json, check what it records (esmt_checkpoint_check_state)
 * and each file's size and crc32. */
static esmt_status verify(const char *ckpt_dir, json_t **root_out) {
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/state.json", ckpt_dir);
  json_t *root = NULL;
  esmt_status st = esmt_json_load_input(path, "checkpoint state (state.json)", &root);
  if (st) return st;
  st = esmt_checkpoint_check_state(root, ckpt_dir);
  json_t *files = json_object_get(root, "files");
  const char *fname;
  json_t *entry;
  if (!st) json_object_foreach(files, fname, entry) {
    char fp[PATH_CAP];
    snprintf(fp, sizeof fp, "%s/%s", ckpt_dir, fname);
    struct stat sb;
    json_int_t want_bytes = json_integer_value(json_object_get(entry, "bytes"));
    json_int_t want_crc = json_integer_value(json_object_get(entry, "crc32"));
    if (stat(fp, &sb) != 0) { st = esmt_fail(ESMT_ERR_IO, "%s: missing", fp); break; }
    if ((st = esmt_check_regular_input(fp, "checkpoint file"))) break;
    if ((json_int_t)sb.st_size != want_bytes) {
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: %lld bytes, state.json recorded %lld (truncated or "
                     "replaced)", fp, (long long)sb.st_size, (long long)want_bytes);
      break;
    }
    uint32_t crc = 0;
    if ((st = esmt_file_crc32(fp, &crc))) break;
    if ((json_int_t)crc != want_crc) {
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: checksum mismatch (crc32 %08x, recorded %08llx): the "
                     "file is corrupt", fp, crc, (unsigned long long)want_crc);
      break;
    }
  }
  if (st) json_decref(root);
  else *root_out = root;
  return st;
}

esmt_status esmt_checkpoint_load(esmt_model *m, const char *ckpt_dir, int with_optimizer,
                                 char **trainer_json) {
  json_t *root = NULL;
  esmt_status st = verify(ckpt_dir, &root);
  if (st) return esmt_fail_prefix(st, "checkpoint refused: ");
  char state_path[PATH_CAP];
  snprintf(state_path, sizeof state_path, "%s/state.json", ckpt_dir);
  if ((st = esmt_checkpoint_task_check(root, state_path, m))) {
    json_decref(root);
    return esmt_fail_prefix(st, "checkpoint refused: ");
  }
  uint64_t n = m->layout.total;
  float *w = malloc(n * sizeof *w), *mm = NULL, *vv = NULL;
  if (!w) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "loading checkpoint: out of host memory");
  char path[PATH_CAP];
  esmt_st_file f;
  esmt_carried_tensor *carried = NULL; /* what the model keeps untrained */
  int nc = 0;
  if (!st) {
    snprintf(path, sizeof path, "%s/model.safetensors", ckpt_dir);
    st = esmt_st_open(path, &f);
    if (!st) {
      st = esmt_read_flat(m, &f, path, "", w, 1);
      if (!st) st = esmt_carried_collect(m, &f, path, &carried, &nc);
      esmt_st_close(&f);
    }
  }
  /* The optimizer whose state the checkpoint holds ("adamw" when a
   * checkpoint from before the field names none). */
  esmt_optimizer_kind kind = ESMT_OPTIMIZER_ADAMW;
  json_t *jk = json_object_get(root, "optimizer");
  if (!st && jk && (!json_is_string(jk) || esmt_optimizer_from_name(json_string_value(jk), &kind)))
    st = esmt_fail(ESMT_ERR_FORMAT, "%s/state.json: optimizer %s is not one this library knows "
                   "(adamw, lion)", ckpt_dir, json_is_string(jk) ? json_string_value(jk) : "(not a name)");
  if (!st && with_optimizer && m->cfg.optimizer != kind)
    st = esmt_fail(ESMT_ERR_STATE, "%s holds %s state, and this model steps with %s", ckpt_dir,
                   esmt_optimizer_name(kind), esmt_optimizer_name(m->cfg.optimizer));
  if (!st && with_optimizer) {
    const int ns = esmt_optimizer_state_count(kind);
    mm = malloc(n * sizeof *mm);
    if (ns > 1) vv = malloc(n * sizeof *vv);
    if (!mm || (ns > 1 && !vv)) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "loading checkpoint: out of memory");
    snprintf(path, sizeof path, "%s/optimizer.safetensors", ckpt_dir);
    if (!st) st = esmt_st_open(path, &f);
    if (!st) {
      st = esmt_read_flat(m, &f, path, esmt_optimizer_state_prefix(kind, 0), mm, 0);
      if (!st && vv) st = esmt_read_flat(m, &f, path, esmt_optimizer_state_prefix(kind, 1), vv, 0);
      esmt_st_close(&f);
    }
  }
  char *tj = NULL;
  if (!st && trainer_json) {
    tj = json_dumps(json_object_get(root, "trainer"), JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!tj) st = esmt_fail(ESMT_ERR_FORMAT, "%s/state.json: no trainer state", ckpt_dir);
  }
  /* Everything verified: only now touch the model. */
  if (!st) st = esmt_flat_upload(m, w, m->mem.master);
  if (!st) { /* the checkpoint's rotary frequencies, or the computed ones */
    st = esmt_carried_install(m, carried, nc);
    carried = NULL;
  }
  if (!st && with_optimizer) st = esmt_flat_upload(m, mm, m->mem.moment1);
  if (!st && vv) st = esmt_flat_upload(m, vv, m->mem.moment2);
  if (!st) st = esmt_checkpoint_task_restore_names(m, root);
  if (!st) m->have_forward = 0;
  esmt_carried_free(carried, nc);
  free(w);
  free(mm);
  free(vv);
  json_decref(root);
  if (st) {
    free(tj);
    return esmt_fail_prefix(st, "loading checkpoint: ");
  }
  if (trainer_json) *trainer_json = tj;
  return ESMT_OK;
}

esmt_status esmt_model_create_from_checkpoint(esmt_context *ctx, const char *spec,
                                              esmt_model **out) {
  const char *fn = "esmt_model_create_from_checkpoint";
  ESMT_CHECK_ARG(out, fn, "out is NULL");
  *out = NULL;
  ESMT_CHECK_ARG(ctx && spec, fn, "ctx and checkpoint must not be NULL");
  char dir[PATH_CAP], path[PATH_CAP];
  esmt_status st = esmt_checkpoint_resolve(spec, dir, sizeof dir);
  if (st) return esmt_fail_prefix(st, "%s: ", fn);
  snprintf(path, sizeof path, "%s/state.json", dir);
  json_t *root = NULL;
  if ((st = esmt_json_load_input(path, "checkpoint state (state.json)", &root)))
    return esmt_fail_prefix(st, "%s: ", fn);
  json_t *model = json_object_get(json_object_get(root, "trainer"), "model");
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  const char *keys[] = {"num_layers", "hidden_size", "num_heads", "ffn_size", "max_positions"};
  int *dst[] = {&mc.num_layers, &mc.hidden_size, &mc.num_heads, &mc.ffn_size, &mc.max_positions};
  for (int i = 0; i < 5 && !st; i++) {
    json_t *v = json_object_get(model, keys[i]);
    if (!json_is_integer(v))
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: %s: the model shape (trainer.model.%s) is missing", fn,
                     path, keys[i]);
    else if (json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
      st = esmt_fail(ESMT_ERR_FORMAT, "%s: %s: trainer.model.%s is %lld, outside 1..%d: the "
                     "file is damaged", fn, path, keys[i], (long long)json_integer_value(v),
                     1 << 24);
    else *dst[i] = (int)json_integer_value(v);
  }
  json_t *eps = json_object_get(model, "layer_norm_eps");
  if (json_is_number(eps)) mc.layer_norm_eps = (float)json_number_value(eps);
  if (!st) st = esmt_model_record_read(model, path, &mc); /* the head and LoRA, if any */
  json_decref(root);
  if (st) return st;
  esmt_model *m = NULL;
  if ((st = esmt_model_create(ctx, &mc, 0, &m))) return esmt_fail_prefix(st, "%s: ", fn);
  if ((st = esmt_checkpoint_load(m, dir, 0, NULL))) {
    esmt_model_destroy(m);
    return esmt_fail_prefix(st, "%s: ", fn);
  }
  *out = m;
  return ESMT_OK;
}
