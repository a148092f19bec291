/* SPDX-License-Identifier: MIT */
/* `score MODEL WT.fasta --variants VARIANTS.csv -o OUT.csv`: masked
 * marginals (Meier et al. 2021; fair-esm examples/variant-prediction,
 * "masked-marginals"). Each distinct mutated position of a wild type is
 * masked once; a variant scores the sum over its mutations of
 * log p(mutant) - log p(wild type) there. The CSV is checked whole before
 * the model is loaded. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "score_common.h"

#define MAX_REPORTED 20

typedef struct wt_rec { char *id; int32_t *tok; int n; } wt_rec;
typedef struct variant { char *id, *mutation; size_t first; int count; } variant;
typedef struct mut { int prot, r, wt, mt; size_t slot; } mut;
typedef struct slot { int prot, r; } slot;

struct score_variants {
  wt_rec *wt;
  int n_wt;
  int *by_id;                /* wt indices sorted by id */
  variant *v;
  size_t n_v, cap_v;
  mut *m;
  size_t n_m, cap_m;
  slot *s;                   /* distinct (protein, residue), sorted */
  size_t n_s;
  double *logp;              /* [n_s x 33] */
  uint64_t prots_done;
  int errors;
  const char *csv;
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
                       char *text) {
  id = trim_blanks(id); /* quoted blanks too: no id or mutation holds any */
  text = trim_blanks(text);
  const int p = id[0] ? find_wt(v, id) : -1;
  if (!id[0]) { err(v, line, "the id is empty"); return 0; }
  const char *what = p == -1 ? "is not a record" : "names several records";
  if (p < 0) { err(v, line, "id '%s' %s of %s", cli_esc(id), what, a->input); return 0; }
  int cap = 1;
  for (const char *c = text; *c; c++) cap += *c == ':';
  score_mutation *ms = malloc((size_t)cap * sizeof *ms);
  if (!ms) return 1;
  char why[256];
  const int k = score_parse_mutations(text, ms, cap, why, sizeof why);
  const wt_rec *w = &v->wt[p];
  int bad = k < 0;
  if (bad) err(v, line, "mutation '%s': %s", cli_esc(text), cli_esc(why));
  for (int j = 0; !bad && j < k; j++) {
    const long long r = ms[j].pos - a->offset;
    char detail[256];
    if (r < 0 || r >= w->n) {
      snprintf(detail, sizeof detail, "position %lld is outside '%s' (%d residue%s: positions "
               "%lld..%lld with --offset %lld)", ms[j].pos, id, w->n, w->n == 1 ? "" : "s",
               a->offset,
               a->offset + w->n - 1, a->offset);
      bad = 1;
    } else if (w->tok[r] != ms[j].wt) {
      snprintf(detail, sizeof detail, "the wild type '%s' has %s at position %lld, not %s "
               "(with --offset %lld)", id, esmt_token_string(w->tok[r]), ms[j].pos,
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
    mut *nm = realloc(v->m, v->cap_m * sizeof *nm);
    if (!nm) { free(ms); return 1; }
    v->m = nm;
  }
  variant *var = &v->v[v->n_v];
  var->first = v->n_m;
  var->count = k;
  var->id = dup(id);
  var->mutation = dup(text);
  v->n_v++;
  for (int j = 0; j < k; j++)
    v->m[v->n_m++] = (mut){p, (int)(ms[j].pos - a->offset), ms[j].wt, ms[j].mt, 0};
  free(ms);
  return !var->id || !var->mutation;
}

/* The header's column `name`: its index, or -1 after reporting. */
static int column(score_variants *v, char **f, int n, const char *name) {
  int at = -1;
  for (int i = 0; i < n; i++)
    if (!strcmp(f[i], name)) {
      if (at >= 0) { err(v, 1, "the header names column '%s' twice", name); return -1; }
      at = i;
    }
  if (at < 0)
    err(v, 1, "the header has no column '%s' (it needs 'id' and 'mutation', names exact and "
        "lowercase; %d column%s read)", name, n, n == 1 ? "" : "s");
  return at;
}

/* Between reads of the CSV: a stop signal ends the load. */
static int stop_on_signal(void *user, const esmt_progress *p) {
  (void)user;
  (void)p;
  return cli_signal_caught();
}

static int read_csv(score_variants *v, const score_args *a) {
  esmt_line_reader_options ro = ESMT_LINE_READER_OPTIONS_INIT;
  ro.what = "variants CSV";
  ro.allow_stdin = 1; /* --variants - */
  ro.progress = stop_on_signal;
  esmt_line_reader *lr = NULL;
  esmt_status st = esmt_line_reader_open(a->variants, &ro, &lr);
  if (st) {
    cli_error("score: --variants", st);
    return 1;
  }
  char *line = NULL, **fields = NULL;
  size_t lcap = 0;
  int fcap = 0, c_id = -1, c_mut = -1, rc = 0;
  long no = 0;
  for (int got = 1; !rc;) {
    const char *raw;
    size_t len;
    if ((st = esmt_line_reader_next(lr, &raw, &len, &got)) || !got) break;
    no = (long)esmt_line_reader_line_number(lr);
    if (len + 1 > lcap) { /* a copy: the fields are split in place */
      char *l = realloc(line, len + 1);
      if (!l) { rc = 1; break; }
      line = l;
      lcap = len + 1;
    }
    memcpy(line, raw, len + 1);
    while (len > 0 && line[len - 1] == '\r') line[--len] = 0;
    char *text = line;
    if (no == 1 && !strncmp(text, "\xEF\xBB\xBF", 3)) text += 3; /* a UTF-8 byte order mark */
    if (no > 1 && text[strspn(text, " \t")] == 0) continue;      /* blank lines */
    const int n = score_csv_split(text, &fields, &fcap);
    if (n < 0) {
      err(v, no, "a quote is not closed, or text follows a closing quote");
      if (no == 1) break;
      continue;
    }
    if (no == 1) {
      c_id = column(v, fields, n, "id");
      c_mut = column(v, fields, n, "mutation");
      if (c_id < 0 || c_mut < 0) break;
      continue;
    }
    if (n <= c_id || n <= c_mut) {
      err(v, no, "%d field%s: the line ends before its '%s' column", n, n == 1 ? "" : "s",
          n <= c_id ? "id" : "mutation");
      continue;
    }
    rc = add_variant(v, a, no, fields[c_id], fields[c_mut]);
  }
  esmt_line_reader_close(lr);
  free(line);
  free(fields);
  if (st == ESMT_ERR_CANCELLED) return 1; /* the caller names the signal */
  if (st) {
    cli_error("score: --variants", st);
    return 1;
  }
  if (!rc && no == 0) err(v, 1, "the file is empty (it needs a header with 'id' and "
                          "'mutation')");
  else if (!rc && !v->errors && v->n_v == 0) err(v, no, "no variants after the header");
  if (rc) fprintf(stderr, SCORE_PREFIX "out of memory reading %s\n", cli_esc(a->variants));
  return rc || v->errors;
}

static int slot_cmp(const void *x, const void *y) {
  const slot *a = x, *b = y;
  return a->prot != b->prot ? (a->prot > b->prot) - (a->prot < b->prot) : (a->r > b->r) - (a->r < b->r);
}

/* The distinct masked positions, and each mutation's. */
static int make_slots(score_variants *v) {
  if (!(v->s = malloc(v->n_m * sizeof *v->s))) return 1;
  for (size_t i = 0; i < v->n_m; i++) v->s[i] = (slot){v->m[i].prot, v->m[i].r};
  qsort(v->s, v->n_m, sizeof *v->s, slot_cmp);
  size_t n = 0;
  for (size_t i = 0; i < v->n_m; i++)
    if (!n || slot_cmp(&v->s[n - 1], &v->s[i])) v->s[n++] = v->s[i];
  v->n_s = n;
  for (size_t i = 0; i < v->n_m; i++) {
    const slot key = {v->m[i].prot, v->m[i].r};
    v->m[i].slot = (size_t)((const slot *)bsearch(&key, v->s, n, sizeof key, slot_cmp) - v->s);
  }
  return !(v->logp = malloc(n * ESMT_VOCAB_SIZE * sizeof *v->logp));
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
  if (make_slots(v)) {
    fprintf(stderr, SCORE_PREFIX "out of memory for %zu mutations\n", v->n_m);
    score_variants_free(v);
    return NULL;
  }
  return v;
}

void score_variants_free(score_variants *v) {
  if (!v) return;
  for (int i = 0; i < v->n_wt; i++) { free(v->wt[i].id); free(v->wt[i].tok); }
  for (size_t i = 0; i < v->n_v; i++) { free(v->v[i].id); free(v->v[i].mutation); }
  free(v->wt); free(v->by_id); free(v->v); free(v->m); free(v->s); free(v->logp);
  free(v);
}

static int on_row(void *user, uint64_t tag, const double *logp) {
  score_variants *v = user;
  memcpy(v->logp + tag * ESMT_VOCAB_SIZE, logp, ESMT_VOCAB_SIZE * sizeof *logp);
  if (tag + 1 == v->n_s || v->s[tag + 1].prot != v->s[tag].prot) v->prots_done++;
  return 0;
}

int score_variants_run(score_variants *v, const score_args *a, esmt_model *model,
                       score_out *out) {
  score_batcher *sb = score_batcher_create(model, (uint64_t)a->batch_tokens, on_row, v);
  if (!sb) return 1;
  score_progress prog;
  score_progress_init(&prog, a->quiet);
  int rc = 0;
  for (size_t i = 0; i < v->n_s && !rc && !cli_signal_caught(); i++) {
    const wt_rec *w = &v->wt[v->s[i].prot];
    rc = score_batcher_add(sb, w->tok, w->n, v->s[i].r, i);
    score_progress_tick(&prog, v->prots_done, score_batcher_rows_done(sb),
                        (double)score_batcher_rows_done(sb) / (double)v->n_s, 0);
  }
  if (!rc && !cli_signal_caught()) rc = score_batcher_flush(sb);
  score_progress_tick(&prog, v->prots_done, score_batcher_rows_done(sb), 1.0, 1);
  score_progress_end(&prog);
  if (!rc && cli_signal_caught()) rc = 128 + cli_signal_caught();
  if (!rc) {
    FILE *f = score_out_file(out);
    fprintf(f, "id,mutation,score\n");
    for (size_t i = 0; i < v->n_v; i++) {
      double score = 0;
      for (int j = 0; j < v->v[i].count; j++) {
        const mut *m = &v->m[v->v[i].first + (size_t)j];
        const double *lp = v->logp + m->slot * ESMT_VOCAB_SIZE;
        score += lp[m->mt] - lp[m->wt];
      }
      score_csv_field(f, v->v[i].id);
      fputc(',', f);
      score_csv_field(f, v->v[i].mutation);
      fprintf(f, "," SCORE_NUM "\n", score);
    }
    printf("score: %zu variants of %llu proteins, %zu masked positions in %.1f s\n", v->n_v,
           (unsigned long long)v->prots_done, v->n_s, esmt_clock_seconds() - prog.start);
  }
  score_batcher_destroy(sb);
  return rc;
}
