/* SPDX-License-Identifier: MIT */
/* Comparing a resume's settings with the run's (see resume_check.h). */
#define _XOPEN_SOURCE 700
#include "resume_check.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "safetensors.h"

/* Keys a resume may change: the updates stay what they were. Every other
 * key of the schema must be unchanged (model.preset is not compared: the
 * model.* sizes it fills are). */
static const struct { const char *key, *note; } k_allowed[] = {
    {"train.max_steps", NULL}, /* note made in max_steps_note() */
    {"train.log_every", "logging only"},
    {"train.eval_every", "evaluation does not change the updates"},
    {"train.eval_batches", "evaluation does not change the updates"},
    {"train.save_every", "checkpoints only"},
    {"train.keep_last", "checkpoint retention only"},
    {"train.max_time", "when the run stops, not what it computes"},
    {"train.out_dir", "the run directory was moved or renamed"},
    {"train.fast_dev_run", "a smoke test writes no checkpoint"},
    {"train.nonfinite", "only what happens on a non-finite loss"},
    {"train.seed", "it only initialises the weights, which the checkpoint provides"},
    {"data.prefetch", "how far ahead batches are read, not which"},
    /* the CPU backend's per-thread partial sums (layer-norm weight and bias
     * gradients, the gradient norm, the loss) follow the thread count */
    {"backend.threads", "the number of threads; sums split by thread round differently: close "
                        "to, not bit for bit, the continuation the run would have had"},
    {"backend.name", "another backend may round differently: close to, not bit for bit, "
                     "the continuation the run would have had"},
    {"backend.device_memory_limit", "a memory budget"},
    {"backend.deterministic", "the same updates up to the last bits of the attention gradient"},
    {"dist.bucket_size", "how gradients are grouped for the all-reduce"},
    {"dist.comm", "TCP and MPI sum in the same order: the same bits"},
    {"dist.force", "a one-rank group computes what one process does"},
    {"dist.zero", "every level saves the same whole moments (docs/distributed.md); ZeRO-2 sums "
                  "several micro-batches per update in another order: close to, not bit for "
                  "bit, the continuation the run would have had"},
    {"offload.optimizer", "where the optimizer state lives"},
    {"offload.recompute", "recomputation gives the same activations"},
    {"offload.pinned_memory_limit", "a memory budget"},
    {"offload.stream", "where gradients and weights live; with several micro-batches an update's "
                       "gradient sums round differently: close to, not bit for bit, the "
                       "continuation the run would have had"},
};

typedef struct flat {
  int n;
  char *key[128], *value[128];
} flat;

static void flat_free(flat *f) {
  for (int i = 0; i < f->n; i++) { free(f->key[i]); free(f->value[i]); }
  f->n = 0;
}

static const char *flat_get(const flat *f, const char *key) {
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->key[i], key)) return f->value[i];
  return NULL;
}

/* The "section: {key: value}" pairs of an emitted configuration as
 * "section.key" -> value, each value in the schema's canonical form (so
 * "4e-4" and "0.0004" compare equal). Anything else is skipped. */
static int flatten(const char *yaml, flat *f) {
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p)) return -1;
  yaml_parser_set_input_string(&p, (const unsigned char *)yaml, strlen(yaml));
  char section[64] = "", key[64] = "";
  int depth = 0, seq = 0, have_key[3] = {0, 0, 0}, ok = 0;
  for (int done = 0; !done;) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&p, &ev)) { ok = -1; break; }
    switch (ev.type) {
      case YAML_MAPPING_START_EVENT: if (!seq) depth++; break;
      case YAML_MAPPING_END_EVENT:
        if (!seq && depth > 0) { have_key[depth < 3 ? depth : 2] = 0; depth--; }
        if (depth == 1) have_key[1] = 0;
        break;
      case YAML_SEQUENCE_START_EVENT: seq++; break;
      case YAML_SEQUENCE_END_EVENT: if (seq) seq--; if (!seq && depth == 1) have_key[1] = 0; break;
      case YAML_SCALAR_EVENT: {
        const char *s = (const char *)ev.data.scalar.value;
        if (seq || depth < 1 || depth > 2) break;
        if (depth == 1) {
          if (have_key[1]) have_key[1] = 0; /* "key: scalar" at the top: not a section */
          else { snprintf(section, sizeof section, "%s", s); have_key[1] = 1; }
        } else if (!have_key[2]) {
          snprintf(key, sizeof key, "%s", s);
          have_key[2] = 1;
        } else {
          have_key[2] = 0;
          char full[160];
          snprintf(full, sizeof full, "%s.%s", section, key);
          int k = esmt_config_find(full);
          char *norm = NULL;
          if (k >= 0 && esmt_config_normalise(&esmt_config_keys[k], s, "", &norm) != ESMT_OK)
            norm = NULL;
          if (f->n < 128) {
            f->key[f->n] = strdup(full);
            f->value[f->n] = norm ? norm : strdup(s);
            if (f->key[f->n] && f->value[f->n]) f->n++;
            else { free(f->key[f->n]); free(f->value[f->n]); ok = -1; }
          } else {
            free(norm);
          }
        }
        break;
      }
      case YAML_STREAM_END_EVENT: done = 1; break;
      default: break;
    }
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&p);
  return ok;
}

static const char *allowed_note(const char *key) {
  for (size_t i = 0; i < sizeof k_allowed / sizeof k_allowed[0]; i++)
    if (!strcmp(k_allowed[i].key, key)) return k_allowed[i].note ? k_allowed[i].note : "";
  return NULL;
}

static void max_steps_note(const flat *now, int64_t step, const char *new_steps, char *out,
                           size_t cap) {
  const char *kind = flat_get(now, "schedule.kind");
  long long n = strtoll(new_steps, NULL, 10);
  if (n <= step)
    snprintf(out, cap, "the run is at step %lld already: nothing more is trained", (long long)step);
  else if (kind && strcmp(kind, "constant") != 0)
    snprintf(out, cap, "the %s learning-rate schedule is laid out over train.max_steps, so from "
             "step %lld on the learning rate follows the curve of a %lld-step run, not the one "
             "this run had", kind, (long long)step, n);
  else
    snprintf(out, cap, "a constant learning rate: only the length changes");
}

typedef struct report {
  char refused[900];
  size_t len;
  int nrefused, nallowed;
  struct { char *line; json_t *entry; } allowed[128];
} report;

static void refuse(report *r, const char *key, const char *was, const char *now, const char *why) {
  if (r->len + 8 < sizeof r->refused) {
    int n = snprintf(r->refused + r->len, sizeof r->refused - r->len, "%s%s: %s -> %s%s%s",
                     r->nrefused ? "; " : "", key, was, now, why ? " " : "", why ? why : "");
    r->len = n > 0 && r->len + (size_t)n < sizeof r->refused ? r->len + (size_t)n
                                                              : sizeof r->refused - 1;
  }
  r->nrefused++;
}

/* An allowed change, warned about and recorded only once the whole
 * comparison has found nothing to refuse. */
static void allow(report *r, const char *key, const char *was, const char *now, const char *note) {
  if (r->nallowed == (int)(sizeof r->allowed / sizeof r->allowed[0])) return;
  char *line = malloc(strlen(key) + strlen(was) + strlen(now) + strlen(note) + 64);
  if (!line) return;
  sprintf(line, "%s changed %s -> %s (allowed: %s)", key, was, now, note);
  json_t *e = json_pack("{s:s,s:s,s:s,s:s}", "key", key, "old", was, "new", now, "reason", note);
  if (!e) { free(line); return; }
  r->allowed[r->nallowed].line = line;
  r->allowed[r->nallowed++].entry = e;
}

static void report_free(report *r) {
  for (int i = 0; i < r->nallowed; i++) {
    free(r->allowed[i].line);
    json_decref(r->allowed[i].entry);
  }
}

/* The same directory (symbolic links and relative paths resolved)? */
static int same_dir(const char *a, const char *b) {
  char ra[PATH_MAX], rb[PATH_MAX];
  if (!strcmp(a, b)) return 1;
  return realpath(a, ra) && realpath(b, rb) && !strcmp(ra, rb);
}

/* data.train_dir: the same dataset at another path is allowed (its
 * manifest.json, which holds the shards' checksums, is unchanged). */
static void compare_dataset(const esmt_resume_run *was, const char *old_dir, const char *new_dir,
                            const esmt_resume_run *now, report *r) {
  if (same_dir(old_dir, new_dir)) return;
  uint32_t crc_old = 0;
  int known = was->manifest_crc >= 0;
  if (known) crc_old = (uint32_t)was->manifest_crc;
  else known = esmt_resume_manifest_crc(was->config, &crc_old) == 0;
  if (known && now->manifest_crc >= 0 && (uint32_t)now->manifest_crc == crc_old) {
    allow(r, "data.train_dir", old_dir, new_dir,
          "the same dataset (identical manifest.json) at another path");
    return;
  }
  refuse(r, "data.train_dir", old_dir, new_dir,
         known ? "(another dataset: its manifest.json differs)"
               : "(the run's dataset is gone, so it cannot be compared)");
}

esmt_status esmt_resume_check(const esmt_resume_run *was, const esmt_resume_run *now,
                              const char *ckpt_dir, int64_t step, const esmt_logger *lg,
                              json_t *changes) {
  report *r = calloc(1, sizeof *r); /* ~3 KiB: not on the stack */
  if (!r) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "comparing settings: out of memory");
  if (was->config && now->config) {
    flat fw = {0}, fn = {0};
    if (flatten(was->config, &fw) != 0 || flatten(now->config, &fn) != 0) {
      flat_free(&fw);
      flat_free(&fn);
      free(r);
      return esmt_fail(ESMT_ERR_FORMAT, "the configuration recorded in the checkpoint "
                       "(state.json trainer.config) is not readable YAML: it is damaged");
    }
    for (int i = 0; i < fn.n; i++) {
      const char *key = fn.key[i], *v_now = fn.value[i], *v_was = flat_get(&fw, key);
      if (!v_was || !strcmp(v_was, v_now) || !strcmp(key, "model.preset")) continue;
      if (!strcmp(key, "data.train_dir")) {
        compare_dataset(was, v_was, v_now, now, r);
        continue;
      }
      if (!strcmp(key, "train.out_dir") && same_dir(v_was, v_now)) continue;
      const char *note = allowed_note(key);
      char buf[256];
      if (note && !strcmp(key, "train.max_steps")) {
        max_steps_note(&fn, step, v_now, buf, sizeof buf);
        note = buf;
      }
      if (note) allow(r, key, v_was, v_now, note);
      else refuse(r, key, v_was, v_now, strncmp(key, "model.", 6) ? NULL : "(the model's shape)");
    }
    flat_free(&fw);
    flat_free(&fn);
  }
  if (was->world > 0 && now->world > 0 && was->world != now->world) {
    char w0[16], w1[16];
    snprintf(w0, sizeof w0, "%d", was->world);
    snprintf(w1, sizeof w1, "%d", now->world);
    flat fn = {0};
    const char *tpu = now->config && flatten(now->config, &fn) == 0
                          ? flat_get(&fn, "train.tokens_per_update") : NULL;
    if (tpu && strtoll(tpu, NULL, 10) > 0)
      allow(r, "world_size", w0, w1,
            "the ranks share one batch order whatever their number and the data cursor is "
            "its position, so the data goes on where it stopped, no batch seen twice or "
            "skipped; train.tokens_per_update is a global budget, so an update still "
            "averages over as many tokens, taken in rounds of one micro-batch per rank (an "
            "update can end a few batches from where the old size ended it when batches "
            "differ in tokens) and summed in another order: equal to a run at the new size "
            "within data-parallel rounding, not bit for bit");
    else
      refuse(r, "world_size", w0, w1,
             "(with train.tokens_per_update 0 each rank adds one micro-batch per update, so the "
             "tokens per update change with the world size)");
    flat_free(&fn);
  }
  esmt_status st = ESMT_OK;
  if (r->nrefused)
    st = esmt_fail(ESMT_ERR_CONFIG, "resuming with %d changed setting%s that an exact "
                   "continuation needs unchanged: %s. Resume with the run's settings (state.json "
                   "trainer.config holds them), or start a new run from its weights with "
                   "--init-from %s --out NEW_DIR", r->nrefused, r->nrefused > 1 ? "s" : "",
                   r->refused, ckpt_dir);
  for (int i = 0; !st && i < r->nallowed; i++) {
    esmt_logger_log(lg, ESMT_LOG_WARN, "resume at step %lld: %s; recorded in state.json "
                    "resume_changes", (long long)step, r->allowed[i].line);
    json_object_set_new(r->allowed[i].entry, "step", json_integer((json_int_t)step));
    if (changes) json_array_append(changes, r->allowed[i].entry);
  }
  report_free(r);
  free(r);
  return st;
}

int esmt_resume_manifest_crc(const char *config, uint32_t *crc) {
  if (!config) return -1;
  flat f = {0};
  int rc = -1;
  const char *dir = flatten(config, &f) == 0 ? flat_get(&f, "data.train_dir") : NULL;
  if (dir && *dir) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    rc = esmt_file_crc32(path, crc) == ESMT_OK ? 0 : -1;
  }
  flat_free(&f);
  return rc;
}
