/* SPDX-License-Identifier: MIT */
/* `contacts MODEL INPUT --train-head PAIRS -o OUT`: the contact head
 * fitted on INPUT's proteins and the contacts listed in PAIRS
 * (esmt_contact_pairs_read, esmt_contact_head_train), then the model with
 * it exported as a new Hugging Face directory (esmt_model_export_hf). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "contacts.h"

typedef struct proteins {
  int n, cap;
  char **ids;
  int32_t **res;
  int *len;
} proteins;

static void proteins_free(proteins *p) {
  for (int i = 0; i < p->n; i++) free(p->ids[i]), free(p->res[i]);
  free(p->ids), free(p->res), free(p->len);
}

static int keep(proteins *p, const esmt_sequence *q) {
  if (p->n == p->cap) {
    const int cap = p->cap ? 2 * p->cap : 64;
    char **ids = realloc(p->ids, (size_t)cap * sizeof *ids);
    if (ids) p->ids = ids;
    int32_t **res = realloc(p->res, (size_t)cap * sizeof *res);
    if (res) p->res = res;
    int *len = realloc(p->len, (size_t)cap * sizeof *len);
    if (len) p->len = len;
    if (!ids || !res || !len) return 1;
    p->cap = cap;
  }
  p->ids[p->n] = strdup(q->id);
  p->res[p->n] = malloc((q->length ? q->length : 1) * sizeof(int32_t));
  if (!p->ids[p->n] || !p->res[p->n]) {
    free(p->ids[p->n]), free(p->res[p->n]);
    return 1;
  }
  memcpy(p->res[p->n], q->tokens, q->length * sizeof(int32_t));
  p->len[p->n++] = (int)q->length;
  return 0;
}

static int read_all(const char *input, proteins *p) {
  esmt_sequence_reader *in = NULL;
  esmt_status st = esmt_sequence_reader_open(input, NULL, &in);
  for (int got = 1; !st && got;) {
    esmt_sequence q = ESMT_SEQUENCE_INIT;
    if ((st = esmt_sequence_reader_next(in, &q, &got)) || !got) break;
    if (q.length > (1u << 20)) {
      fprintf(stderr, CONTACTS_PREFIX "record '%s' has %llu residues: too long\n", cli_esc(q.id),
              (unsigned long long)q.length);
      esmt_sequence_reader_close(in);
      return 1;
    }
    if (keep(p, &q)) {
      fprintf(stderr, CONTACTS_PREFIX "out of memory reading %s\n", cli_esc(input));
      esmt_sequence_reader_close(in);
      return 1;
    }
  }
  esmt_sequence_reader_close(in);
  if (st) {
    cli_error("contacts: input", st);
    return 1;
  }
  if (!p->n) {
    fprintf(stderr, CONTACTS_PREFIX "%s holds no protein\n", cli_esc(input));
    return 1;
  }
  return 0;
}

int contacts_train_run(const contacts_args *a, esmt_model *model) {
  proteins p = {0};
  if (read_all(a->input, &p)) {
    proteins_free(&p);
    return 1;
  }
  const int count = p.n;
  esmt_contact_pair *pairs = NULL;
  size_t np = 0;
  esmt_status st = esmt_contact_pairs_read(a->train_pairs, p.n, (const char *const *)p.ids,
                                           p.len, &pairs, &np);
  if (st) {
    cli_error("contacts: --train-head", st);
    proteins_free(&p);
    return 1;
  }
  esmt_contact_train_options o = ESMT_CONTACT_TRAIN_OPTIONS_INIT;
  o.min_separation = (int)a->min_separation;
  o.l2 = a->l2;
  esmt_contact_train_result r = ESMT_CONTACT_TRAIN_RESULT_INIT;
  st = esmt_contact_head_train(model, &o, p.n, (const int32_t *const *)p.res, p.len, pairs, np,
                               &r);
  esmt_contact_pairs_free(pairs);
  proteins_free(&p);
  if (st) {
    cli_error("contacts: --train-head", st);
    return 1;
  }
  if ((st = esmt_model_export_hf(model, a->out, 0))) {
    cli_error("contacts: export", st);
    return 1;
  }
  printf("contact head: %llu pairs (%llu contacts) of %d proteins, %d Newton steps, loss %.4f, "
         "precision of the top L/5 long-range pairs (training proteins) %.3f; model with it "
         "in %s\n", (unsigned long long)r.pairs, (unsigned long long)r.contacts, count,
         r.iterations, r.loss, r.precision_long_l5, cli_esc(a->out));
  return 0;
}
