/* SPDX-License-Identifier: MIT */
/* `score MODEL WT.fasta --variants VARIANTS.csv -o OUT.csv`: masked
 * marginals (esmt_score_variants) of the variants the table names, read
 * with esmt_table_reader (CSV or TSV). The output is the user's table,
 * every column kept, with a score column appended. The table is checked
 * whole before the model is loaded. */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "score_common.h"

#define MAX_REPORTED 20
/* the variants are held whole (checked before the model is loaded) */
#define MAX_TABLE_BYTES (1 << 30)

typedef struct wt_rec { char *id; int32_t *tok; int n; } wt_rec;
/* row: the user's fields as CSV text, written back before the score */
typedef struct variant { char *row; size_t first; int count, prot; } variant;

struct score_variants {
  wt_rec *wt;
  int n_wt;
  int *by_id;                /* wt indices sorted by id */
  variant *v;
  size_t n_v, cap_v;
  esmt_mutation *m;          /* every variant's, residues 0-based */
  size_t n_m, cap_m;
  int errors;
  const char *csv;
  char *header;              /* the user's header as CSV text */
};

static char *dup(const char *s) {
  char *d = malloc(strlen(s) + 1);
  return d ? strcpy(d, s) : NULL;
}

/* A problem with line `line` of the CSV: counted, the first ones printed. */
__attribute__((format(printf, 3, 4)))
static void err(score_variants *v, long line, const char *fmt, ...) {
  if (++v->errors > MAX_REPORTED) return;
  fprintf(stderr, SCORE_PREFIX "%s line %ld: ", v->csv, line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static const score_variants *g_sort; /* qsort has no user pointer */
static int by_id_cmp(const void *x, const void *y) {
  return strcmp(g_sort->wt[*(const int *)x].id, g_sort->wt[*(const int *)y].id);
}

static int load_wt(score_variants *v, const score_args *a) {
  esmt_sequence_reader *in = NULL;
  esmt_status st = esmt_sequence_reader_open(a->input, a->split, &in);
  int cap = 0, rc = 0;
  while (!cli_signal_caught()) {
    esmt_sequence q = ESMT_SEQUENCE_INIT;
    int got = 0;
    if (!st) st = esmt_sequence_reader_next(in, &q, &got);
    if (st || !got) break;
    if (v->n_wt == cap) {
      cap = cap ? 2 * cap : 64;
      wt_rec *w = realloc(v->wt, (size_t)cap * sizeof *w);
      if (!w) { rc = 1; break; }
      v->wt = w;
    }
    wt_rec *w = &v->wt[v->n_wt];
    w->n = (int)q.length;
    w->id = dup(q.id);
    w->tok = malloc((q.length ? q.length : 1) * sizeof *w->tok);
    if (w->tok) memcpy(w->tok, q.tokens, q.length * sizeof *w->tok);
    v->n_wt++;
    if (!w->id || !w->tok || q.length > 1000000000u) { rc = 1; break; }
  }
  esmt_sequence_reader_close(in);
  if (st) cli_error("score: wild types", st);
  else if (rc) fprintf(stderr, SCORE_PREFIX "%s: out of memory or a record too long\n", a->input);
  if (st || rc || !(v->by_id = malloc(((size_t)v->n_wt + 1) * sizeof *v->by_id))) return 1;
  for (int i = 0; i < v->n_wt; i++) v->by_id[i] = i;
  g_sort = v;
  qsort(v->by_id, (size_t)v->n_wt, sizeof *v->by_id, by_id_cmp);
  return 0;
}

static char *trim_blanks(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
  return s;
}

/* The wild type named id: its index, -1 none, -2 several. */
static int find_wt(const score_variants *v, const char *id) {
  int lo = 0, hi = v->n_wt;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (strcmp(v->wt[v->by_id[mid]].id, id) < 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo == v->n_wt || strcmp(v->wt[v->by_id[lo]].id, id)) return -1;
  if (lo + 1 < v->n_wt && !strcmp(v->wt[v->by_id[lo + 1]].id, id)) return -2;
  return v->by_id[lo];
}

/* One data line: check it and append the variant. Returns 1 only when out
 * of memory (problems with the line are counted in v->errors). */
static int add_variant(score_variants *v, const score_args *a, long line, char *id,
                       char *text, char *row) {
  /* quoted blanks too: no id or mutation holds any */
  id = id ? trim_blanks(id) : v->wt[0].id; /* no id column: the one wild type */
  text = trim_blanks(text);
  const int p = !id[0] ? -1 : v->n_wt == 1 && id == v->wt[0].id ? 0 : find_wt(v, id);
  if (!id[0]) { err(v, line, "the id is empty"); return 0; }
  const char *what = p == -1 ? "is not a record" : "names several records";
  if (p < 0) { err(v, line, "id '%s' %s of %s", cli_esc(id), what, a->input); return 0; }
  int cap = 1;
  for (const char *c = text; *c; c++) cap += *c == ':';
  esmt_mutation *ms = malloc((size_t)cap * sizeof *ms);
  if (!ms) return 1;
  int k = 0;
  const int bad_text = esmt_mutations_parse(text, ms, cap, &k) != ESMT_OK;
  const wt_rec *w = &v->wt[p];
  int bad = bad_text;
  if (bad) err(v, line, "mutation '%s': %s", cli_esc(text), cli_esc(esmt_last_error()));
  for (int j = 0; !bad && j < k; j++) {
    const long long r = ms[j].residue - a->offset;
    char detail[256];
    if (r < 0 || r >= w->n) {
      snprintf(detail, sizeof detail, "position %lld is outside '%s' (%d residue%s: positions "
               "%lld..%lld with --offset %lld)", (long long)ms[j].residue, id, w->n,
               w->n == 1 ? "" : "s", a->offset, a->offset + w->n - 1, a->offset);
      bad = 1;
    } else if (w->tok[r] != ms[j].wt) {
      snprintf(detail, sizeof detail, "the wild type '%s' has %s at position %lld, not %s "
               "(with --offset %lld)", id, esmt_token_string(w->tok[r]),
               (long long)ms[j].residue,
               esmt_token_string(ms[j].wt), a->offset);
      bad = 1;
    }
    if (bad) err(v, line, "mutation '%s': %s", cli_esc(text), cli_esc(detail));
  }
  if (bad || v->errors) {
    free(ms);
    return 0;
  }
  if (v->n_v == v->cap_v) {
    v->cap_v = v->cap_v ? 2 * v->cap_v : 256;
    variant *nv = realloc(v->v, v->cap_v * sizeof *nv);
    if (!nv) { free(ms); return 1; }
    v->v = nv;
  }
  if (v->n_m + (size_t)k > v->cap_m) {
    v->cap_m = 2 * (v->n_m + (size_t)k) + 256;
    esmt_mutation *nm = realloc(v->m, v->cap_m * sizeof *nm);
    if (!nm) { free(ms); return 1; }
    v->m = nm;
  }
  variant *var = &v->v[v->n_v];
  var->first = v->n_m;
  var->count = k;
  var->prot = p;
  var->row = row;
  v->n_v++;
  for (int j = 0; j < k; j++) {
    ms[j].residue -= a->offset;
    v->m[v->n_m++] = ms[j];
  }
  free(ms);
  return 0;
}

/* The header's column `name`: its index, -1 when absent (reported when
 * `required`), -2 after reporting it named twice. */
static int column(score_variants *v, const esmt_table_reader *t, const char *name,
                  const char *option, int required) {
  const int at = esmt_table_reader_column(t, name);
  if (at == -2) err(v, 1, "the header names column '%s' twice", name);
  if (at == -1 && required) {
    const char *const *names = NULL;
    const int n = esmt_table_reader_columns(t, &names);
    const char *near = esmt_suggest(name, names, n);
    err(v, 1, "the header has no column '%s'%s%s%s (%s NAME chooses another; %d column%s "
        "read)", name, near ? "; did you mean '" : "", near ? cli_esc(near) : "", near ? "'?" : "",
        option, n, n == 1 ? "" : "s");
  }
  return at;
}

/* fields[0..n) as one CSV text (quoted where needed), or NULL. */
static char *csv_text(const char *const *fields, int n) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return NULL;
  for (int i = 0; i < n; i++) {
    if (i) fputc(',', f);
    score_csv_field(f, fields[i]);
  }
  if (fclose(f)) {
    free(text);
    return NULL;
  }
  return text;
}

/* Between reads of the table: a stop signal ends the load. */
static int stop_on_signal(void *user, const esmt_progress *p) {
  (void)user;
  (void)p;
  return cli_signal_caught();
}

/* The mutation column: --mutation-col, else fair-esm's 'mutant', else
 * 'mutation'. The wild type's: --seq-col, else 'id', which a WT.fasta of
 * one record may go without (every row is then a variant of it). */
static int resolve_columns(score_variants *v, const score_args *a, const esmt_table_reader *t,
                           int *c_id, int *c_mut) {
  if (a->mutation_col) {
    *c_mut = column(v, t, a->mutation_col, "--mutation-col", 1);
  } else if ((*c_mut = column(v, t, "mutant", "--mutation-col", 0)) == -1) {
    *c_mut = column(v, t, "mutation", "--mutation-col", 0);
    if (*c_mut == -1)
      err(v, 1, "the header has no column 'mutant' or 'mutation' (--mutation-col NAME names "
          "the column of the mutations)");
  }
  const int one_wt = v->n_wt == 1 && !a->seq_col;
  *c_id = column(v, t, a->seq_col ? a->seq_col : "id", "--seq-col", !one_wt);
  if (*c_id == -1 && !one_wt)
    fprintf(stderr, SCORE_PREFIX "each row names its wild type, a record of %s (which holds %d "
            "records), in that column\n", cli_esc(a->input), v->n_wt);
  const char *const *names = NULL;
  const int n = esmt_table_reader_columns(t, &names);
  const char *score_col = "score";
  if (esmt_table_reader_column(t, score_col) >= 0)
    err(v, 1, "the table already has a column '%s', which the output appends (rename it)",
        score_col);
  if (*c_mut < 0 || *c_id == -2 || (*c_id == -1 && !one_wt) || v->errors) return 1;
  char *text = csv_text(names, n);
  if (!text || asprintf(&v->header, "%s,%s", text, score_col) < 0) v->header = NULL;
  free(text);
  return v->header ? 0 : -1;
}

static int read_csv(score_variants *v, const score_args *a) {
  esmt_table_reader *t = NULL;
  esmt_status st = esmt_table_reader_open(a->variants, ESMT_TABLE_BY_NAME, &t);
  if (st) {
    cli_error("score: --variants", st);
    return 1;
  }
  esmt_table_reader_set_progress(t, stop_on_signal, NULL);
  int c_id = -1, c_mut = -1, rc = 0, rows = 0, header = 0;
  size_t kept = 0;
  for (;;) {
    const char *const *fields = NULL;
    int n = 0, got = 0;
    if ((st = esmt_table_reader_next(t, &fields, &n, &got))) break;
    if (!header) {
      header = 1;
      if ((rc = resolve_columns(v, a, t, &c_id, &c_mut))) break;
    }
    if (!got) break;
    rows++;
    const long no = (long)esmt_table_reader_line(t);
    /* copies: the fields are trimmed in place */
    char *row = csv_text(fields, n), *id = c_id >= 0 ? dup(fields[c_id]) : NULL,
         *text = dup(fields[c_mut]);
    const size_t before = v->n_v;
    if (!row || (c_id >= 0 && !id) || !text || add_variant(v, a, no, id, text, row)) rc = -1;
    if (v->n_v == before) free(row); /* else the variant holds it */
    else if ((kept += strlen(row)) > MAX_TABLE_BYTES) {
      err(v, no, "the table holds more than %d MiB of variants (score it in parts)",
          MAX_TABLE_BYTES >> 20);
      rc = 1;
    }
    free(id);
    free(text);
    if (rc) break;
  }
  esmt_table_reader_close(t);
  if (st == ESMT_ERR_CANCELLED) return 1; /* the caller names the signal */
  if (st) {
    cli_error("score: --variants", st);
    return 1;
  }
  if (rc < 0) fprintf(stderr, SCORE_PREFIX "out of memory reading %s\n", cli_esc(a->variants));
  else if (!rc && !v->errors && rows == 0) err(v, 1, "no variants after the header");
  return rc != 0 || v->errors;
}

score_variants *score_variants_load(const score_args *a) {
  score_variants *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  v->csv = a->variants;
  if (load_wt(v, a) || read_csv(v, a)) {
    if (v->errors > MAX_REPORTED)
      fprintf(stderr, SCORE_PREFIX "... and %d more problems\n", v->errors - MAX_REPORTED);
    if (v->errors)
      fprintf(stderr, SCORE_PREFIX "%d problem%s in %s: nothing was scored\n", v->errors,
              v->errors == 1 ? "" : "s", a->variants);
    score_variants_free(v);
    return NULL;
  }
  return v;
}

void score_variants_free(score_variants *v) {
  if (!v) return;
  for (int i = 0; i < v->n_wt; i++) { free(v->wt[i].id); free(v->wt[i].tok); }
  for (size_t i = 0; i < v->n_v; i++) free(v->v[i].row);
  free(v->header);
  free(v->wt); free(v->by_id); free(v->v); free(v->m);
  free(v);
}

typedef struct run_progress {
  score_progress prog;
  uint64_t items, positions; /* proteins and masked positions done */
  int stopped;
} run_progress;

/* Progress to stderr; a stop signal cancels. */
static int on_progress(void *user, const esmt_progress *p) {
  run_progress *rp = user;
  rp->items = p->items;
  rp->positions = p->done;
  score_progress_tick(&rp->prog, p->items, p->done,
                      p->total ? (double)p->done / (double)p->total : 1.0, p->done == p->total);
  return rp->stopped = cli_signal_caught() != 0;
}

int score_variants_run(score_variants *v, const score_args *a, esmt_model *model,
                       score_out *out) {
  const int32_t **res = malloc(((size_t)v->n_wt + 1) * sizeof *res);
  int *len = malloc(((size_t)v->n_wt + 1) * sizeof *len);
  esmt_variant *vs = malloc((v->n_v + 1) * sizeof *vs);
  double *scores = malloc((v->n_v + 1) * sizeof *scores);
  if (!res || !len || !vs || !scores) {
    free(res), free(len), free(vs), free(scores);
    fprintf(stderr, SCORE_PREFIX "out of memory for %zu variants\n", v->n_v);
    return 1;
  }
  for (int i = 0; i < v->n_wt; i++) {
    res[i] = v->wt[i].tok;
    len[i] = v->wt[i].n;
  }
  for (size_t i = 0; i < v->n_v; i++)
    vs[i] = (esmt_variant){v->v[i].prot, v->v[i].count, v->m + v->v[i].first};
  run_progress rp = {0};
  score_progress_init(&rp.prog, a->quiet);
  esmt_status st = esmt_score_variants(model, v->n_wt, res, len, vs, v->n_v,
                                       (uint64_t)a->batch_tokens, on_progress, &rp, scores);
  score_progress_end(&rp.prog);
  int rc = 0;
  if (st == ESMT_ERR_CANCELLED && rp.stopped) rc = 128 + cli_signal_caught();
  else if (st) cli_error("score", st), rc = 1;
  if (!rc) {
    FILE *f = score_out_file(out);
    fprintf(f, "%s\n", v->header);
    for (size_t i = 0; i < v->n_v; i++) fprintf(f, "%s," SCORE_NUM "\n", v->v[i].row, scores[i]);
    printf("score: %zu variants of %llu proteins, %llu masked positions in %.1f s\n", v->n_v,
           (unsigned long long)rp.items, (unsigned long long)rp.positions,
           esmt_clock_seconds() - rp.prog.start);
  }
  free(res), free(len), free(vs), free(scores);
  return rc;
}
