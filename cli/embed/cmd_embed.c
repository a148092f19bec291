/* SPDX-License-Identifier: MIT */
/* `esmtrain-example embed MODEL INPUT -o OUT`: embeddings of every
 * protein of a FASTA file or dataset, streamed in chunks (memory flat in
 * the input's size), committed after each chunk so that an interrupted
 * run continues where it stopped when started again. The parts: embed.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embed.h"

static void usage(FILE *f) {
  fprintf(f,
      "usage: esmtrain-example embed MODEL INPUT -o OUT [options]\n"
      "MODEL  a Hugging Face ESM-2 directory, an esmtrain run or checkpoint\n"
      "INPUT  FASTA (plain or .gz; '-' standard input) or an ingested dataset directory\n"
      "OUT    a new or empty directory: embed.json (what was asked, counts), ids.txt (one id\n"
      "       per line, input order), lengths.npy [N], mean.layer<L>.npy and cls.layer<L>.npy\n"
      "       [N, hidden], per_tok.layer<L>.npy [rows, hidden] with per_tok.offsets.npy [N+1]\n"
      "       (protein k: rows offsets[k]..offsets[k+1], cls/eos excluded)\n"
      "  --repr-layers L1,L2,.. representations (fair-esm repr_layers): 0 embedding, l block\n"
      "                       l, -1 or L the last block after the final LayerNorm (default\n"
      "                       -1); --layers, its former name, still works with a warning\n"
      "  --include K1,K2,..   mean, per_tok, cls (bos is cls) (default mean)\n"
      "  --format npy|safetensors  safetensors: OUT/embeddings.safetensors at the end\n"
      "  --long truncate|windows   proteins over the window (max_positions - 2 residues):\n"
      "                       keep the first window (default, as fair-esm's extract.py), or\n"
      "                       average overlapping windows per residue\n"
      "  --window-stride S    residues between window starts (default half a window)\n"
      "  --batch-tokens N     positions per batch (default 16384); other values change the\n"
      "                       results only by float rounding (docs/inference.md)\n"
      "  --split train|valid  of a dataset (default train)\n"
      "  --backend NAME --threads N --quiet\n"
      "An interrupted run (Ctrl-C, a crash) continues when the same command runs again;\n"
      "what was committed is not recomputed.\n");
}

static int parse_list(const char *text, char out[][16], int cap) {
  int n = 0;
  for (const char *p = text; *p && n < cap;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == 0 || len >= 16) return -1;
    memcpy(out[n], p, len);
    out[n++][len] = 0;
    p += len + (e != NULL);
  }
  return n;
}

/* cli_flag_value, with a missing value reported (*bad = 1). */
static int flag(const char *name, int argc, char **argv, int *i, const char **val, int *bad) {
  if (!cli_flag_value(name, argc, argv, i, val)) return 0;
  if (!*val) {
    fprintf(stderr, "esmtrain-example: embed: %s needs a value\n", name);
    *bad = 1;
  }
  return 1;
}

/* Options into *o; layers resolved once the model's depth is known. */
static int parse(int argc, char **argv, embed_options *o, const char **layers) {
  const char *include = "mean", *fmt = "npy", *lng = "truncate";
  long long v;
  int bad = 0;
  for (int i = 0; i < argc && !bad; i++) {
    const char *val = NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout), 1;
    if (!strcmp(argv[i], "-o") && i + 1 < argc) o->out = argv[++i];
    else if (flag("--repr-layers", argc, argv, &i, &val, &bad)) *layers = val;
    else if (flag("--layers", argc, argv, &i, &val, &bad)) {
      /* the former name, which `train --layers` (the depth) made ambiguous */
      fprintf(stderr, "esmtrain-example: embed: warning: --layers is deprecated, use "
              "--repr-layers (in train, --layers is the model's depth)\n");
      *layers = val;
    }
    else if (flag("--include", argc, argv, &i, &val, &bad)) include = val;
    else if (flag("--format", argc, argv, &i, &val, &bad)) fmt = val;
    else if (flag("--long", argc, argv, &i, &val, &bad)) lng = val;
    else if (flag("--split", argc, argv, &i, &val, &bad)) o->split = val;
    else if (flag("--backend", argc, argv, &i, &val, &bad)) o->backend = val;
    else if (flag("--window-stride", argc, argv, &i, &val, &bad)) {
      if (bad || !cli_int_arg("embed", "--window-stride", val, 1, 1 << 20, &v)) return 2;
      o->stride = (int)v;
    } else if (flag("--batch-tokens", argc, argv, &i, &val, &bad)) {
      if (bad || !cli_int_arg("embed", "--batch-tokens", val, 1, 1ll << 30, &v)) return 2;
      o->batch_tokens = v;
    } else if (flag("--threads", argc, argv, &i, &val, &bad)) {
      if (bad || !cli_int_arg("embed", "--threads", val, 0, 4096, &v)) return 2;
      o->threads = (int)v;
    } else if (!strcmp(argv[i], "--quiet")) o->quiet = 1;
    else if (argv[i][0] == '-' && strcmp(argv[i], "-")) {
      fprintf(stderr, "esmtrain-example: embed: unknown or incomplete option '%s'%s (try --help)\n",
              argv[i], cli_option_hint(argv[i], usage));
      return 2;
    } else if (!o->model) o->model = argv[i];
    else if (!o->input) o->input = argv[i];
    else {
      fprintf(stderr, "esmtrain-example: embed: one MODEL and one INPUT (extra '%s')\n", argv[i]);
      return 2;
    }
  }
  if (bad) return 2;
  if (!o->model || !o->input || !o->out) {
    usage(stderr);
    return 2;
  }
  char kinds[8][16];
  const int nk = parse_list(include, kinds, 8);
  for (int k = 0; k < nk; k++) {
    if (!strcmp(kinds[k], "mean")) o->include |= EMBED_MEAN;
    else if (!strcmp(kinds[k], "per_tok")) o->include |= EMBED_PER_TOK;
    else if (!strcmp(kinds[k], "cls") || !strcmp(kinds[k], "bos")) o->include |= EMBED_CLS;
    else {
      o->include = 0;
      break;
    }
  }
  if (nk <= 0 || !o->include) {
    fprintf(stderr, "esmtrain-example: embed: --include '%s': a comma-separated list of mean, "
            "per_tok, cls\n", include);
    return 2;
  }
  if (!strcmp(fmt, "safetensors")) o->safetensors = 1;
  else if (strcmp(fmt, "npy")) {
    fprintf(stderr, "esmtrain-example: embed: --format '%s': npy or safetensors\n", fmt);
    return 2;
  }
  if (!strcmp(lng, "windows")) o->long_policy = EMBED_WINDOWS;
  else if (strcmp(lng, "truncate")) {
    fprintf(stderr, "esmtrain-example: embed: --long '%s': truncate or windows\n", lng);
    return 2;
  }
  return 0;
}

static int resolve_layers(embed_options *o, const char *text, int L) {
  char items[EMBED_MAX_LAYERS + 1][16];
  const int n = parse_list(text, items, EMBED_MAX_LAYERS + 1);
  long long v;
  if (n <= 0 || n > EMBED_MAX_LAYERS) {
    fprintf(stderr, "esmtrain-example: embed: --repr-layers '%s': a comma-separated list of layers in "
            "-1..%d\n", text, L);
    return 2;
  }
  for (int k = 0; k < n; k++) {
    if (!cli_int_arg("embed", "--repr-layers", items[k], -1, L, &v)) return 2;
    o->layers[k] = v < 0 ? L : (int)v;
    for (int j = 0; j < k; j++)
      if (o->layers[j] == o->layers[k]) {
        fprintf(stderr, "esmtrain-example: embed: --repr-layers '%s' names layer %d twice\n", text,
                o->layers[k]);
        return 2;
      }
  }
  o->nl = n;
  return 0;
}

/* A progress line: rewritten in place every second on a terminal, a new
 * line every 10 s otherwise (a log file), and a last one at the end. */
static void progress(const embed_options *o, esmt_sequence_reader *r, const embed_stats *s,
                     uint64_t first, double t0, int last) {
  static double shown;
  static int tty = -1;
  if (tty < 0) tty = isatty(2);
  const double now = esmt_clock_seconds();
  if (o->quiet || (!last && now - shown < (tty ? 1.0 : 10.0))) return;
  shown = now;
  uint64_t done = 0, total = 0;
  esmt_sequence_reader_position(r, &done, &total);
  const double el = now - t0, rate = el > 0 ? (double)(s->proteins - first) / el : 0;
  fprintf(stderr, "%sembed: %llu proteins, %llu residues | %.1f proteins/s", tty ? "\r" : "",
          (unsigned long long)s->proteins, (unsigned long long)s->residues, rate);
  if (total && done <= total) {
    const double frac = (double)done / (double)total;
    const double eta = frac > 0 && el > 0 && !last ? el * (1 - frac) / frac : 0;
    fprintf(stderr, " | %5.1f%% of the input | ETA %.0fs   ", 100 * frac, eta);
  }
  if (last || !tty) fputc('\n', stderr);
}

/* Read up to a chunk of proteins after skipping `skip` (a resume), each
 * id checked against the committed ones' hash once they are all skipped. */
static int read_chunk(const embed_options *o, esmt_sequence_reader *r, embed_chunk *c,
                      embed_stats *s, int *eof) {
  esmt_sequence q = ESMT_SEQUENCE_INIT;
  while (c->residues < o->chunk_residues && c->n < 65536) {
    int got = 0;
    esmt_status st = esmt_sequence_reader_next(r, &q, &got);
    if (st) {
      cli_error("embed: input", st);
      return -1;
    }
    if (!got) {
      *eof = 1;
      return 0;
    }
    if (c->n == c->cap) {
      int cap = c->cap ? 2 * c->cap : 256;
      embed_protein *p = realloc(c->p, (size_t)cap * sizeof *p);
      if (!p) return fprintf(stderr, "esmtrain-example: embed: out of memory\n"), -1;
      c->p = p;
      c->cap = cap;
    }
    embed_protein *p = &c->p[c->n];
    memset(p, 0, sizeof *p);
    p->id = strdup(q.id);
    p->tokens = malloc((q.length ? q.length : 1) * sizeof(int32_t));
    if (!p->id || !p->tokens) {
      free(p->id);
      free(p->tokens);
      return fprintf(stderr, "esmtrain-example: embed: out of memory\n"), -1;
    }
    memcpy(p->tokens, q.tokens, q.length * sizeof(int32_t));
    p->length = (int64_t)q.length;
    s->unknown += q.unknown;
    c->n++;
    c->residues += (int64_t)q.length;
  }
  return 0;
}

void embed_chunk_clear(embed_chunk *c) {
  for (int i = 0; i < c->n; i++) {
    free(c->p[i].id);
    free(c->p[i].tokens);
    esmt_embedding_release(&c->p[i].e, 1);
  }
  c->n = 0;
  c->residues = 0;
}

/* Between batches: a stop signal cancels (the chunk is redone on resume). */
static int stop_on_signal(void *user, const esmt_progress *p) {
  (void)user;
  (void)p;
  return cli_signal_caught();
}

int embed_compute(const embed_options *o, esmt_model *m, embed_chunk *c) {
  const int32_t **res = malloc((size_t)c->n * sizeof *res);
  int64_t *len = malloc((size_t)c->n * sizeof *len);
  esmt_embedding *e = malloc((size_t)c->n * sizeof *e);
  if (!res || !len || !e) {
    free(res), free(len), free(e);
    return fprintf(stderr, "esmtrain-example: embed: out of memory\n"), -1;
  }
  for (int i = 0; i < c->n; i++) {
    res[i] = c->p[i].tokens;
    len[i] = c->p[i].length;
    e[i] = (esmt_embedding)ESMT_EMBEDDING_INIT;
  }
  esmt_embed_request q = ESMT_EMBED_REQUEST_INIT;
  q.num_layers = o->nl;
  q.layers = o->layers;
  q.per_token = (o->include & EMBED_PER_TOK) != 0;
  q.long_policy = o->long_policy == EMBED_WINDOWS ? ESMT_LONG_WINDOWS : ESMT_LONG_TRUNCATE;
  q.stride = o->stride;
  q.batch_tokens = o->batch_tokens;
  q.progress = stop_on_signal;
  esmt_status st = esmt_embed(m, &q, c->n, res, len, e);
  for (int i = 0; !st && i < c->n; i++) c->p[i].e = e[i];
  free(res), free(len), free(e);
  if (st == ESMT_ERR_CANCELLED && cli_signal_caught()) return 1;
  if (st) cli_error("embed", st);
  return st ? -1 : 0;
}

/* Skip the committed proteins of a resumed run, checking their ids. */
static int skip_committed(const embed_options *o, esmt_sequence_reader *r, const embed_stats *s) {
  esmt_sequence q = ESMT_SEQUENCE_INIT;
  uint64_t h = 0;
  for (uint64_t i = 0; i < s->proteins; i++) {
    int got = 0;
    esmt_status st = esmt_sequence_reader_next(r, &q, &got);
    if (st) return cli_error("embed: input", st), -1;
    if (!got) break;
    h = embed_id_hash(h, q.id);
  }
  if (h != s->ids_hash) {
    fprintf(stderr, "esmtrain-example: embed: the first %llu proteins of %s are not those %s/"
            "ids.txt committed: the input changed since the interrupted run. Nothing was "
            "changed; embed it into a new directory\n", (unsigned long long)s->proteins,
            o->input, o->out);
    return -1;
  }
  return 0;
}

/* Open the output: a resume re-opens the recorded files; a new embed (or
 * one restarting an attempt that committed nothing) first records that
 * OUT is embed's, removes that attempt's files, then creates its own. */
static int open_output(embed_output *w, const embed_options *o, const embed_model_info *mi,
                       const embed_stats *s, int mode, json_t *recorded) {
  embed_output_init(w, o, mi->hidden);
  if (mode == EMBED_RESUME) return embed_output_open(w, o, mi->hidden, s, recorded);
  if ((mode == EMBED_RESTART && embed_output_clear(o, recorded, 1)) ||
      embed_meta_write(o, mi, s, NULL, 0, 0) ||
      (mode == EMBED_RESTART && embed_output_clear(o, recorded, 0)))
    return -1;
  return embed_output_open(w, o, mi->hidden, NULL, NULL);
}

static int run(embed_options *o, esmt_model *m, const embed_model_info *mi, embed_stats *s,
               esmt_sequence_reader *r, int mode, json_t *recorded) {
  embed_output w;
  embed_chunk c = {0};
  int rc = 0, eof = 0;
  if (mode == EMBED_RESUME && skip_committed(o, r, s)) return 1;
  json_t *files = NULL;
  if (open_output(&w, o, mi, s, mode, recorded) || !(files = embed_output_files(&w)) ||
      embed_meta_write(o, mi, s, files, 0, 0)) {
    embed_output_close(&w);
    json_decref(files);
    return 1;
  }
  const double t0 = esmt_clock_seconds();
  const uint64_t first = s->proteins;
  /* what embed.json records: s counts a chunk before its commit */
  uint64_t committed = s->proteins;
  while (!eof && !rc) {
    if ((rc = read_chunk(o, r, &c, s, &eof) ? 1 : 0)) break;
    if (c.n && (rc = embed_compute(o, m, &c))) break;
    if (embed_output_write(&w, &c, s) || embed_output_commit(&w) ||
        embed_meta_write(o, mi, s, files, 0, esmt_clock_seconds() - t0))
      rc = -1;
    else
      committed = s->proteins;
    embed_chunk_clear(&c);
    progress(o, r, s, first, t0, 0);
    if (cli_signal_caught()) rc = 1;
  }
  embed_chunk_clear(&c);
  free(c.p);
  progress(o, r, s, first, t0, 1);
  if (!rc && (embed_output_finish(&w, s) ||
              embed_meta_write(o, mi, s, files, 1, esmt_clock_seconds() - t0) ||
              embed_output_remove_staging(&w)))
    rc = -1;
  embed_output_close(&w);
  json_decref(files);
  /* what the next run does: continue after the committed proteins, or,
   * when none is committed, start anew whatever the options */
  char next[4400];
  if (committed)
    snprintf(next, sizeof next, "%s keeps the %llu committed proteins: %s the same command "
             "continues after them", o->out, (unsigned long long)committed,
             cli_signal_caught() ? "running" : "once the cause is fixed,");
  else
    snprintf(next, sizeof next, "no protein was committed: %s it starts anew in %s",
             cli_signal_caught() ? "run again," : "once the cause is fixed,", o->out);
  if (rc && cli_signal_caught())
    fprintf(stderr, "esmtrain-example: embed: stopped by %s; %s\n",
            cli_signal_name(cli_signal_caught()), next);
  else if (rc)
    fprintf(stderr, "esmtrain-example: embed: failed; %s\n", next);
  else
    printf("embedded %llu proteins (%llu residues; %llu truncated, %llu in windows) into %s\n",
           (unsigned long long)s->proteins, (unsigned long long)s->residues,
           (unsigned long long)s->truncated, (unsigned long long)s->windowed, o->out);
  return rc ? (cli_signal_caught() ? 128 + cli_signal_caught() : 1) : 0;
}

int cmd_embed(int argc, char **argv) {
  embed_options o = {.batch_tokens = 16384};
  const char *layers = "-1";
  int rc = parse(argc, argv, &o, &layers);
  if (rc) return rc == 1 ? 0 : rc;
  char what[4200];
  if (esmt_path_inside(o.out, o.model) || (strcmp(o.input, "-") && esmt_path_inside(o.out, o.input))) {
    fprintf(stderr, "esmtrain-example: embed: -o %s is inside the model or the input: nothing "
            "was changed; choose an output directory outside them\n", o.out);
    return 1;
  }
  if (esmt_path_in_data(o.out, what, sizeof what)) {
    fprintf(stderr, "esmtrain-example: embed: -o %s is inside %s, which esmtrain reads: "
            "nothing was changed; choose an output directory outside it\n", o.out, what);
    return 1;
  }
  esmt_context *ctx = NULL;
  esmt_model *m = NULL;
  if (cli_model_open("embed", o.model, o.backend, o.threads, &ctx, &m)) return 1;
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_model_get_config(m, &mc);
  embed_model_info mi = {mc.num_layers, mc.hidden_size, mc.max_positions,
                         cli_model_is_hf(o.model) ? "huggingface" : "esmtrain",
                         esmt_context_backend_name(ctx), ""};
  if (embed_model_checksum(m, mi.weights, sizeof mi.weights)) rc = 1;
  o.window = mc.max_positions - 2;
  if (!o.stride) o.stride = o.window / 2 > 0 ? o.window / 2 : 1;
  if (o.stride > o.window) {
    fprintf(stderr, "esmtrain-example: embed: --window-stride %d is more than the window (%d "
            "residues): residues between windows would have no representation\n", o.stride,
            o.window);
    rc = 2;
  }
  /* a chunk: enough proteins to sort into well-filled batches; an
   * interruption loses at most one (10-30 s for esm2_t6_8M on 2 cores,
   * proportionally more for larger models) */
  o.chunk_residues = o.batch_tokens * 8 > 131072 ? o.batch_tokens * 8 : 131072;
  embed_stats s;
  int mode = EMBED_NEW;
  esmt_run_lock *lock = NULL;
  json_t *recorded = NULL;
  esmt_sequence_reader *r = NULL;
  if (!rc) rc = resolve_layers(&o, layers, mc.num_layers);
  /* nothing is created before the input opens and OUT is known to be usable */
  esmt_status st = rc ? ESMT_OK : esmt_sequence_reader_open(o.input, o.split, &r);
  if (st) rc = (cli_error("embed: input", st), 1);
  if (!rc && embed_input_checksum(o.input, o.input_content, sizeof o.input_content)) rc = 1;
  int done = 0; /* an identical finished embed: nothing to do, status 0 */
  if (!rc && (mode = embed_meta_check(&o, &mi, &s, 0, NULL)) < 0) rc = 1;
  done = !rc && mode == EMBED_COMPLETE;
  if (!rc && !done && !(lock = cli_run_lock(o.out, "embed"))) rc = 1;
  /* checked again under the lock: another process may have written meanwhile */
  if (!rc && !done && (mode = embed_meta_check(&o, &mi, &s, 1, &recorded)) < 0) rc = 1;
  done = done || (!rc && mode == EMBED_COMPLETE);
  if (!rc && !done) {
    cli_signals_catch(NULL);
    rc = run(&o, m, &mi, &s, r, mode, recorded);
  }
  json_decref(recorded);
  esmt_sequence_reader_close(r);
  esmt_run_lock_release(lock);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return rc;
}
