/* SPDX-License-Identifier: MIT */
/* esmt_labelled_loader (finetune.h): a split of a labelled table as
 * right-padded micro-batches with the head's targets (sequence heads) or
 * per-position labels (residue heads), in table order or a seeded order
 * per epoch that a cursor (epoch, position) restores exactly. Also the
 * table's accessors and its release. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cluster_map.h"
#include "labelled.h"

struct esmt_labelled_loader {
  const esmt_labelled *d;
  int rows, shuffle, epochs;
  uint64_t seed;
  uint64_t *members;        /* the split's rows, table order */
  uint64_t *order;          /* this epoch's order of `members` */
  uint64_t n, epoch, pos, ordered_epoch;
  uint64_t last_epoch;      /* of the batch returned last */
  int32_t *tokens, *labels;
  float *targets;
  size_t tok_cap;
  float *class_weights;     /* [num_labels] or NULL (esmt_labelled_loader_set_class_weights) */
};

typedef struct keyed {
  uint64_t key, row;
} keyed;

static int by_key(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  return x->key != y->key ? (x->key < y->key ? -1 : 1) : (x->row > y->row) - (x->row < y->row);
}

/* The epoch's order: by a hash of (seed, epoch, row) when shuffling. */
static esmt_status order_epoch(esmt_labelled_loader *L) {
  memcpy(L->order, L->members, L->n * sizeof *L->order);
  L->ordered_epoch = L->epoch;
  if (!L->shuffle) return ESMT_OK;
  keyed *k = malloc(L->n * sizeof *k);
  if (!k) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "labelled loader: out of memory");
  for (uint64_t i = 0; i < L->n; i++) {
    const uint64_t in[3] = {L->seed, L->epoch, L->members[i]};
    k[i] = (keyed){esmt_id_hash_n((const char *)in, sizeof in), L->members[i]};
  }
  qsort(k, L->n, sizeof *k, by_key);
  for (uint64_t i = 0; i < L->n; i++) L->order[i] = k[i].row;
  free(k);
  return ESMT_OK;
}

static esmt_status loader_next(void *user, esmt_batch *b) {
  esmt_labelled_loader *L = user;
  const esmt_labelled *d = L->d;
  if (L->pos >= L->n) {
    L->epoch++;
    L->pos = 0;
  }
  if (!L->n || (L->epochs > 0 && L->epoch >= (uint64_t)L->epochs))
    return esmt_fail(ESMT_ERR_STATE, "the labelled split is exhausted");
  esmt_status st = L->ordered_epoch == L->epoch ? ESMT_OK : order_epoch(L);
  if (st) return st;
  const uint64_t first = L->pos, end = L->pos + (uint64_t)L->rows < L->n
                                             ? L->pos + (uint64_t)L->rows : L->n;
  const int B = (int)(end - first);
  int T = 0;
  for (uint64_t i = first; i < end; i++) {
    const uint64_t r = L->order[i], len = d->offset[r + 1] - d->offset[r];
    if ((int)len + 2 > T) T = (int)len + 2;
  }
  const size_t n = (size_t)B * (size_t)T;
  const int K = d->num_labels;
  if (n > L->tok_cap) {
    int32_t *tok = realloc(L->tokens, n * sizeof *tok);
    if (tok) L->tokens = tok;
    int32_t *lab = realloc(L->labels, n * sizeof *lab);
    if (lab) L->labels = lab;
    if (!tok || !lab) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "labelled loader: out of memory");
    L->tok_cap = n;
  }
  for (int row = 0; row < B; row++) {
    const uint64_t r = L->order[first + (uint64_t)row], at = d->offset[r];
    const int len = (int)(d->offset[r + 1] - at);
    int32_t *tok = L->tokens + (size_t)row * T, *lab = L->labels + (size_t)row * T;
    tok[0] = ESMT_TOKEN_CLS;
    memcpy(tok + 1, d->residues + at, (size_t)len * sizeof *tok);
    tok[len + 1] = ESMT_TOKEN_EOS;
    for (int k = len + 2; k < T; k++) tok[k] = ESMT_TOKEN_PAD;
    for (int k = 0; k < T; k++)
      lab[k] = d->task == ESMT_HEAD_RESIDUE_CLASS && k >= 1 && k <= len ? d->classes[at + k - 1]
                                                                         : ESMT_LABEL_IGNORE;
    if (d->task == ESMT_HEAD_SEQ_CLASS) L->targets[row] = (float)d->classes[r];
    else if (d->task != ESMT_HEAD_RESIDUE_CLASS)
      memcpy(L->targets + (size_t)row * K, d->targets + r * (uint64_t)K, (size_t)K * sizeof(float));
  }
  L->pos = end;
  L->last_epoch = L->epoch;
  esmt_batch out = ESMT_BATCH_INIT;
  out.batch = B;
  out.seq_len = T;
  out.tokens = L->tokens;
  out.labels = d->task == ESMT_HEAD_RESIDUE_CLASS ? L->labels : NULL;
  out.targets = d->task == ESMT_HEAD_RESIDUE_CLASS ? NULL : L->targets;
  out.class_weights = L->class_weights;
  /* fields up to the caller's size */
  const uint32_t size = b->struct_size && b->struct_size < sizeof out ? b->struct_size
                                                                      : (uint32_t)sizeof out;
  memcpy(b, &out, size);
  b->struct_size = size;
  return ESMT_OK;
}

static esmt_status loader_reset(void *user) {
  esmt_labelled_loader *L = user;
  L->epoch = L->pos = L->last_epoch = 0;
  return ESMT_OK;
}

static esmt_status loader_save(void *user, char *buf, size_t cap) {
  const esmt_labelled_loader *L = user;
  const int n = snprintf(buf, cap, "{\"epoch\":%llu,\"position\":%llu}",
                         (unsigned long long)L->epoch, (unsigned long long)L->pos);
  if (n < 0 || (size_t)n >= cap)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "labelled loader: a cursor buffer of %zu bytes "
                     "is too small", cap);
  return ESMT_OK;
}

static esmt_status loader_restore(void *user, const char *json) {
  esmt_labelled_loader *L = user;
  unsigned long long epoch, pos;
  if (!json || sscanf(json, " {\"epoch\":%llu,\"position\":%llu}", &epoch, &pos) != 2 ||
      pos > L->n)
    return esmt_fail(ESMT_ERR_FORMAT, "labelled loader: the cursor %s is not one this split "
                     "of %llu rows wrote", json ? json : "(null)", (unsigned long long)L->n);
  L->epoch = L->last_epoch = epoch;
  L->pos = pos;
  return ESMT_OK;
}

static esmt_status loader_epoch(void *user, uint64_t *epoch) {
  *epoch = ((const esmt_labelled_loader *)user)->last_epoch;
  return ESMT_OK;
}

esmt_status esmt_labelled_loader_create(const esmt_labelled *d, esmt_labelled_split split,
                                        int rows, int shuffle, int epochs, uint64_t seed,
                                        esmt_labelled_loader **out) {
  const char *fn = "esmt_labelled_loader_create";
  ESMT_CHECK_ARG(out, fn, "out must not be NULL");
  *out = NULL;
  ESMT_CHECK_ARG(d && rows > 0 && epochs >= 0 && split >= ESMT_LABELLED_TRAIN &&
                 split <= ESMT_LABELLED_TEST, fn,
                 "a table, rows > 0, epochs >= 0 and a split are needed");
  esmt_labelled_loader *L = calloc(1, sizeof *L);
  const uint64_t n = d->count[split];
  const int per_row = d->task == ESMT_HEAD_SEQ_CLASS ? 1 : d->num_labels;
  if (L) {
    L->members = malloc((n + 1) * sizeof *L->members);
    L->order = malloc((n + 1) * sizeof *L->order);
    L->targets = malloc((size_t)rows * (size_t)per_row * sizeof *L->targets);
  }
  if (!L || !L->members || !L->order || !L->targets) {
    esmt_labelled_loader_destroy(L);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  for (uint64_t r = 0; r < d->rows; r++)
    if (d->split[r] == split) L->members[L->n++] = r;
  L->d = d;
  L->rows = rows;
  L->shuffle = shuffle;
  L->epochs = epochs;
  L->seed = seed;
  L->ordered_epoch = UINT64_MAX;
  *out = L;
  return ESMT_OK;
}

void esmt_labelled_loader_destroy(esmt_labelled_loader *L) {
  if (!L) return;
  free(L->members);
  free(L->order);
  free(L->tokens);
  free(L->labels);
  free(L->targets);
  free(L->class_weights);
  free(L);
}

esmt_status esmt_labelled_loader_set_class_weights(esmt_labelled_loader *L, const float *w,
                                                   int count) {
  const char *fn = "esmt_labelled_loader_set_class_weights";
  ESMT_CHECK_ARG(L && (w || count == 0), fn, "loader and weights must not be NULL");
  if (count && (L->d->task != ESMT_HEAD_SEQ_CLASS || count != L->d->num_labels))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %d weights: class weights are one per class "
                     "of a seq-class table (%d here)", fn, count,
                     L->d->task == ESMT_HEAD_SEQ_CLASS ? L->d->num_labels : 0);
  float *copy = count ? malloc((size_t)count * sizeof *copy) : NULL;
  if (count && !copy) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  for (int k = 0; k < count; k++) {
    if (!(w[k] >= 0.0f) || !isfinite(w[k])) {
      free(copy);
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: weight %d is %g (need a finite value "
                       ">= 0)", fn, k, (double)w[k]);
    }
    copy[k] = w[k];
  }
  free(L->class_weights);
  L->class_weights = copy;
  return ESMT_OK;
}

esmt_status esmt_labelled_loader_as_source(esmt_labelled_loader *L, esmt_batch_source *s) {
  const char *fn = "esmt_labelled_loader_as_source";
  ESMT_CHECK_ARG(L && s, fn, "loader and source must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_batch_source", s->struct_size, sizeof *s);
  if (st) return st;
  esmt_batch_source src = ESMT_BATCH_SOURCE_INIT;
  src.user = L;
  src.next = loader_next;
  src.reset = loader_reset;
  src.save_cursor = loader_save;
  src.restore_cursor = loader_restore;
  src.epoch = loader_epoch;
  memcpy(s, &src, s->struct_size < sizeof src ? s->struct_size : sizeof src);
  return ESMT_OK;
}

uint64_t esmt_labelled_count(const esmt_labelled *d, esmt_labelled_split split) {
  return d && split >= ESMT_LABELLED_TRAIN && split <= ESMT_LABELLED_TEST ? d->count[split] : 0;
}

int esmt_labelled_num_labels(const esmt_labelled *d) { return d ? d->num_labels : 0; }

const char *esmt_labelled_label_name(const esmt_labelled *d, int index) {
  return d && index >= 0 && index < d->num_labels ? d->names[index] : NULL;
}

esmt_status esmt_labelled_label_json(const esmt_labelled *d, char *buf, size_t cap) {
  ESMT_CHECK_ARG(d && buf && cap > 0, "esmt_labelled_label_json",
                 "table and buffer must not be NULL");
  json_t *names = json_array();
  for (int k = 0; names && k < d->num_labels; k++)
    if (json_array_append_new(names, json_string(d->names[k]))) {
      json_decref(names);
      names = NULL;
    }
  char *text = names ? json_dumps(names, JSON_COMPACT) : NULL;
  json_decref(names);
  if (!text) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_labelled_label_json: out of memory");
  const size_t n = strlen(text);
  if (n < cap) memcpy(buf, text, n + 1);
  free(text);
  if (n >= cap)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_labelled_label_json: the %d label names "
                     "take %zu bytes, the buffer %zu", d->num_labels, n + 1, cap);
  return ESMT_OK;
}

void esmt_labelled_free(esmt_labelled *d) {
  if (!d) return;
  for (int k = 0; d->names && k < d->num_labels; k++) free(d->names[k]);
  free(d->names);
  free(d->split);
  free(d->offset);
  free(d->residues);
  free(d->classes);
  free(d->targets);
  free(d);
}
