/* SPDX-License-Identifier: MIT */
/* CSV and TSV tables as ingest inputs (issue #21, tables): RFC 4180
 * quoting (commas, doubled quotes and line breaks inside quoted fields),
 * CRLF line ends, gzip, columns by header name, "row<N>" ids, TSV without
 * quoting, the line a record starts on, and the errors (a missing column,
 * a short or long row, an unterminated or misplaced quote, a NUL byte, an
 * oversized field) naming the file and the line; then through esmt_ingest:
 * a table and the same proteins as FASTA give the same shards, and the
 * appended options are read only when struct_size covers them. */
#define _GNU_SOURCE
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "record_source.h"
#include "table_stream.h"

#define ASSERT_OK(expr)                                              \
  do {                                                               \
    esmt_status st_ = (expr);                                        \
    if (st_ != ESMT_OK) fail_msg("%s: %s", #expr, esmt_last_error()); \
  } while (0)

static const char *path_in(const char *name) {
  static char p[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(p[k], sizeof p[k], "%s/%s", test_tmpdir, name);
  return p[k];
}

static void write_bytes(const char *path, const char *data, size_t n, int gz) {
  if (gz) {
    gzFile g = gzopen(path, "wb");
    assert_non_null(g);
    assert_int_equal(gzwrite(g, data, (unsigned)n), (int)n);
    gzclose(g);
    return;
  }
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

static void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text), 0); }

typedef struct expect {
  const char *id, *seq;
  uint64_t line;
} expect;

/* Reads the whole table and compares it with `want` (n records). */
static void reads(const char *path, esmt_table_kind kind, const char *seq_col, const char *id_col,
                  const expect *want, int n) {
  esmt_table *t = NULL;
  ASSERT_OK(esmt_table_open(path, kind, seq_col, id_col, &t));
  esmt_fasta_record r;
  for (int i = 0; i < n; i++) {
    int rc = esmt_table_next(t, &r);
    if (rc != 1) fail_msg("%s: record %d: rc %d: %s", path, i, rc, esmt_last_error());
    assert_string_equal(r.id, want[i].id);
    assert_string_equal(r.seq, want[i].seq);
    assert_int_equal(r.len, strlen(want[i].seq));
    assert_int_equal(r.header_line, want[i].line);
  }
  assert_int_equal(esmt_table_next(t, &r), 0);
  assert_int_equal(esmt_table_next(t, &r), 0); /* stays at the end */
  assert_true(esmt_table_offset(t) > 0);
  assert_int_equal(esmt_table_is_stream(t), 0);
  esmt_table_close(t);
}

/* The message of the first error reading `path`, which must fail. */
static const char *error_of(const char *path, esmt_table_kind kind, const char *seq_col,
                            const char *id_col) {
  static char msg[1024];
  esmt_table *t = NULL;
  ASSERT_OK(esmt_table_open(path, kind, seq_col, id_col, &t));
  esmt_fasta_record r;
  int rc;
  while ((rc = esmt_table_next(t, &r)) == 1) {}
  if (rc == 0) fail_msg("%s: read to the end without an error", path);
  snprintf(msg, sizeof msg, "%s", esmt_last_error());
  assert_int_equal(esmt_table_next(t, &r), -1); /* an error is final */
  esmt_table_close(t);
  return msg;
}

static void has(const char *msg, const char *frag) {
  if (!strstr(msg, frag)) fail_msg("message lacks '%s': %s", frag, msg);
}

/* Quoted fields holding commas, doubled quotes and line breaks, an
 * unquoted one with spaces around it, a sequence split over lines. */
static const char *k_csv =
    "id,description,sequence\n"
    "P1,\"kinase, putative\",MKVLA\n"
    "P2,\"the \"\"best\"\" one\",  GGHHK  \n"
    "P3,\"two\nlines, here\",KKLL\n"
    "\n"
    "P4,plain,\"MK\nVL\"\n"
    "P5 isoform 2,x,A\n";
static const expect k_csv_want[] = {
    {"P1", "MKVLA", 2}, {"P2", "GGHHK", 3}, {"P3", "KKLL", 4}, {"P4", "MKVL", 7}, {"P5", "A", 9}};

static void csv_quoting(void **state) {
  (void)state;
  write_text(path_in("q.csv"), k_csv);
  reads(path_in("q.csv"), ESMT_TABLE_CSV, NULL, NULL, k_csv_want, 5);
}

/* The same table with "\r\n" line ends (a quoted "\r\n" too), no final
 * line end, and gzip-compressed. */
static void csv_crlf_and_gzip(void **state) {
  (void)state;
  char crlf[1024];
  size_t n = 0;
  for (const char *c = k_csv; *c; c++) {
    if (*c == '\n') crlf[n++] = '\r';
    crlf[n++] = *c;
  }
  n -= 2; /* no line end after the last row */
  write_bytes(path_in("crlf.csv"), crlf, n, 0);
  reads(path_in("crlf.csv"), ESMT_TABLE_CSV, NULL, NULL, k_csv_want, 5);
  write_bytes(path_in("q.csv.gz"), k_csv, strlen(k_csv), 1);
  reads(path_in("q.csv.gz"), ESMT_TABLE_CSV, NULL, NULL, k_csv_want, 5);
  write_bytes(path_in("crlf.csv.gz"), crlf, n, 1);
  reads(path_in("crlf.csv.gz"), ESMT_TABLE_CSV, NULL, NULL, k_csv_want, 5);
  /* a UTF-8 byte order mark before a quoted header name */
  write_text(path_in("bom.csv"), "\xef\xbb\xbf\"sequence\",id\nMKV,a\n");
  const expect bom[] = {{"a", "MKV", 2}};
  reads(path_in("bom.csv"), ESMT_TABLE_CSV, NULL, NULL, bom, 1);
}

/* No id column: "row<N>" by data row (blank lines and the header not
 * counted); an empty id too. Other column names, case-insensitive match. */
static void ids_and_columns(void **state) {
  (void)state;
  write_text(path_in("noid.csv"), "name,sequence\nx,MKV\n\ny,KKL\n");
  const expect noid[] = {{"row1", "MKV", 2}, {"row2", "KKL", 4}};
  reads(path_in("noid.csv"), ESMT_TABLE_CSV, NULL, NULL, noid, 2);
  write_text(path_in("emptyid.csv"), "id,sequence\nA,MKV\n,KKL\n\"  \",GG\n");
  const expect emptyid[] = {{"A", "MKV", 2}, {"row2", "KKL", 3}, {"row3", "GG", 4}};
  reads(path_in("emptyid.csv"), ESMT_TABLE_CSV, NULL, NULL, emptyid, 3);
  write_text(path_in("named.csv"), "Accession,Seq,Sequence\nA1,MKV,WWW\nA2,KKL,YYY\n");
  const expect named[] = {{"A1", "MKV", 2}, {"A2", "KKL", 3}};
  reads(path_in("named.csv"), ESMT_TABLE_CSV, "Seq", "accession", named, 2);
  const expect exact[] = {{"row1", "WWW", 2}, {"row2", "YYY", 3}};
  reads(path_in("named.csv"), ESMT_TABLE_CSV, NULL, NULL, exact, 2);
  /* a named id column must exist */
  const char *m = error_of(path_in("named.csv"), ESMT_TABLE_CSV, NULL, "entry");
  has(m, "named.csv: line 1: no id column 'entry' in the header");
  has(m, "--id-column NAME");
  /* the same name twice */
  write_text(path_in("twice.csv"), "sequence,id,sequence\nM,a,K\n");
  has(error_of(path_in("twice.csv"), ESMT_TABLE_CSV, NULL, NULL),
      "line 1: the header names column 'sequence' twice (columns 1 and 3)");
}

/* TSV: split at tabs, '"' an ordinary character, CRLF, blank lines. */
static void tsv(void **state) {
  (void)state;
  const char *text = "id\tdescription\tsequence\r\n"
                     "P1\t5'-nucleotidase \"A\", putative\tMKVLA\r\n"
                     "\r\n"
                     "P2\t\"quoted\"\tGG HH\r\n"
                     "P3\t\tKK";
  write_text(path_in("a.tsv"), text);
  const expect want[] = {{"P1", "MKVLA", 2}, {"P2", "GGHH", 4}, {"P3", "KK", 5}};
  reads(path_in("a.tsv"), ESMT_TABLE_TSV, NULL, NULL, want, 3);
  write_bytes(path_in("a.tsv.gz"), text, strlen(text), 1);
  reads(path_in("a.tsv.gz"), ESMT_TABLE_TSV, NULL, NULL, want, 3);
  write_text(path_in("short.tsv"), "id\tsequence\nP1\tMKV\nP2 MKV\n");
  has(error_of(path_in("short.tsv"), ESMT_TABLE_TSV, NULL, NULL),
      "short.tsv: line 3: data row 2 has 1 field, the header (line 1) has 2 ('id', 'sequence'): "
      "a tab too few?");
  write_text(path_in("miss.tsv"), "id\tseq\nP1\tMKV\n");
  has(error_of(path_in("miss.tsv"), ESMT_TABLE_TSV, NULL, NULL),
      "miss.tsv: line 1: no sequence column 'sequence' in the header; its columns are 'id', "
      "'seq'; did you mean 'seq'?");
}

static void missing_column(void **state) {
  (void)state;
  write_text(path_in("miss.csv"), "\n\nentry,seqence,length\nP1,MKV,3\n");
  const char *m = error_of(path_in("miss.csv"), ESMT_TABLE_CSV, NULL, NULL);
  has(m, path_in("miss.csv"));
  has(m, "miss.csv: line 3: no sequence column 'sequence' in the header; its columns are "
         "'entry', 'seqence', 'length'; did you mean 'seqence'? (--seq-column NAME chooses another)");
  write_text(path_in("empty.csv"), "");
  has(error_of(path_in("empty.csv"), ESMT_TABLE_CSV, NULL, NULL),
      "empty.csv: line 1: no header row (an empty CSV table)");
}

static void short_and_long_rows(void **state) {
  (void)state;
  write_text(path_in("short.csv"), "id,description,sequence\nP1,\"a\nb\",MKV\nP2,MKV\n");
  has(error_of(path_in("short.csv"), ESMT_TABLE_CSV, NULL, NULL),
      "short.csv: line 4: data row 2 has 2 fields, the header (line 1) has 3 ('id', "
      "'description', 'sequence'): a field or a comma too few?");
  write_text(path_in("long.csv"), "id,sequence\nP1,MKV\nP2,kinase, putative,MKV\n");
  has(error_of(path_in("long.csv"), ESMT_TABLE_CSV, NULL, NULL),
      "long.csv: line 3: data row 2 has 4 fields, the header (line 1) has 2 ('id', 'sequence'): "
      "an unquoted comma inside a field?");
}

static void quote_errors(void **state) {
  (void)state;
  write_text(path_in("unterm.csv"), "id,sequence\nP1,MKV\nP2,\"MKV\nP3,GG\n");
  has(error_of(path_in("unterm.csv"), ESMT_TABLE_CSV, NULL, NULL),
      "unterm.csv: line 3: unterminated quote: a quoted field of the row that starts here is "
      "still open at the end of the file");
  write_text(path_in("inner.csv"), "id,sequence\nP1,MKV\nP\"2,MKV\n");
  has(error_of(path_in("inner.csv"), ESMT_TABLE_CSV, NULL, NULL),
      "inner.csv: line 3: malformed quoting");
  write_text(path_in("after.csv"), "id,sequence\n\"P1\"x,MKV\n");
  has(error_of(path_in("after.csv"), ESMT_TABLE_CSV, NULL, NULL),
      "after.csv: line 2: malformed quoting");
}

static void bad_bytes(void **state) {
  (void)state;
  write_bytes(path_in("nul.csv"), "id,sequence\nP1,MKV\nP2,MK\0V\n", 27, 0);
  has(error_of(path_in("nul.csv"), ESMT_TABLE_CSV, NULL, NULL), "nul.csv: line 3: a NUL byte");
  write_bytes(path_in("nul.tsv.gz"), "id\tsequence\nP1\tM\0KV\n", 20, 1);
  has(error_of(path_in("nul.tsv.gz"), ESMT_TABLE_TSV, NULL, NULL), "nul.tsv.gz: line 2: a NUL byte");
  write_text(path_in("ctl.csv"), "id,sequence\nP1,MK\x01V\n");
  has(error_of(path_in("ctl.csv"), ESMT_TABLE_CSV, NULL, NULL),
      "ctl.csv: line 2: a control character (0x01) in the sequence (column 'sequence') of data row 1");
  write_text(path_in("utf8id.csv"), "id,sequence\nP\xc3\xa9,MKV\n");
  has(error_of(path_in("utf8id.csv"), ESMT_TABLE_CSV, NULL, NULL),
      "utf8id.csv: line 2: a non-ASCII byte (0xc3) in the id (column 'id') of data row 1");
  /* a field over the limit, in a quote that is never closed: refused
   * before the whole file is buffered */
  size_t big = ESMT_TABLE_FIELD_MAX + 100000;
  char *text = malloc(big);
  assert_non_null(text);
  const char *head = "id,sequence\nP1,\"";
  memcpy(text, head, strlen(head));
  for (size_t i = strlen(head); i < big; i++) text[i] = i % 61 ? 'A' : '\n';
  write_bytes(path_in("huge.csv.gz"), text, big, 1);
  const char *m = error_of(path_in("huge.csv.gz"), ESMT_TABLE_CSV, NULL, NULL);
  has(m, "huge.csv.gz: line ");
  has(m, "a field longer than 16777216 bytes in the row that starts on line 2 (a quote that is "
         "never closed?)");
  memset(text, 'M', big); /* one sequence field over the limit */
  memcpy(text, "id\tsequence\nP1\t", 15);
  write_bytes(path_in("huge.tsv"), text, big, 0);
  has(error_of(path_in("huge.tsv"), ESMT_TABLE_TSV, NULL, NULL), "huge.tsv: line 2: a field longer than");
  free(text);
  /* compressed formats it does not read are refused by name */
  write_bytes(path_in("x.csv"), "BZh91AY&SY", 10, 0);
  esmt_table *t = NULL;
  ASSERT_OK(esmt_table_open(path_in("x.csv"), ESMT_TABLE_CSV, NULL, NULL, &t));
  esmt_fasta_record r;
  assert_int_equal(esmt_table_next(t, &r), -1);
  has(esmt_last_error(), "bzip2");
  esmt_table_close(t);
}

/* The format by name, and the record source over both readers. */
static void format_choice(void **state) {
  (void)state;
  assert_int_equal(esmt_input_format_for("a.csv", ESMT_INPUT_AUTO), ESMT_INPUT_CSV);
  assert_int_equal(esmt_input_format_for("A.CSV.GZ", ESMT_INPUT_AUTO), ESMT_INPUT_CSV);
  assert_int_equal(esmt_input_format_for("a.tsv.gz", ESMT_INPUT_AUTO), ESMT_INPUT_TSV);
  assert_int_equal(esmt_input_format_for("dir/a.Tab", ESMT_INPUT_AUTO), ESMT_INPUT_TSV);
  assert_int_equal(esmt_input_format_for("a.fasta.gz", ESMT_INPUT_AUTO), ESMT_INPUT_FASTA);
  assert_int_equal(esmt_input_format_for("a.csv.fa", ESMT_INPUT_AUTO), ESMT_INPUT_FASTA);
  assert_int_equal(esmt_input_format_for(".csv", ESMT_INPUT_AUTO), ESMT_INPUT_FASTA);
  assert_int_equal(esmt_input_format_for("-", ESMT_INPUT_AUTO), ESMT_INPUT_FASTA);
  assert_int_equal(esmt_input_format_for("-", ESMT_INPUT_CSV), ESMT_INPUT_CSV);
  assert_int_equal(esmt_input_format_for("a.csv", ESMT_INPUT_FASTA), ESMT_INPUT_FASTA);

  write_text(path_in("t.txt"), "sequence\nMKV\n");
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  o.input_format = ESMT_INPUT_CSV;
  esmt_record_source *s = NULL;
  ASSERT_OK(esmt_record_source_open(path_in("t.txt"), &o, &s));
  esmt_fasta_record r;
  assert_int_equal(esmt_record_source_next(s, &r), 1);
  assert_string_equal(r.id, "row1");
  assert_string_equal(r.seq, "MKV");
  assert_int_equal(esmt_record_source_next(s, &r), 0);
  assert_true(esmt_record_source_offset(s) > 0);
  assert_int_equal(esmt_record_source_is_stream(s), 0);
  esmt_record_source_close(s);
  o.input_format = 7;
  assert_int_equal(esmt_record_source_open(path_in("t.txt"), &o, &s), ESMT_ERR_INVALID_ARGUMENT);
  has(esmt_last_error(), "input_format 7");
  o.input_format = ESMT_INPUT_AUTO;
  o.seq_column = "";
  assert_int_equal(esmt_record_source_open(path_in("t.txt"), &o, &s), ESMT_ERR_INVALID_ARGUMENT);
  /* a struct that ends before the appended fields: they are not read */
  o.struct_size = (uint32_t)offsetof(esmt_ingest_options, input_format);
  o.input_format = 7;
  write_text(path_in("t.fa"), ">a\nMKV\n");
  ASSERT_OK(esmt_record_source_open(path_in("t.fa"), &o, &s));
  assert_int_equal(esmt_record_source_next(s, &r), 1);
  assert_string_equal(r.id, "a");
  esmt_record_source_close(s);
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)len + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return b;
}

/* esmt_ingest of a CSV, a TSV and the same proteins as FASTA: the same
 * shards byte for byte but for the dataset id (bytes 48-63, random per
 * ingest); an old caller's struct (ending before input_format) is served. */
static void ingest_same_as_fasta(void **state) {
  (void)state;
  write_text(path_in("p.fa"), ">P1 kinase\nMKVLA\nGG\n>P2\nKKLLW\n>P3\nACDEFGHIK\n>P4\nMM\n");
  write_text(path_in("p.csv"), "sequence,description,id\nMKVLAGG,\"kinase, \"\"A\"\"\",P1\n"
                               "KKLLW,,P2\n\"ACDEF\nGHIK\",x,P3\r\nMM,y,P4");
  write_text(path_in("p.tsv"), "id\tsequence\nP1\tMKVLAGG\nP2\tKKLLW\nP3\tACDEFGHIK\nP4\tMM\n");
  const char *in[] = {"p.fa", "p.csv", "p.tsv"};
  char out[3][512];
  for (int i = 0; i < 3; i++) {
    const char *inputs[] = {path_in(in[i])};
    snprintf(out[i], sizeof out[i], "%s/ds-%d", test_tmpdir, i);
    esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
    o.inputs = inputs;
    o.n_inputs = 1;
    o.output_dir = out[i];
    o.valid_fraction = 0.3;
    if (i == 0) { /* FASTA through an old caller's struct: garbage after it is not read */
      o.input_format = 99;
      o.struct_size = (uint32_t)offsetof(esmt_ingest_options, input_format);
    }
    esmt_ingest_stats st = ESMT_INGEST_STATS_INIT;
    ASSERT_OK(esmt_ingest(&o, &st));
    assert_int_equal(st.records, 4);
    assert_int_equal(st.residues, 23);
  }
  for (int split = 0; split < 2; split++) {
    size_t n0 = 0, n = 0;
    char p[600];
    snprintf(p, sizeof p, "%s/%s-00000.shard", out[0], split ? "valid" : "train");
    unsigned char *a = slurp(p, &n0);
    for (int i = 1; i < 3; i++) {
      snprintf(p, sizeof p, "%s/%s-00000.shard", out[i], split ? "valid" : "train");
      unsigned char *b = slurp(p, &n);
      assert_true((a == NULL) == (b == NULL));
      if (a) {
        assert_int_equal(n, n0);
        assert_memory_equal(a, b, 48);
        assert_memory_equal(a + 64, b + 64, n - 64);
        assert_memory_not_equal(a + 48, b + 48, 16); /* each ingest its own id */
      }
      free(b);
    }
    free(a);
  }
  /* an unknown format is refused before anything is written */
  const char *inputs[] = {path_in("p.csv")};
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  o.inputs = inputs;
  o.n_inputs = 1;
  o.output_dir = path_in("ds-bad");
  o.input_format = 4;
  assert_int_equal(esmt_ingest(&o, NULL), ESMT_ERR_INVALID_ARGUMENT);
  FILE *f = fopen(path_in("ds-bad"), "r");
  assert_null(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(csv_quoting),     cmocka_unit_test(csv_crlf_and_gzip),
      cmocka_unit_test(ids_and_columns), cmocka_unit_test(tsv),
      cmocka_unit_test(missing_column),  cmocka_unit_test(short_and_long_rows),
      cmocka_unit_test(quote_errors),    cmocka_unit_test(bad_bytes),
      cmocka_unit_test(format_choice),   cmocka_unit_test(ingest_same_as_fasta),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
