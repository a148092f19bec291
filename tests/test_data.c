/* SPDX-License-Identifier: MIT */
/* Data pipeline: alphabet, FASTA edge cases, malformed inputs (each a
 * clear error, a non-zero status and no dataset left behind), the real
 * UniProt sample from Debian's mmseqs2-examples, and loader properties. */
#define _GNU_SOURCE
#include "test_util.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "esmtrain/esmtrain.h"

#define REAL_DB "/usr/share/doc/mmseqs2/example-data/DB.fasta.gz"

static char g_tmp[256];

static int setup(void **state) {
  (void)state;
  snprintf(g_tmp, sizeof g_tmp, "%s", test_mkdtemp());
  return 0;
}
static int teardown(void **state) {
  (void)state;
  test_rmtree(g_tmp);
  return 0;
}

/* Paths in the test's directory; each call's result lives for 16 calls. */
static const char *tmp_path(const char *name) {
  static char buf[16][512];
  static int k;
  k = (k + 1) % 16;
  snprintf(buf[k], sizeof buf[k], "%s/%s", g_tmp, name);
  return buf[k];
}

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

static void write_gz(const char *path, const char *text) {
  gzFile g = gzopen(path, "wb");
  assert_non_null(g);
  assert_int_equal(gzwrite(g, text, (unsigned)strlen(text)), (int)strlen(text));
  assert_int_equal(gzclose(g), Z_OK);
}

#define ASSERT_OK(expr)                                              \
  do {                                                               \
    esmt_status st_ = (expr);                                        \
    if (st_ != ESMT_OK) fail_msg("%s: %s", #expr, esmt_last_error()); \
  } while (0)

static esmt_status ingest_one(const char *input, const char *out, esmt_ingest_stats *s,
                              esmt_unknown_policy unk, esmt_gap_policy gaps) {
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  const char *in[] = {input};
  o.inputs = in;
  o.n_inputs = 1;
  o.output_dir = out;
  o.valid_fraction = 0.1;
  o.unknown = unk;
  o.gaps = gaps;
  esmt_ingest_stats local = ESMT_INGEST_STATS_INIT;
  return esmt_ingest(&o, s ? s : &local);
}

/* Nothing named like the output, nor a temporary sibling, survives. */
static void assert_nothing_left(const char *out) {
  assert_int_not_equal(access(out, F_OK), 0);
  DIR *d = opendir(g_tmp);
  assert_non_null(d);
  struct dirent *de;
  const char *base = strrchr(out, '/') + 1;
  while ((de = readdir(d)))
    if (strncmp(de->d_name, base, strlen(base)) == 0 && strstr(de->d_name, ".tmp-"))
      fail_msg("temporary %s left behind", de->d_name);
  closedir(d);
}

static void expect_error(const char *input, const char *fragment, esmt_unknown_policy unk,
                         esmt_gap_policy gaps) {
  const char *out = tmp_path("out-bad");
  esmt_status st = ingest_one(input, out, NULL, unk, gaps);
  if (st == ESMT_OK) fail_msg("ingest of %s succeeded; expected an error with '%s'", input, fragment);
  if (!strstr(esmt_last_error(), fragment))
    fail_msg("message '%s' lacks '%s'", esmt_last_error(), fragment);
  assert_nothing_left(out);
}

static void test_alphabet(void **state) {
  (void)state;
  const char *order = "LAGVSERTIDPKQNFYMHWCXBUZO";
  for (int i = 0; order[i]; i++) {
    assert_int_equal(esmt_token_id(order[i]), 4 + i);
    assert_int_equal(esmt_token_id(order[i] + 32), 4 + i); /* lowercase */
  }
  assert_int_equal(esmt_token_id('.'), 29);
  assert_int_equal(esmt_token_id('-'), 30);
  assert_int_equal(esmt_token_id('J'), -1);
  assert_int_equal(esmt_token_id('1'), -1);
  assert_int_equal(esmt_token_id(200), -1);
  assert_string_equal(esmt_token_string(0), "<cls>");
  assert_string_equal(esmt_token_string(32), "<mask>");
  assert_string_equal(esmt_token_string(4), "L");
  assert_null(esmt_token_string(33));
}

static void test_fasta_edge_cases(void **state) {
  (void)state;
  /* CRLF, blank lines, multi-line records, lowercase, a terminal '*',
   * an empty record, a duplicate id, gaps, an unknown letter. */
  const char *in = tmp_path("edge.fa");
  write_text(in, "\r\n>a desc\r\nMKV\r\nlla*\r\n\r\n>empty\n>b\nAC-D.E\n>a\nXJK\n");
  esmt_ingest_stats s = ESMT_INGEST_STATS_INIT;
  const char *out = tmp_path("edge-out");
  ASSERT_OK(ingest_one(in, out, &s, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_DROP));
  assert_int_equal(s.records, 3);
  assert_int_equal(s.residues, 6 + 4 + 3);
  assert_int_equal(s.empty_records, 1);
  assert_int_equal(s.terminal_stops, 1);
  assert_int_equal(s.duplicate_ids, 1);
  assert_int_equal(s.gaps_dropped, 2);
  assert_int_equal(s.unknown_letters, 1); /* J */
  assert_int_equal(s.lowercase_letters, 3);
  /* the same through gzip with two concatenated members */
  const char *gz = tmp_path("edge.fa.gz");
  write_gz(gz, ">x\nMKV\n");
  FILE *f = fopen(gz, "ab");
  gzFile g = gzdopen(fileno(f), "ab");
  gzputs(g, ">y\nLLA\n");
  gzclose(g);
  ASSERT_OK(ingest_one(gz, tmp_path("gz-out"), &s, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP));
  assert_int_equal(s.records, 2);
  assert_int_equal(s.residues, 6);
  /* skip policy drops the record with J */
  ASSERT_OK(ingest_one(in, tmp_path("skip-out"), &s, ESMT_UNKNOWN_SKIP, ESMT_GAPS_KEEP));
  assert_int_equal(s.skipped_records, 1);
  assert_int_equal(s.records, 2);
  /* max_residues skips longer records (counted); a gap dropped first can
   * bring a record under the limit */
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  const char *ins[] = {in};
  o.inputs = ins;
  o.n_inputs = 1;
  o.output_dir = tmp_path("maxlen-out");
  o.gaps = ESMT_GAPS_DROP;
  o.max_residues = 4;
  ASSERT_OK(esmt_ingest(&o, &s));
  assert_int_equal(s.too_long_records, 1); /* a: MKVLLA */
  assert_int_equal(s.records, 2);
  assert_int_equal(s.residues, 4 + 3);
  assert_int_equal(s.longest, 4);
}

static void test_long_line(void **state) {
  (void)state;
  const size_t n = 10u << 20; /* a 10 MB sequence line */
  char *buf = malloc(n + 16);
  memcpy(buf, ">long\n", 6);
  for (size_t i = 0; i < n; i++) buf[6 + i] = "ACDEFGHIKLMNPQRSTVWY"[i % 20];
  buf[6 + n] = '\n';
  const char *in = tmp_path("long.fa");
  write_bytes(in, buf, n + 7);
  free(buf);
  esmt_ingest_stats s = ESMT_INGEST_STATS_INIT;
  assert_int_equal(ingest_one(in, tmp_path("long-out"), &s, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP),
                   ESMT_OK);
  assert_int_equal(s.residues, n);
  assert_int_equal(s.longest, n);
}

static void test_malformed_inputs(void **state) {
  (void)state;
  const char *p;
  p = tmp_path("empty.fa"); write_text(p, "");
  expect_error(p, "no FASTA records", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  p = tmp_path("noheader.fa"); write_text(p, "MKVLA\nGGG\n");
  expect_error(p, "before the first '>' header", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  p = tmp_path("headeronly.fa"); write_text(p, ">only a header\n");
  expect_error(p, "no residues", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  static const unsigned char junk[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0xff, 0xfe, 0x10, 0};
  p = tmp_path("junk.fa"); write_bytes(p, junk, sizeof junk);
  expect_error(p, "before any header", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  static const char nul[] = ">a\nMK\0VL\n";
  p = tmp_path("nul.fa"); write_bytes(p, nul, sizeof nul - 1);
  expect_error(p, "NUL byte", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  p = tmp_path("utf8.fa"); write_text(p, ">a\nMK\xc3\xa9VL\n");
  expect_error(p, "non-ASCII", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  p = tmp_path("digits.fa"); write_text(p, ">a\nMKV\n>b\nMK12VL\n");
  expect_error(p, "'1' is not an amino-acid letter", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  expect_error(p, "record 'b'", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  p = tmp_path("ctl.fa"); write_text(p, ">a\x01b\nMKV\n");
  expect_error(p, "control character", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  p = tmp_path("unknown.fa"); write_text(p, ">a\nMKJV\n");
  expect_error(p, "unknown residue 'J'", ESMT_UNKNOWN_FAIL, ESMT_GAPS_KEEP);
  p = tmp_path("gaps.fa"); write_text(p, ">a\nMK-V\n");
  expect_error(p, "gap character", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_FAIL);
  /* a truncated gzip stream */
  const char *gz = tmp_path("trunc.fa.gz");
  char big[20000];
  int k = sprintf(big, ">t\n");
  for (int i = 0; i < 19000; i++) big[k++] = "ACDEFGHIKLMNPQRSTVWY"[(i * 7) % 20];
  big[k] = '\0';
  write_gz(gz, big);
  struct stat sb;
  stat(gz, &sb);
  assert_int_equal(truncate(gz, sb.st_size / 2), 0);
  expect_error(gz, "truncated", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  /* a directory, a missing file, a path below a regular file */
  expect_error(g_tmp, "is a directory", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  expect_error(tmp_path("missing.fa"), "cannot open", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
  p = tmp_path("good.fa"); write_text(p, ">a\nMKV\n");
  char below[600];
  snprintf(below, sizeof below, "%s/x.fa", p);
  expect_error(below, "cannot open", ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
}

static void test_output_errors(void **state) {
  (void)state;
  const char *in = tmp_path("ok.fa");
  write_text(in, ">a\nMKVLA\n>b\nGGHH\n");
  /* output below a regular file: cannot be created */
  char out[600];
  snprintf(out, sizeof out, "%s/sub", in);
  assert_int_not_equal(ingest_one(in, out, NULL, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP), ESMT_OK);
  assert_non_null(strstr(esmt_last_error(), "cannot create"));
  /* a new nested destination is created with its parents */
  char nested[600];
  snprintf(nested, sizeof nested, "%s/runs/deeper/data", g_tmp);
  assert_int_equal(ingest_one(in, nested, NULL, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP), ESMT_OK);
  /* an existing non-empty directory is refused and left as it was */
  const char *full = tmp_path("full");
  mkdir(full, 0755);
  char keep[600];
  snprintf(keep, sizeof keep, "%s/precious.txt", full);
  write_text(keep, "keep me");
  assert_int_equal(ingest_one(in, full, NULL, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "not empty"));
  assert_int_equal(access(keep, F_OK), 0);
}

/* Disk full while writing: RLIMIT_FSIZE in a child, SIGXFSZ ignored. */
static void test_disk_full(void **state) {
  (void)state;
  const char *in = tmp_path("big.fa");
  FILE *f = fopen(in, "w");
  for (int r = 0; r < 2000; r++) {
    fprintf(f, ">r%d\n", r);
    for (int i = 0; i < 300; i++) fputc("ACDEFGHIKLMNPQRSTVWY"[(r + i) % 20], f);
    fputc('\n', f);
  }
  fclose(f);
  const char *out = tmp_path("fsize-out");
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {100000, 100000};
    setrlimit(RLIMIT_FSIZE, &rl);
    esmt_status st = ingest_one(in, out, NULL, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP);
    int ok = st == ESMT_ERR_IO && strstr(esmt_last_error(), "write failed");
    if (!ok) fprintf(stderr, "child: status %d: %s\n", st, esmt_last_error());
    _exit(ok ? 0 : 1);
  }
  int wst = 0;
  waitpid(pid, &wst, 0);
  assert_true(WIFEXITED(wst));
  assert_int_equal(WEXITSTATUS(wst), 0);
  assert_nothing_left(out);
}

/* Count records and residues of the real file independently (zlib only). */
static void count_fasta_gz(const char *path, uint64_t *records, uint64_t *residues) {
  gzFile g = gzopen(path, "rb");
  assert_non_null(g);
  char line[1 << 16];
  *records = *residues = 0;
  while (gzgets(g, line, sizeof line)) {
    if (line[0] == '>') { (*records)++; continue; }
    for (char *c = line; *c; c++)
      if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z')) (*residues)++;
  }
  gzclose(g);
}

/* The real UniProt sample, or a skip that says what to install. */
static int real_db_present(void) {
  if (access(REAL_DB, R_OK) == 0) return 1;
  print_message("skipped: %s not found (install Debian's mmseqs2-examples: "
                "scripts/setup_deps.sh)\n", REAL_DB);
  skip();
  return 0;
}

static const char *real_dataset(void) {
  static char out[512];
  if (out[0]) return out;
  snprintf(out, sizeof out, "%s/real", g_tmp);
  esmt_ingest_stats s = ESMT_INGEST_STATS_INIT;
  if (ingest_one(REAL_DB, out, &s, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP) != ESMT_OK)
    fail_msg("%s", esmt_last_error());
  return out;
}

static void test_real_ingest(void **state) {
  (void)state;
  if (!real_db_present()) return;
  uint64_t rec, res;
  count_fasta_gz(REAL_DB, &rec, &res);
  const char *out = tmp_path("real-check");
  esmt_ingest_stats s = ESMT_INGEST_STATS_INIT;
  assert_int_equal(ingest_one(REAL_DB, out, &s, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP), ESMT_OK);
  print_message("DB.fasta.gz: %llu records, %llu residues (independent count %llu / %llu)\n",
                (unsigned long long)s.records, (unsigned long long)s.residues,
                (unsigned long long)rec, (unsigned long long)res);
  assert_int_equal(s.records, rec);
  assert_int_equal(s.residues, res);
  assert_int_equal(s.train_records + s.valid_records, rec);
  /* ~10% validation (valid_fraction 0.1 here) */
  assert_true(s.valid_records > rec / 20 && s.valid_records < rec / 5);
}

static esmt_loader *open_loader(const char *dir, int rank, int world, uint64_t seed) {
  esmt_loader_options o = ESMT_LOADER_OPTIONS_INIT;
  o.dir = dir;
  o.seed = seed;
  o.max_len = 256;
  o.tokens_per_batch = 4096;
  o.rank = rank;
  o.world = world;
  esmt_loader *l = NULL;
  if (esmt_loader_create(&o, &l) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return l;
}

static uint64_t batch_hash(const esmt_batch *b) {
  uint64_t h = 1469598103934665603ull;
  size_t n = (size_t)b->batch * b->seq_len;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint64_t)(b->tokens[i] * 131 + b->labels[i] + 200)) * 1099511628211ull;
  return h ^ (uint64_t)b->batch << 32 ^ (uint64_t)b->seq_len;
}

static void test_loader_masking_and_crops(void **state) {
  (void)state;
  if (!real_db_present()) return;
  esmt_loader *l = open_loader(real_dataset(), 0, 1, 5);
  uint64_t residues = 0, selected = 0, masked = 0, random_tok = 0, same = 0, cls = 0, eos = 0, rows = 0;
  uint64_t short_rows = 0, short_ok = 0;
  for (int i = 0; i < 200; i++) {
    esmt_batch b = ESMT_BATCH_INIT;
    assert_int_equal(esmt_loader_next(l, &b), ESMT_OK);
    assert_true((uint64_t)b.batch * b.seq_len <= 4096);
    for (int r = 0; r < b.batch; r++) {
      rows++;
      const int32_t *t = b.tokens + r * b.seq_len, *y = b.labels + r * b.seq_len;
      cls += t[0] == ESMT_TOKEN_CLS;
      int len = 0;
      while (len < b.seq_len && t[len] != ESMT_TOKEN_PAD) len++;
      if (len < 256) { /* not cropped */
        short_rows++;
        short_ok += t[0] == ESMT_TOKEN_CLS && t[len - 1] == ESMT_TOKEN_EOS;
      }
      for (int k = 0; k < b.seq_len; k++) {
        eos += t[k] == ESMT_TOKEN_EOS;
        if (t[k] == ESMT_TOKEN_CLS || t[k] == ESMT_TOKEN_EOS || t[k] == ESMT_TOKEN_PAD) {
          assert_int_equal(y[k], ESMT_LABEL_IGNORE); /* specials never selected */
          continue;
        }
        residues++;
        if (y[k] < 0) continue;
        selected++;
        if (t[k] == ESMT_TOKEN_MASK) masked++;
        else if (t[k] == y[k]) same++;
        else random_tok++;
      }
    }
  }
  esmt_loader_stats st = {.struct_size = sizeof st};
  assert_int_equal(esmt_loader_stats_get(l, &st), ESMT_OK);
  double p = (double)selected / residues, m = (double)masked / selected;
  print_message("selected %.4f of %llu residues; of those mask %.3f random %.3f same %.3f; "
                "padding %.3f; rows with cls %llu/%llu, eos %llu\n", p,
                (unsigned long long)residues, m, (double)random_tok / selected,
                (double)same / selected, st.padding_fraction, (unsigned long long)cls,
                (unsigned long long)rows, (unsigned long long)eos);
  /* binomial bounds: 6 standard deviations */
  assert_true(fabs(p - 0.15) < 6 * sqrt(0.15 * 0.85 / residues));
  assert_true(fabs(m - 0.8) < 6 * sqrt(0.8 * 0.2 / selected));
  /* random replacements sometimes draw the same residue: ~10% + 10%/20 */
  assert_true(fabs((double)random_tok / selected - 0.1 * 19 / 20) < 6 * sqrt(0.1 * 0.9 / selected));
  /* crops of long proteins keep cls/eos only where the window reaches an
   * end: some rows lack each, and rows shorter than max_len have both */
  assert_true(cls < rows && eos < rows && cls > 0 && eos > 0);
  assert_true(short_rows > 0 && short_ok == short_rows);
  assert_true(st.padding_fraction < 0.2); /* length bucketing */
  esmt_loader_destroy(l);
}

static void test_loader_determinism_ranks_resume(void **state) {
  (void)state;
  if (!real_db_present()) return;
  const char *dir = real_dataset();
  /* same seed, same batches; another seed, other batches */
  esmt_loader *a = open_loader(dir, 0, 1, 9), *b = open_loader(dir, 0, 1, 9), *c = open_loader(dir, 0, 1, 10);
  for (int i = 0; i < 20; i++) {
    esmt_batch x = ESMT_BATCH_INIT, y = ESMT_BATCH_INIT, z = ESMT_BATCH_INIT;
    esmt_loader_next(a, &x);
    uint64_t hx = batch_hash(&x);
    esmt_loader_next(b, &y);
    esmt_loader_next(c, &z);
    assert_true(hx == batch_hash(&y));
    if (i == 0) assert_true(hx != batch_hash(&z));
  }
  /* mid-epoch cursor: a fresh loader restored continues identically */
  char cur[256];
  assert_int_equal(esmt_loader_save_cursor(a, cur, sizeof cur), ESMT_OK);
  esmt_loader *r = open_loader(dir, 0, 1, 9);
  assert_int_equal(esmt_loader_restore_cursor(r, cur), ESMT_OK);
  for (int i = 0; i < 10; i++) {
    esmt_batch x = ESMT_BATCH_INIT, y = ESMT_BATCH_INIT;
    esmt_loader_next(a, &x);
    uint64_t hx = batch_hash(&x);
    esmt_loader_next(r, &y);
    assert_true(hx == batch_hash(&y));
  }
  assert_int_equal(esmt_loader_restore_cursor(c, cur), ESMT_ERR_FORMAT); /* other seed */
  /* Two ranks, interleaved batch by batch, are the one-rank stream plus
   * padding at the end of the data: a last round short of batches repeats
   * the last epoch's first ones, so both ranks get the same number of
   * batches (a rank never waits for one that ran out). */
  esmt_loader_options o = ESMT_LOADER_OPTIONS_INIT;
  o.dir = dir;
  o.max_len = 4096; /* no crops: every row is a whole record */
  o.tokens_per_batch = 16384;
  o.epochs = 1;
  o.seed = 21;
  enum { MAXN = 20000 };
  uint64_t *seq[3];
  size_t len[3] = {0, 0, 0};
  uint64_t rows_one = 0, records = 0;
  for (int run = 0; run < 3; run++) { /* 0: world 1; 1, 2: ranks 0 and 1 of 2 */
    o.world = run == 0 ? 1 : 2;
    o.rank = run == 2 ? 1 : 0;
    seq[run] = malloc(MAXN * sizeof *seq[run]);
    esmt_loader *l = NULL;
    assert_int_equal(esmt_loader_create(&o, &l), ESMT_OK);
    esmt_batch x = ESMT_BATCH_INIT;
    while (esmt_loader_next(l, &x) == ESMT_OK) {
      assert_true(len[run] < MAXN);
      seq[run][len[run]++] = batch_hash(&x);
      if (run == 0) rows_one += (uint64_t)x.batch;
    }
    esmt_loader_stats st = {.struct_size = sizeof st};
    esmt_loader_stats_get(l, &st);
    records = st.records;
    esmt_loader_destroy(l);
  }
  assert_int_equal(rows_one, records); /* one rank: every record once */
  assert_int_equal(len[1], len[2]);    /* equal batch counts per rank */
  size_t j = 0, pads = 0;
  for (size_t k = 0; k < 2 * len[1]; k++) {
    uint64_t h = seq[1 + k % 2][k / 2];
    if (j < len[0] && h == seq[0][j]) { j++; continue; }
    /* a pad: a repeat of a batch already handed out */
    int seen = 0;
    for (size_t q = 0; q < j && !seen; q++) seen = seq[0][q] == h;
    assert_true(seen);
    pads++;
  }
  assert_int_equal(j, len[0]);
  print_message("world 2: %zu batches per rank for %zu of one rank (%zu padding)\n", len[1],
                len[0], pads);
  assert_true(pads < 2); /* at most one rank of the last round */
  for (int run = 0; run < 3; run++) free(seq[run]);
  esmt_loader_destroy(a);
  esmt_loader_destroy(b);
  esmt_loader_destroy(c);
  esmt_loader_destroy(r);
}

/* A dataset of n made-up proteins of 20..119 residues (the same each call). */
static const char *small_dataset(const char *name, int n) {
  const char *fa = tmp_path("stream.fa"), *out = tmp_path(name);
  FILE *f = fopen(fa, "w");
  assert_non_null(f);
  uint64_t x = 88172645463325252ull;
  for (int r = 0; r < n; r++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    const int len = 20 + (int)(x % 100);
    fprintf(f, ">s%d\n", r);
    for (int i = 0; i < len; i++) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      fputc("ACDEFGHIKLMNPQRSTVWY"[x % 20], f);
    }
    fputc('\n', f);
  }
  assert_int_equal(fclose(f), 0);
  if (ingest_one(fa, out, NULL, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP) != ESMT_OK)
    fail_msg("%s", esmt_last_error());
  return out;
}

static esmt_loader_options stream_options(const char *dir, int rank, int world) {
  esmt_loader_options o = ESMT_LOADER_OPTIONS_INIT;
  o.dir = dir;
  o.seed = 4;
  o.max_len = 128;
  o.batch_rows = 2; /* windows of 64 proteins: 32 batches, not a multiple of 3 */
  o.tokens_per_batch = 1 << 20;
  o.epochs = 2;
  o.rank = rank;
  o.world = world;
  return o;
}

static esmt_loader *stream_loader(const char *dir, int rank, int world) {
  esmt_loader_options o = stream_options(dir, rank, world);
  esmt_loader *l = NULL;
  if (esmt_loader_create(&o, &l) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return l;
}

static uint64_t next_hash(esmt_loader *l) {
  esmt_batch b = ESMT_BATCH_INIT;
  if (esmt_loader_next(l, &b) != ESMT_OK) fail_msg("%s", esmt_last_error());
  return batch_hash(&b);
}

/* The ranks share one global stream of batches, whatever their number:
 * round k gives rank r batch k * world + r of the one-process stream,
 * across windows and epochs (no batch repeated or skipped before the end
 * of the data, where the last round's short ranks take the last epoch's
 * first batches); and a cursor is the same on every rank and resumes that
 * stream at another world size (3 ranks -> 2 -> 1), an older per-rank
 * cursor at world * batch. */
static void test_loader_global_stream(void **state) {
  (void)state;
  const char *dir = small_dataset("stream", 331);
  enum { CAP = 4096 };
  uint64_t *one = malloc(CAP * sizeof *one);
  size_t n = 0;
  esmt_loader *l = stream_loader(dir, 0, 1);
  esmt_batch b = ESMT_BATCH_INIT;
  while (esmt_loader_next(l, &b) == ESMT_OK) {
    assert_true(n < CAP);
    one[n++] = batch_hash(&b);
  }
  esmt_loader_destroy(l);
  esmt_loader_stats st = ESMT_LOADER_STATS_INIT;
  const size_t per_epoch = n / 2;
  assert_int_equal(n % 2, 0);
  for (int world = 2; world <= 3; world++) {
    size_t got[3] = {0, 0, 0};
    for (int r = 0; r < world; r++) {
      esmt_loader_options o = stream_options(dir, r, world);
      o.prefetch = world == 3 ? 2 : 0; /* both paths */
      assert_int_equal(esmt_loader_create(&o, &l), ESMT_OK);
      for (size_t k = 0;; k++) {
        esmt_batch x = ESMT_BATCH_INIT;
        if (esmt_loader_next(l, &x) != ESMT_OK) break;
        const size_t g = k * (size_t)world + (size_t)r;
        /* past the end: the last epoch's first batches again */
        const uint64_t want = g < n ? one[g] : one[per_epoch + (g - n)];
        if (batch_hash(&x) != want)
          fail_msg("world %d rank %d batch %zu is not stream batch %zu", world, r, k, g);
        /* the epoch reported is the batch's (a pass ends on the next one's) */
        assert_int_equal(esmt_loader_stats_get(l, &st), ESMT_OK);
        assert_int_equal(st.epoch, g < n ? g / per_epoch : 1);
        got[r]++;
      }
      assert_int_equal(esmt_loader_stats_get(l, &st), ESMT_OK);
      esmt_loader_destroy(l);
    }
    for (int r = 0; r < world; r++) assert_int_equal(got[r], (n + (size_t)world - 1) / world);
  }
  print_message("one stream of %zu batches (%llu proteins, 2 epochs) shared by 1, 2 and 3 "
                "ranks\n", n, (unsigned long long)st.records);
  /* 3 ranks take 17 rounds (51 batches: past window 0's 32), save; the
   * cursor is the same on every rank */
  esmt_loader *r3[3];
  char cur[3][256];
  for (int r = 0; r < 3; r++) {
    r3[r] = stream_loader(dir, r, 3);
    for (int k = 0; k < 17; k++) assert_true(next_hash(r3[r]) == one[k * 3 + r]);
    assert_int_equal(esmt_loader_save_cursor(r3[r], cur[r], sizeof cur[r]), ESMT_OK);
    esmt_loader_destroy(r3[r]);
  }
  assert_string_equal(cur[0], cur[1]);
  assert_string_equal(cur[0], cur[2]);
  /* 2 ranks go on from batch 51 for 60 rounds (into the second epoch) */
  size_t at = 51;
  esmt_loader *r2[2] = {stream_loader(dir, 0, 2), stream_loader(dir, 1, 2)};
  for (int r = 0; r < 2; r++) assert_int_equal(esmt_loader_restore_cursor(r2[r], cur[0]), ESMT_OK);
  for (int k = 0; k < 60; k++, at += 2)
    for (int r = 0; r < 2; r++)
      if (next_hash(r2[r]) != one[at + (size_t)r])
        fail_msg("resumed at world 2: rank %d round %d is not stream batch %zu", r, k, at + r);
  assert_int_equal(esmt_loader_save_cursor(r2[0], cur[0], sizeof cur[0]), ESMT_OK);
  assert_int_equal(esmt_loader_save_cursor(r2[1], cur[1], sizeof cur[1]), ESMT_OK);
  assert_string_equal(cur[0], cur[1]);
  for (int r = 0; r < 2; r++) esmt_loader_destroy(r2[r]);
  /* one process takes the rest, to the end of the data */
  l = stream_loader(dir, 0, 1);
  assert_int_equal(esmt_loader_restore_cursor(l, cur[0]), ESMT_OK);
  for (; at < n; at++) assert_true(next_hash(l) == one[at]);
  assert_int_equal(esmt_loader_next(l, &b), ESMT_ERR_STATE);
  esmt_loader_destroy(l);
  /* an older cursor counts one rank's batches of a window split j % world */
  char old[256];
  assert_int_equal(esmt_loader_stats_get(r3[0] = stream_loader(dir, 1, 2), &st), ESMT_OK);
  snprintf(old, sizeof old, "{\"epoch\":0,\"window\":0,\"batch\":5,\"seed\":4,\"records\":%llu}",
           (unsigned long long)st.records);
  assert_int_equal(esmt_loader_restore_cursor(r3[0], old), ESMT_OK);
  assert_true(next_hash(r3[0]) == one[11]);
  esmt_loader_destroy(r3[0]);
  free(one);
}

static void test_corrupt_shard_refused(void **state) {
  (void)state;
  const char *in = tmp_path("c.fa");
  write_text(in, ">a\nMKVLAGGHHKKLLAA\n>b\nGGHHKKLL\n>c\nMMMMKKK\n");
  const char *out = tmp_path("cshards");
  assert_int_equal(ingest_one(in, out, NULL, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP), ESMT_OK);
  char shard[600];
  snprintf(shard, sizeof shard, "%s/train-00000.shard", out);
  FILE *f = fopen(shard, "r+b");
  fseek(f, 70, SEEK_SET);
  fputc(7, f);
  fclose(f);
  esmt_loader_options o = ESMT_LOADER_OPTIONS_INIT;
  o.dir = out;
  o.max_len = 64;
  o.tokens_per_batch = 256;
  esmt_loader *l = NULL;
  assert_int_equal(esmt_loader_create(&o, &l), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "checksum mismatch"));
  assert_int_equal(truncate(shard, 100), 0);
  assert_int_equal(esmt_loader_create(&o, &l), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "truncated"));
  o.dir = g_tmp; /* no manifest */
  assert_int_equal(esmt_loader_create(&o, &l), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "manifest.json"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alphabet),
      cmocka_unit_test(test_fasta_edge_cases),
      cmocka_unit_test(test_long_line),
      cmocka_unit_test(test_malformed_inputs),
      cmocka_unit_test(test_output_errors),
      cmocka_unit_test(test_disk_full),
      cmocka_unit_test(test_real_ingest),
      cmocka_unit_test(test_loader_masking_and_crops),
      cmocka_unit_test(test_loader_determinism_ranks_resume),
      cmocka_unit_test(test_loader_global_stream),
      cmocka_unit_test(test_corrupt_shard_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
