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
      "  --include K1,K2,..   mean, per_tok, cls (bos is cls), attention (default mean);\n"
      "                       attention: attn.layer<L>.npy, flat fp32, protein k's [heads,\n"
      "                       n, n] (residues only) at attn.offsets.npy[k]..[k+1]; layers\n"
      "                       1..L; its size is printed before the run starts\n"
      "  --max-attention-bytes N  a protein whose attention maps take more than N bytes\n"
      "                       is refused before anything is written (default 1073741824;\n"
      "                       0: no cap)\n"
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
    } else if (flag("--max-attention-bytes", argc, argv, &i, &val, &bad)) {
      if (bad || !cli_int_arg("embed", "--max-attention-bytes", val, 0, 1ll << 62, &v)) return 2;
      o->max_attention_bytes = (uint64_t)v;
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
    if (!strcmp(kinds[k], "mean")) o->include |= ESMT_EMBED_MEAN;
    else if (!strcmp(kinds[k], "per_tok")) o->include |= ESMT_EMBED_PER_TOKEN;
    else if (!strcmp(kinds[k], "cls") || !strcmp(kinds[k], "bos")) o->include |= ESMT_EMBED_CLS;
    else if (!strcmp(kinds[k], "attention")) o->include |= ESMT_EMBED_ATTENTION;
    else {
      o->include = 0;
      break;
    }
  }
  if (nk <= 0 || !o->include) {
    fprintf(stderr, "esmtrain-example: embed: --include '%s': a comma-separated list of mean, "
            "per_tok, cls, attention\n", include);
    return 2;
  }
  if (!strcmp(fmt, "safetensors")) o->safetensors = 1;
  else if (strcmp(fmt, "npy")) {
    fprintf(stderr, "esmtrain-example: embed: --format '%s': npy or safetensors\n", fmt);
    return 2;
  }
  if (!strcmp(lng, "windows")) o->long_policy = ESMT_LONG_WINDOWS;
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
static void progress(const embed_options *o, esmt_sequence_reader *r,
                     const esmt_embed_dir_status *s, uint64_t first, double t0, int last) {
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


/* The library's refusal or failure, as this command's message. */
static int said(esmt_status st) {
  if (st) fprintf(stderr, "esmtrain-example: embed: %s\n", esmt_last_error());
  return st ? -1 : 0;
}

/* Read up to a chunk of proteins (after the committed ones a resume skipped). */
static int read_chunk(const embed_options *o, esmt_sequence_reader *r, embed_chunk *c, int *eof) {
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
      const int cap = c->cap ? 2 * c->cap : 256;
      char **ids = realloc(c->ids, (size_t)cap * sizeof *ids);
      if (ids) c->ids = ids;
      int32_t **tokens = ids ? realloc(c->tokens, (size_t)cap * sizeof *tokens) : NULL;
      if (tokens) c->tokens = tokens;
      int64_t *lengths = tokens ? realloc(c->lengths, (size_t)cap * sizeof *lengths) : NULL;
      if (lengths) c->lengths = lengths;
      esmt_embedding *e = lengths ? realloc(c->e, (size_t)cap * sizeof *e) : NULL;
      if (!e) return fprintf(stderr, "esmtrain-example: embed: out of memory\n"), -1;
      c->e = e;
      c->cap = cap;
    }
    const int i = c->n;
    c->ids[i] = strdup(q.id);
    c->tokens[i] = malloc((q.length ? q.length : 1) * sizeof(int32_t));
    c->e[i] = (esmt_embedding)ESMT_EMBEDDING_INIT;
    if (!c->ids[i] || !c->tokens[i]) {
      free(c->ids[i]);
      free(c->tokens[i]);
      return fprintf(stderr, "esmtrain-example: embed: out of memory\n"), -1;
    }
    memcpy(c->tokens[i], q.tokens, q.length * sizeof(int32_t));
    c->lengths[i] = (int64_t)q.length;
    c->unknown += q.unknown;
    c->n++;
    c->residues += (int64_t)q.length;
  }
  return 0;
}

static void chunk_clear(embed_chunk *c) {
  for (int i = 0; i < c->n; i++) {
    free(c->ids[i]);
    free(c->tokens[i]);
  }
  esmt_embedding_release(c->e, c->n);
  c->n = 0;
  c->residues = 0;
  c->unknown = 0;
}

static void chunk_free(embed_chunk *c) {
  chunk_clear(c);
  free(c->ids);
  free(c->tokens);
  free(c->lengths);
  free(c->e);
}

/* Between batches: a stop signal cancels (the chunk is redone on resume). */
static int stop_on_signal(void *user, const esmt_progress *p) {
  (void)user;
  (void)p;
  return cli_signal_caught();
}

/* Representations of every protein of the chunk: 0, 1 when a stop signal
 * ended it, or -1 after printing why. */
static int compute(const embed_options *o, esmt_model *m, embed_chunk *c) {
  if ((o->include & ESMT_EMBED_ATTENTION) && embed_attention_check_chunk(o, m, c)) return -1;
  esmt_embed_request q = ESMT_EMBED_REQUEST_INIT;
  q.num_layers = o->nl;
  q.layers = o->layers;
  q.per_token = (o->include & ESMT_EMBED_PER_TOKEN) != 0;
  q.attention = (o->include & ESMT_EMBED_ATTENTION) != 0;
  q.max_attention_bytes = o->max_attention_bytes;
  q.long_policy = o->long_policy;
  q.stride = o->stride;
  q.batch_tokens = o->batch_tokens;
  q.progress = stop_on_signal;
  esmt_status st = esmt_embed(m, &q, c->n, (const int32_t *const *)c->tokens, c->lengths, c->e);
  if (st == ESMT_ERR_CANCELLED && cli_signal_caught()) return 1;
  if (st) cli_error("embed", st);
  return st ? -1 : 0;
}

/* Skip the committed proteins of a resumed run; the library checks their ids. */
static int skip_committed(esmt_embed_dir *dir, esmt_sequence_reader *r, uint64_t committed) {
  esmt_sequence q = ESMT_SEQUENCE_INIT;
  for (uint64_t i = 0; i < committed; i++) {
    int got = 0;
    esmt_status st = esmt_sequence_reader_next(r, &q, &got);
    if (st) return cli_error("embed: input", st), -1;
    if (!got) break;
    if (said(esmt_embed_dir_skip(dir, q.id))) return -1;
  }
  return 0;
}

static int run(const embed_options *o, esmt_model *m, esmt_embed_dir *dir,
               esmt_sequence_reader *r) {
  esmt_embed_dir_status s = ESMT_EMBED_DIR_STATUS_INIT;
  esmt_embed_dir_status_get(dir, &s);
  if (s.state == ESMT_EMBED_DIR_RESUME && skip_committed(dir, r, s.proteins)) return 1;
  if (said(esmt_embed_dir_begin(dir))) return 1;
  embed_chunk c = {0};
  int rc = 0, eof = 0;
  const double t0 = esmt_clock_seconds();
  const uint64_t first = s.proteins;
  /* what embed.json records: the status counts a chunk before its commit */
  uint64_t committed = s.proteins;
  while (!eof && !rc) {
    if ((rc = read_chunk(o, r, &c, &eof) ? 1 : 0)) break;
    if (c.n && (rc = compute(o, m, &c))) break;
    if (said(esmt_embed_dir_append(dir, c.n, (const char *const *)c.ids, c.e, c.unknown)) ||
        said(esmt_embed_dir_commit(dir)))
      rc = -1;
    esmt_embed_dir_status_get(dir, &s);
    if (!rc) committed = s.proteins;
    chunk_clear(&c);
    progress(o, r, &s, first, t0, 0);
    if (cli_signal_caught()) rc = 1;
  }
  chunk_free(&c);
  progress(o, r, &s, first, t0, 1);
  if (!rc && said(esmt_embed_dir_finish(dir))) rc = -1;
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
           (unsigned long long)s.proteins, (unsigned long long)s.residues,
           (unsigned long long)s.truncated, (unsigned long long)s.windowed, o->out);
  return rc ? (cli_signal_caught() ? 128 + cli_signal_caught() : 1) : 0;
}

/* What the directory holds, said as embed says it: 1 when an identical
 * finished embed leaves nothing to do; `announce`: a resume or restart. */
static int say_state(const embed_options *o, esmt_embed_dir *dir, int announce) {
  esmt_embed_dir_status s = ESMT_EMBED_DIR_STATUS_INIT;
  esmt_embed_dir_status_get(dir, &s);
  if (s.state == ESMT_EMBED_DIR_COMPLETE) {
    fprintf(stderr, "esmtrain-example: embed: %s is complete already (%llu proteins) for the "
            "same request, model and input: %s\n", o->out, (unsigned long long)s.proteins,
            s.staging_removed ? "only the staging .npy arrays an interrupted run left were "
                                "removed" : "nothing was changed");
    return 1;
  }
  if (announce && s.state == ESMT_EMBED_DIR_RESTART)
    fprintf(stderr, "esmtrain-example: embed: %s holds an unfinished embed that committed no "
            "protein: starting anew\n", o->out);
  if (announce && s.state == ESMT_EMBED_DIR_RESUME)
    fprintf(stderr, "esmtrain-example: embed: %s holds an unfinished embed of the same "
            "request, model and input: resuming after %llu proteins\n", o->out,
            (unsigned long long)s.proteins);
  return 0;
}

int cmd_embed(int argc, char **argv) {
  embed_options o = {.batch_tokens = 16384, .max_attention_bytes = 1ull << 30};
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
  esmt_run_lock *lock = NULL;
  esmt_sequence_reader *r = NULL;
  esmt_embed_dir *dir = NULL;
  if (!rc) rc = resolve_layers(&o, layers, mc.num_layers);
  if (!rc && (o.include & ESMT_EMBED_ATTENTION) && o.long_policy == ESMT_LONG_WINDOWS) {
    fprintf(stderr, "esmtrain-example: embed: --include attention with --long windows: "
            "attention maps of windows are not averaged; use --long truncate\n");
    rc = 2;
  }
  if (!rc && (o.include & ESMT_EMBED_ATTENTION) && embed_attention_estimate(&o, m)) rc = 1;
  /* nothing is created before the input opens and OUT is known to be usable */
  esmt_status st = rc ? ESMT_OK : esmt_sequence_reader_open(o.input, o.split, &r);
  if (st) rc = (cli_error("embed: input", st), 1);
  esmt_embed_dir_options eo = ESMT_EMBED_DIR_OPTIONS_INIT;
  eo.out = o.out;
  eo.model = m;
  eo.model_path = o.model;
  eo.model_kind = cli_model_is_hf(o.model) ? "huggingface" : "esmtrain";
  eo.backend = esmt_context_backend_name(ctx);
  eo.input = o.input;
  eo.split = o.split;
  eo.num_layers = o.nl;
  eo.layers = o.layers;
  eo.include = o.include;
  eo.long_policy = o.long_policy;
  eo.stride = o.stride;
  eo.safetensors = o.safetensors;
  if (!rc && said(esmt_embed_dir_open(&eo, &dir))) rc = 1;
  int done = !rc && say_state(&o, dir, 0); /* an identical finished embed: status 0 */
  if (!rc && !done && !(lock = cli_run_lock(o.out, "embed"))) rc = 1;
  /* checked again under the lock: another process may have written meanwhile */
  if (!rc && !done && said(esmt_embed_dir_check(dir))) rc = 1;
  done = done || (!rc && say_state(&o, dir, 1));
  if (!rc && !done) {
    cli_signals_catch(NULL);
    rc = run(&o, m, dir, r);
  }
  esmt_embed_dir_close(dir);
  esmt_sequence_reader_close(r);
  esmt_run_lock_release(lock);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return rc;
}
