/* SPDX-License-Identifier: MIT */
/* `contacts MODEL INPUT -o OUT.safetensors`: the contact map of each
 * protein (esmt_predict_contacts) into one new safetensors file:
 *   contacts  float32 [sum of n_k^2]: protein k's [n_k, n_k] map, row-major,
 *             at elements offsets[k] .. offsets[k + 1]
 *   offsets   int64 [N + 1]
 *   lengths   int64 [N] residues
 * and the ids, one a line, in the header's "__metadata__" ("ids").
 * The arrays are streamed (esmt_npy_stream) into temporary files beside
 * OUT, OUT.PID.{contacts,offsets,lengths}.tmp, which the library then
 * copies into OUT.PID.safetensors.tmp; that is linked as OUT (never
 * replacing anything), so OUT appears complete or not at all. The
 * temporaries are removed in every case; those a killed run left (its PID
 * no longer running, a regular file of one link) are removed by the next
 * run into the same OUT. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "contacts.h"

#define PREFIX CONTACTS_PREFIX

static void usage(FILE *f) {
  fprintf(f,
    "usage: esmtrain-example contacts MODEL INPUT -o OUT.safetensors [options]\n"
    "       esmtrain-example contacts MODEL INPUT --format npy -o OUT_DIR [options]\n"
    "       esmtrain-example contacts MODEL INPUT --train-head PAIRS -o OUT_DIR [options]\n\n"
    "Residue-residue contact probabilities of each protein of INPUT (FASTA or FASTA.gz), as\n"
    "fair-esm's predict_contacts: every layer's attention maps without <cls>/<eos>,\n"
    "symmetrised, average-product corrected, the model's contact head (logistic regression)\n"
    "and a sigmoid. MODEL is a Hugging Face ESM-2 directory, a run or a checkpoint with a\n"
    "contact head. Proteins longer than the model's window (max_positions - 2 residues) are\n"
    "refused, or with --long windows cut into embed's windows whose maps are averaged where\n"
    "they overlap (a pair no window holds together is 0); empty records are refused.\n"
    "OUT (new; an existing file is refused) holds 'contacts'\n"
    "(float32, protein k's n x n map at offsets[k]..offsets[k+1]), 'offsets' and 'lengths'\n"
    "(int64) and the ids in its metadata; on any error it is not created. With --format npy\n"
    "OUT is a new directory of ID.npy (float32, n x n) per protein and index.tsv (id, length,\n"
    "file; ids made safe for file names: other bytes as '_', '~2', '~3' added to repeats),\n"
    "built as OUT.PID.tmp beside it and renamed at the end, so OUT appears whole or not at\n"
    "all; what a killed run left is removed by the next run into the same OUT.\n\n"
    "With --train-head the contact head is fitted instead (fair-esm's way: a logistic\n"
    "regression on the frozen model's attention features) on INPUT's proteins and the\n"
    "contacts listed in PAIRS, a text file of lines 'ID I J' (a record id of INPUT, two\n"
    "1-based residue numbers; every other pair at least --min-separation apart is a\n"
    "non-contact), and the model with the new head is exported to the new directory OUT_DIR\n"
    "(a Hugging Face EsmForMaskedLM directory, as `export` writes).\n\n"
    "options:\n"
    "  -o, --out FILE      the safetensors file (or --format npy directory) to create\n"
    "                      (required)\n"
    "  --format F          safetensors (default: one file) or npy (a directory)\n"
    "  --png DIR           also a new directory DIR of ID.png heat maps (900 x 800: residue\n"
    "                      i down, j across, probability 0..1 with a colour bar, the top\n"
    "                      L/5 pairs >= 24 apart circled) and index.tsv, renamed whole\n"
    "                      into place before OUT\n"
    "  --backend NAME      backend (default: $ESMTRAIN_BACKEND, else the best probed)\n"
    "  --threads N         CPU threads (default 0: all cores)\n"
    "  --quiet             no progress lines\n"
    "  --long refuse|windows  proteins over the window (default refuse)\n"
    "  --window-stride S   --long windows: residues between window starts (default half a\n"
    "                      window)\n"
    "  --train-head PAIRS  fit the contact head on PAIRS and export the model to OUT_DIR\n"
    "  --min-separation N  --train-head: pairs at least N apart are samples (default 6)\n"
    "  --l2 X              --train-head: L2 penalty on the standardised weights (default "
    "0.001)\n");
}

static int parse(int argc, char **argv, contacts_args *a) {
  const char *pos[2];
  int npos = 0;
  for (int i = 0; i < argc; i++) {
    const char *v = NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--quiet")) {
      a->quiet = 1;
    } else if (cli_flag_value("-o", argc, argv, &i, &v) ||
               cli_flag_value("--out", argc, argv, &i, &v)) {
      if (!v) goto missing;
      a->out = v;
    } else if (cli_flag_value("--backend", argc, argv, &i, &v)) {
      if (!v) goto missing;
      a->backend = v;
    } else if (cli_flag_value("--train-head", argc, argv, &i, &v)) {
      if (!v) goto missing;
      a->train_pairs = v;
    } else if (cli_flag_value("--min-separation", argc, argv, &i, &v)) {
      if (!v) goto missing;
      if (!cli_int_arg("contacts", "--min-separation", v, 1, 100000, &a->min_separation))
        return 2;
    } else if (cli_flag_value("--l2", argc, argv, &i, &v)) {
      if (!v) goto missing;
      if (!cli_double_arg("contacts", "--l2", v, 0, 1e6, &a->l2)) return 2;
    } else if (cli_flag_value("--png", argc, argv, &i, &v)) {
      if (!v) goto missing;
      a->png = v;
    } else if (cli_flag_value("--format", argc, argv, &i, &v)) {
      if (!v) goto missing;
      if (strcmp(v, "safetensors") && strcmp(v, "npy")) {
        fprintf(stderr, PREFIX "--format '%s': safetensors or npy\n", cli_esc(v));
        return 2;
      }
      a->npy = !strcmp(v, "npy");
    } else if (cli_flag_value("--long", argc, argv, &i, &v)) {
      if (!v) goto missing;
      if (strcmp(v, "refuse") && strcmp(v, "windows")) {
        fprintf(stderr, PREFIX "--long '%s': refuse or windows\n", cli_esc(v));
        return 2;
      }
      a->windows = !strcmp(v, "windows");
    } else if (cli_flag_value("--window-stride", argc, argv, &i, &v)) {
      if (!v) goto missing;
      if (!cli_int_arg("contacts", "--window-stride", v, 1, 1 << 20, &a->stride)) return 2;
    } else if (cli_flag_value("--threads", argc, argv, &i, &v)) {
      if (!v) goto missing;
      if (!cli_int_arg("contacts", "--threads", v, 0, 4096, &a->threads)) return 2;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, PREFIX "unknown option '%s'\n", cli_esc(argv[i]));
      return 2;
    } else if (npos < 2) {
      pos[npos++] = argv[i];
    } else {
      fprintf(stderr, PREFIX "unexpected argument '%s'\n", cli_esc(argv[i]));
      return 2;
    }
    continue;
  missing:
    fprintf(stderr, PREFIX "%s needs a value\n", argv[i]);
    return 2;
  }
  if (a->png && a->train_pairs) {
    fprintf(stderr, PREFIX "--png draws contact maps; --train-head exports a model\n");
    return 2;
  }
  if (a->png && !contacts_png_available()) {
    fprintf(stderr, PREFIX "--png: this build has no cairo (libcairo2-dev; see `plot`)\n");
    return 2;
  }
  if (a->npy && a->train_pairs) {
    fprintf(stderr, PREFIX "--format npy writes contact maps; --train-head exports a model\n");
    return 2;
  }
  if (npos < 2 || !a->out) {
    usage(stderr);
    return 2;
  }
  a->model = pos[0];
  a->input = pos[1];
  return -1;
}

/* The temporary arrays: created new beside OUT (OUT.PID.NAME.tmp, never
 * replacing a file) and removed at the end. */
static const char *const k_names[3] = {"contacts", "offsets", "lengths"};

static void say_removed(const char *path, void *user) {
  (void)user;
  fprintf(stderr, "contacts: removed %s, left by a run that was killed\n", cli_esc(path));
}

/* The temporaries a killed run into the same OUT left, removed, each said. */
static void remove_stale(const char *out) {
  static const char *const kinds[] = {"contacts.tmp", "offsets.tmp", "lengths.tmp",
                                      "safetensors.tmp"};
  esmt_remove_dead_temporaries(out, kinds, 4, say_removed, NULL);
}

/* The finished file, OUT.PID.safetensors.tmp, linked as OUT: a link never
 * replaces an existing file, and OUT is never seen half written. */
static int publish(const char *tmp, const char *out) {
  int rc = 0;
  if (link(tmp, out) != 0) {
    if (errno == EEXIST)
      fprintf(stderr, PREFIX "%s appeared meanwhile: nothing written\n", cli_esc(out));
    else
      fprintf(stderr, PREFIX "cannot create %s: %s\n", cli_esc(out), strerror(errno));
    rc = 1;
  }
  unlink(tmp); /* this run's own */
  return rc;
}

typedef struct staged {
  int fd[3];
  char path[3][4200];
  esmt_npy_stream *s[3];
  char *ids;
  size_t ids_len, ids_cap;
} staged;

static int stage_open(staged *t, const char *out) {
  static const esmt_npy_dtype types[3] = {ESMT_NPY_F32, ESMT_NPY_I64, ESMT_NPY_I64};
  for (int i = 0; i < 3; i++) t->fd[i] = -1;
  for (int i = 0; i < 3; i++) {
    snprintf(t->path[i], sizeof t->path[i], "%s.%ld.%s.tmp", out, (long)getpid(), k_names[i]);
    esmt_status st = esmt_owned_file_create(t->path[i], &t->fd[i]);
    if (st) {
      t->fd[i] = -1;
      t->path[i][0] = 0;
      cli_error("contacts: output", st);
      return 1;
    }
    st = esmt_npy_stream_start(t->fd[i], t->path[i], types[i], 0, -1, &t->s[i]);
    if (st) {
      cli_error("contacts: output", st);
      return 1;
    }
  }
  return 0;
}

static void stage_close(staged *t) {
  for (int i = 0; i < 3; i++) {
    esmt_npy_stream_end(t->s[i]);
    if (t->fd[i] >= 0) close(t->fd[i]);
    if (t->path[i][0]) unlink(t->path[i]); /* this command created it */
  }
  free(t->ids);
}

static int keep_id(staged *t, const char *id) {
  const size_t n = strlen(id) + 1;
  if (t->ids_len + n + 1 > t->ids_cap) {
    const size_t cap = (t->ids_len + n + 1) * 2;
    char *p = realloc(t->ids, cap);
    if (!p) return 1;
    t->ids = p;
    t->ids_cap = cap;
  }
  if (t->ids_len) t->ids[t->ids_len - 1] = '\n';
  memcpy(t->ids + t->ids_len, id, n);
  t->ids_len += n;
  return 0;
}

/* Every protein of the input into the staged arrays, or with dir (--format
 * npy) into the directory; with png (--png) also drawn there. */
static int predict_all(const contacts_args *a, esmt_model *model, staged *t,
                       esmt_contact_dir *dir, esmt_contact_dir *png, int64_t *count) {
  esmt_sequence_reader *in = NULL;
  esmt_status st = esmt_sequence_reader_open(a->input, NULL, &in);
  if (st) {
    cli_error("contacts: input", st);
    return 1;
  }
  int64_t offset = 0;
  int rc = 0;
  float *map = NULL;
  if (!dir && (st = esmt_npy_stream_append(t->s[1], &offset, 1))) goto failed;
  for (;;) {
    esmt_sequence q = ESMT_SEQUENCE_INIT;
    int got = 0;
    if ((st = esmt_sequence_reader_next(in, &q, &got))) {
      cli_error("contacts: input", st);
      rc = 1;
      break;
    }
    if (!got || cli_signal_caught()) break;
    if (q.length > (1u << 20)) {
      fprintf(stderr, PREFIX "record '%s' (number %llu) has %llu residues: too long\n",
              cli_esc(q.id), (unsigned long long)q.index + 1, (unsigned long long)q.length);
      rc = 1;
      break;
    }
    const int n = (int)q.length;
    float *m = realloc(map, (size_t)(n ? n : 1) * (size_t)(n ? n : 1) * sizeof *m);
    if (!m) {
      fprintf(stderr, PREFIX "out of memory for record '%s'\n", cli_esc(q.id));
      rc = 1;
      break;
    }
    map = m;
    st = a->windows ? esmt_predict_contacts_windowed(model, q.tokens, n, (int)a->stride, map)
                    : esmt_predict_contacts(model, q.tokens, n, map);
    if (st) {
      char what[512];
      snprintf(what, sizeof what, "contacts: record '%s' (number %llu)", cli_esc(q.id),
               (unsigned long long)q.index + 1);
      cli_error(what, st);
      esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
      if (!a->windows && !esmt_model_get_config(model, &mc) && n > mc.max_positions - 2)
        fprintf(stderr, PREFIX "--long windows averages the maps of windows over it\n");
      rc = 1;
      break;
    }
    const int64_t len = n;
    offset += len * len;
    if (dir) {
      if ((st = esmt_contact_dir_add(dir, q.id, map, n))) goto failed;
    } else if ((st = esmt_npy_stream_append(t->s[0], map, (uint64_t)len * len)) ||
        (st = esmt_npy_stream_append(t->s[1], &offset, 1)) ||
        (st = esmt_npy_stream_append(t->s[2], &len, 1)))
      goto failed;
    if (!dir && keep_id(t, q.id)) {
      fprintf(stderr, PREFIX "out of memory for the ids\n");
      rc = 1;
      break;
    }
    if (png && contacts_png_write(png, q.id, map, n)) {
      rc = 1;
      break;
    }
    ++*count;
    if (!a->quiet)
      fprintf(stderr, "contacts: %lld proteins\r", (long long)*count);
  }
  if (!rc && cli_signal_caught()) {
    fprintf(stderr, PREFIX "stopped by %s: nothing written\n",
            cli_signal_name(cli_signal_caught()));
    rc = 1;
  }
  free(map);
  esmt_sequence_reader_close(in);
  return rc;
failed:
  cli_error("contacts: output", st);
  free(map);
  esmt_sequence_reader_close(in);
  return 1;
}

/* --png: the figures' directory renamed into place; messages printed. */
static int finish_png(esmt_contact_dir *png, const char *path, int quiet) {
  if (!png) return 0;
  esmt_status st = esmt_contact_dir_finish(png);
  if (st) {
    cli_error("contacts: --png", st);
    return 1;
  }
  if (!quiet) fprintf(stderr, "contacts: contact map figures into %s\n", cli_esc(path));
  return 0;
}

/* --format npy: the maps into a new directory (esmt_contact_dir). */
static int write_npy_dir(const contacts_args *a, esmt_model *model, esmt_contact_dir *png) {
  esmt_contact_dir *dir = NULL;
  esmt_status st = esmt_contact_dir_begin(a->out, say_removed, NULL, &dir);
  if (st) {
    cli_error("contacts: output", st);
    return 1;
  }
  int64_t count = 0;
  int rc = predict_all(a, model, NULL, dir, png, &count);
  if (!rc && count == 0) {
    fprintf(stderr, PREFIX "%s holds no protein: nothing written\n", cli_esc(a->input));
    rc = 1;
  }
  if (!rc) rc = finish_png(png, a->png, a->quiet); /* the figures first: OUT last */
  if (!rc && (st = esmt_contact_dir_finish(dir))) {
    cli_error("contacts: output", st);
    rc = 1;
  }
  if (!rc && !a->quiet)
    fprintf(stderr, "contacts: %lld proteins into %s\n", (long long)count, cli_esc(a->out));
  esmt_contact_dir_close(dir);
  return rc;
}

int cmd_contacts(int argc, char **argv) {
  contacts_args a = {.min_separation = 6, .l2 = 1e-3};
  int rc = parse(argc, argv, &a);
  if (rc >= 0) return rc;
  struct stat sb;
  if (lstat(a.out, &sb) == 0) {
    fprintf(stderr, PREFIX "%s exists: nothing written (contacts creates a new %s; move it "
            "away or choose another name)\n", cli_esc(a.out),
            a.train_pairs || a.npy ? "directory" : "file");
    return 1;
  }
  const char *inputs[3] = {a.model, a.input, a.train_pairs};
  if (cli_output_path_check("contacts", a.out, inputs, a.train_pairs ? 3 : 2)) return 1;
  if (a.png) {
    if (lstat(a.png, &sb) == 0) {
      fprintf(stderr, PREFIX "--png %s exists: nothing written (--png creates a new "
              "directory; move it away or choose another name)\n", cli_esc(a.png));
      return 1;
    }
    if (!strcmp(a.png, a.out)) {
      fprintf(stderr, PREFIX "--png %s is OUT too: the figures need a directory of their "
              "own\n", cli_esc(a.png));
      return 1;
    }
    if (cli_output_path_check("contacts", a.png, inputs, 2)) return 1;
  }
  esmt_context *ctx = NULL;
  esmt_model *model = NULL;
  if (cli_model_open("contacts", a.model, a.backend, (int)a.threads, &ctx, &model)) return 1;
  if (a.train_pairs) {
    rc = contacts_train_run(&a, model);
    esmt_model_destroy(model);
    esmt_context_destroy(ctx);
    return rc;
  }
  cli_signals_catch(NULL);
  esmt_contact_dir *png = NULL;
  if (a.png) {
    esmt_status st = esmt_contact_dir_begin(a.png, say_removed, NULL, &png);
    if (st) {
      cli_error("contacts: --png", st);
      esmt_model_destroy(model);
      esmt_context_destroy(ctx);
      return 1;
    }
  }
  if (a.npy) {
    rc = write_npy_dir(&a, model, png);
    esmt_contact_dir_close(png);
    esmt_model_destroy(model);
    esmt_context_destroy(ctx);
    return rc;
  }
  remove_stale(a.out);
  staged t = {0};
  int64_t count = 0;
  rc = stage_open(&t, a.out);
  if (!rc) rc = predict_all(&a, model, &t, NULL, png, &count);
  if (!rc && count == 0) {
    fprintf(stderr, PREFIX "%s holds no protein: nothing written\n", cli_esc(a.input));
    rc = 1;
  }
  if (!rc) rc = finish_png(png, a.png, a.quiet); /* the figures first: OUT last */
  if (!rc) {
    const char *meta[] = {"format", "esmtrain-contacts", "ids", t.ids};
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.safetensors.tmp", a.out, (long)getpid());
    esmt_status st = esmt_npy_streams_to_safetensors(tmp, t.s, k_names, 3, meta, 2);
    if (st)
      cli_error("contacts: output", st);
    rc = st ? 1 : publish(tmp, a.out);
    if (!rc && !a.quiet)
      fprintf(stderr, "contacts: %lld proteins into %s\n", (long long)count, cli_esc(a.out));
  }
  stage_close(&t);
  esmt_contact_dir_close(png);
  esmt_model_destroy(model);
  esmt_context_destroy(ctx);
  return rc;
}
