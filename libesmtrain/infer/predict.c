/* SPDX-License-Identifier: MIT */
/* esmt_predict_table (finetune.h): a task model's predictions for every
 * protein of a table or FASTA file, appended to the input's columns in a
 * new CSV. Proteins are read (predict_rows.c), gathered into batches of
 * right-padded rows, run through esmt_model_infer's ESMT_INFER_HEAD and
 * written a row at a time to a temporary published whole at the end. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "predict_rows.h"

typedef struct predictor {
  esmt_model *model;
  esmt_model_config cfg;
  const esmt_predict_options *o;
  predict_rows *rows;
  esmt_batch_builder *builder;
  FILE *out;
  char **names;          /* the outputs' names */
  int one_char_names;    /* residue labels joined without a separator */
  /* the batch being gathered: each row's input columns (CSV) and residues */
  char **fields;
  int64_t *lengths;
  int count, cap;
  float *head;
  char *text;            /* a row's output */
  size_t text_len, text_cap;
  uint64_t done;
} predictor;

static const char *name_of(const predictor *p, int k) { return p->names[k]; }

static esmt_status make_names(predictor *p) {
  const int C = p->cfg.num_labels;
  p->names = calloc((size_t)C, sizeof *p->names);
  if (!p->names) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory");
  p->one_char_names = 1;
  for (int k = 0; k < C; k++) {
    const char *given = esmt_model_label_name(p->model, k);
    char number[16];
    snprintf(number, sizeof number, "%d", k);
    if (!(p->names[k] = strdup(given ? given : number)))
      return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory");
    p->one_char_names &= strlen(p->names[k]) == 1;
  }
  return ESMT_OK;
}

/* One output column's name into the header, refused when the input has it. */
static esmt_status add_column(predictor *p, char **hdr, size_t *len, size_t *cap,
                              const char *prefix, const char *name) {
  char col[512];
  snprintf(col, sizeof col, "%s%s", prefix, name);
  if (predict_rows_has_column(p->rows, col))
    return esmt_fail(ESMT_ERR_FORMAT, "%s: already has a column '%s', which the predictions "
                     "would add (rename it)", p->o->input, col);
  return predict_csv_field(hdr, len, cap, col, ',');
}

static esmt_status write_header(predictor *p) {
  const char *in = predict_rows_header(p->rows);
  char *hdr = NULL;
  size_t len = 0, cap = 0;
  esmt_status st = ESMT_OK;
  const int C = p->cfg.num_labels, head = p->cfg.head;
  if (head == ESMT_HEAD_SEQ_CLASS || head == ESMT_HEAD_RESIDUE_CLASS)
    st = add_column(p, &hdr, &len, &cap, "", "predicted");
  for (int k = 0; !st && head != ESMT_HEAD_RESIDUE_CLASS && k < C; k++)
    st = add_column(p, &hdr, &len, &cap, head == ESMT_HEAD_REGRESSION ? "predicted_" : "p_",
                    name_of(p, k));
  if (!st && fprintf(p->out, "%s%s\n", in, hdr ? hdr : "") < 0)
    st = esmt_fail(ESMT_ERR_IO, "%s: cannot write", p->o->output);
  free(hdr);
  return st;
}

static esmt_status put(predictor *p, const char *s, char sep) {
  return predict_csv_field(&p->text, &p->text_len, &p->text_cap, s, sep);
}

static esmt_status put_number(predictor *p, double v) {
  char num[32];
  snprintf(num, sizeof num, "%.9g", v);
  return put(p, num, ',');
}

/* Row r's predictions after its input columns. */
static esmt_status write_row(predictor *p, int r, int T) {
  const int C = p->cfg.num_labels, head = p->cfg.head;
  p->text_len = 0;
  if (p->text) p->text[0] = '\0';
  esmt_status st = ESMT_OK;
  if (head == ESMT_HEAD_RESIDUE_CLASS) {
    const int W = p->cfg.max_positions - 2;
    char *labels = NULL;
    size_t len = 0, cap = 0;
    for (int64_t i = 0; !st && i < p->lengths[r]; i++) {
      const char *name = "-"; /* past the window (truncate_long) */
      if (i < W) {
        const float *y = p->head + ((size_t)r * (size_t)T + (size_t)i + 1) * (size_t)C;
        int best = 0;
        for (int k = 1; k < C; k++) best = y[k] > y[best] ? k : best;
        name = name_of(p, best);
      }
      if (p->one_char_names) {
        if (len + 2 > cap) {
          cap = cap ? 2 * cap : 256;
          char *q = realloc(labels, cap);
          if (!q) { st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory"); break; }
          labels = q;
        }
        labels[len++] = name[0];
        labels[len] = '\0';
      } else {
        st = predict_csv_field(&labels, &len, &cap, name, i ? ' ' : 0);
      }
    }
    if (!st) st = put(p, labels ? labels : "", ',');
    free(labels);
  } else {
    const float *y = p->head + (size_t)r * (size_t)C;
    if (head == ESMT_HEAD_SEQ_CLASS) { /* softmax, as the loss has it */
      int best = 0;
      double mx = y[0], z = 0.0;
      for (int k = 1; k < C; k++) {
        best = y[k] > y[best] ? k : best;
        mx = y[k] > mx ? y[k] : mx;
      }
      for (int k = 0; k < C; k++) z += exp((double)y[k] - mx);
      st = put(p, name_of(p, best), ',');
      for (int k = 0; !st && k < C; k++) st = put_number(p, (float)(exp((double)y[k] - mx) / z));
    } else {
      for (int k = 0; !st && k < C; k++)
        st = put_number(p, head == ESMT_HEAD_MULTILABEL ? (float)(1.0 / (1.0 + exp(-(double)y[k])))
                                                        : y[k]);
    }
  }
  if (!st && fprintf(p->out, "%s%s\n", p->fields[r], p->text ? p->text : "") < 0)
    st = esmt_fail(ESMT_ERR_IO, "%s: cannot write", p->o->output);
  return st;
}

static esmt_status flush_batch(predictor *p) {
  if (p->count == 0) return ESMT_OK;
  esmt_batch b = ESMT_BATCH_INIT;
  esmt_status st = esmt_batch_builder_get(p->builder, &b);
  const size_t per_row = p->cfg.head == ESMT_HEAD_RESIDUE_CLASS ? (size_t)b.seq_len : 1;
  float *h = st ? NULL : realloc(p->head, (size_t)b.batch * per_row * (size_t)p->cfg.num_labels *
                                              sizeof *h);
  if (!st && !h) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory");
  if (h) p->head = h;
  if (!st) {
    esmt_infer_request q = ESMT_INFER_REQUEST_INIT;
    q.outputs = ESMT_INFER_HEAD;
    q.head = p->head;
    st = esmt_model_infer(p->model, &b, &q);
  }
  for (int r = 0; !st && r < p->count; r++) st = write_row(p, r, b.seq_len);
  for (int r = 0; r < p->count; r++) free(p->fields[r]);
  p->count = 0;
  esmt_batch_builder_reset(p->builder);
  p->done += st ? 0 : (uint64_t)b.batch;
  if (!st && p->o->progress) {
    esmt_progress pr = ESMT_PROGRESS_INIT;
    pr.stage = "predict";
    pr.unit = "proteins";
    pr.done = p->done;
    if (p->o->progress(p->o->progress_user, &pr))
      st = esmt_fail(ESMT_ERR_CANCELLED, "predict: cancelled after %llu proteins",
                     (unsigned long long)p->done);
  }
  return st;
}

static esmt_status add_protein(predictor *p, const char *fields, const int32_t *ids, int64_t n,
                               uint64_t line) {
  const int64_t W = p->cfg.max_positions - 2;
  const char *unit = predict_rows_unit(p->rows);
  if (n == 0)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: %s %llu: the sequence is empty", p->o->input, unit,
                     (unsigned long long)line);
  if (n > W && !p->o->truncate_long)
    return esmt_fail(ESMT_ERR_FORMAT, "%s: %s %llu: a protein of %lld residues, longer than the "
                     "model's window of %lld (predict its first window with --long truncate)",
                     p->o->input, unit, (unsigned long long)line, (long long)n, (long long)W);
  if (p->count == p->cap) {
    const int cap = p->cap ? 2 * p->cap : 16;
    char **f = realloc(p->fields, (size_t)cap * sizeof *f);
    if (f) p->fields = f;
    int64_t *l = f ? realloc(p->lengths, (size_t)cap * sizeof *l) : NULL;
    if (l) p->lengths = l;
    if (!f || !l) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory");
    p->cap = cap;
  }
  if (!(p->fields[p->count] = strdup(fields)))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "predict: out of memory");
  p->lengths[p->count++] = n;
  return esmt_batch_builder_add(p->builder, ids, (int)(n < W ? n : W));
}

static esmt_status run(predictor *p) {
  esmt_status st = write_header(p);
  const int rows = p->o->batch_rows > 0 ? p->o->batch_rows : 16;
  for (int got = 1; !st && got;) {
    const char *fields = NULL;
    const int32_t *ids = NULL;
    int64_t n = 0;
    uint64_t line = 0;
    st = predict_rows_next(p->rows, &fields, &ids, &n, &line, &got);
    if (!st && got) st = add_protein(p, fields, ids, n, line);
    if (!st && (p->count == rows || !got)) st = flush_batch(p);
  }
  return st;
}

esmt_status esmt_predict_table(esmt_model *model, const esmt_predict_options *o,
                               uint64_t *rows) {
  const char *fn = "esmt_predict_table";
  ESMT_CHECK_ARG(model && o && o->input && o->output, fn,
                 "model, options, input and output must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_predict_options", o->struct_size,
                                     sizeof(esmt_predict_options));
  if (st) return st;
  predictor p = {0};
  p.model = model;
  p.o = o;
  p.cfg = (esmt_model_config)ESMT_MODEL_CONFIG_INIT;
  if ((st = esmt_model_get_config(model, &p.cfg))) return st;
  if (p.cfg.head == ESMT_HEAD_NONE)
    return esmt_fail(ESMT_ERR_STATE, "%s: the model has no task head: predictions need a "
                     "fine-tuned model (esmtrain-example finetune)", fn);
  esmt_output_file *of = NULL;
  int fd = -1;
  st = make_names(&p);
  if (!st) st = predict_rows_open(o->input, o->seq_column, &p.rows);
  if (!st) st = esmt_batch_builder_create(ESMT_ROWS_PADDED, p.cfg.max_positions, &p.builder);
  if (!st) st = esmt_output_file_begin(o->output, NULL, NULL, &of);
  if (!st && ((fd = dup(esmt_output_file_fd(of))) < 0 || !(p.out = fdopen(fd, "w")))) {
    if (fd >= 0) close(fd);
    st = esmt_fail(ESMT_ERR_IO, "%s: cannot write", o->output);
  }
  if (!st) st = run(&p);
  if (p.out && fclose(p.out) != 0 && !st)
    st = esmt_fail(ESMT_ERR_IO, "%s: cannot write", o->output);
  if (!st) st = esmt_output_file_commit(of);
  else esmt_output_file_abort(of);
  for (int r = 0; r < p.count; r++) free(p.fields[r]);
  for (int k = 0; p.names && k < p.cfg.num_labels; k++) free(p.names[k]);
  free(p.names);
  free(p.fields);
  free(p.lengths);
  free(p.head);
  free(p.text);
  esmt_batch_builder_destroy(p.builder);
  predict_rows_close(p.rows);
  if (st) return esmt_fail_prefix(st, "%s: ", fn);
  if (rows) *rows = p.done;
  return ESMT_OK;
}
