/* SPDX-License-Identifier: MIT */
/* Dataset verification (issue #16, data inputs): the manifest on its own,
 * every shard header against the format and its manifest entry (one
 * message per field, with both values), token ids checked in the crc32
 * pass, dataset identity (version 2) and version-1 datasets, FASTA inputs
 * that are not regular files, standard input, and compressed formats
 * ingest does not read. */
#define _GNU_SOURCE
#include "test_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "esmtrain/esmtrain.h"
#include "dataset_manifest.h"
#include "fasta_magic.h"
#include "fasta_stream.h"
#include "shard_set.h"
#include "shard_verify.h"

#define g_dir test_tmpdir /* the group's temporary directory */

static const char *path_in(const char *name) {
  static char p[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
  return p[k];
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return strdup(buf);
}

/* Ingest `fasta` (text) into `name` under g_dir; valid_fraction 0 keeps
 * every record in train-00000.shard. */
static const char *ingest_text(const char *name, const char *fasta) {
  const char *in = path_in("in.fa");
  write_file(in, fasta);
  const char *out = path_in(name);
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  const char *inputs[] = {in};
  o.inputs = inputs;
  o.n_inputs = 1;
  o.output_dir = out;
  o.valid_fraction = 0;
  assert_int_equal(esmt_ingest(&o, NULL), ESMT_OK);
  return out;
}

static esmt_shard_header read_header(const char *shard) {
  esmt_shard_header h;
  int fd = open(shard, O_RDONLY);
  assert_true(fd >= 0);
  assert_int_equal(pread(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
  close(fd);
  return h;
}

static void write_header(const char *shard, const esmt_shard_header *h) {
  int fd = open(shard, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, h, sizeof *h, 0), (ssize_t)sizeof *h);
  close(fd);
}

static const char *shard_of(const char *dir) {
  static char p[600];
  snprintf(p, sizeof p, "%s/train-00000.shard", dir);
  return p;
}

static void expect_error(const char *fragment) {
  if (!strstr(esmt_last_error(), fragment))
    fail_msg("message '%s' lacks '%s'", esmt_last_error(), fragment);
}

/* Ingest writes one random id into the manifest and every shard (version
 * 2); two ingests of the same FASTA get different ids. */
static void ingest_writes_identity(void **state) {
  (void)state;
  const char *a = ingest_text("id-a", ">a\nMKVLAGG\n>b\nKKLL\n");
  const char *b = ingest_text("id-b", ">a\nMKVLAGG\n>b\nKKLL\n");
  esmt_dataset_manifest ma, mb;
  assert_int_equal(esmt_manifest_load(a, &ma), ESMT_OK);
  assert_int_equal(esmt_manifest_load(b, &mb), ESMT_OK);
  assert_int_equal(ma.version, 2);
  assert_int_not_equal(memcmp(ma.dataset_id, mb.dataset_id, sizeof ma.dataset_id), 0);
  esmt_shard_header h = read_header(shard_of(a));
  assert_int_equal(h.version, 2);
  assert_memory_equal(h.dataset_id, ma.dataset_id, sizeof h.dataset_id);
  char hex[33];
  esmt_dataset_id_hex(ma.dataset_id, hex);
  char *text = read_text(path_in("id-a/manifest.json"));
  assert_non_null(strstr(text, hex));
  free(text);
  esmt_manifest_free(&ma);
  esmt_manifest_free(&mb);
}

static esmt_status load_manifest_text(const char *text) {
  const char *d = path_in("m");
  mkdir(d, 0755);
  write_file(path_in("m/manifest.json"), text);
  esmt_dataset_manifest m;
  esmt_status st = esmt_manifest_load(d, &m);
  if (!st) esmt_manifest_free(&m);
  return st;
}

#define E(file, split, rec, tok) \
  "{\"file\":\"" file "\",\"split\":\"" split "\",\"records\":" #rec ",\"tokens\":" #tok \
  ",\"crc32\":1}"
#define ID "\"dataset_id\":\"000102030405060708090a0b0c0d0e0f\","

static void manifest_checks(void **state) {
  (void)state;
  /* version 1 (no id) and 2 (with one) are read */
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":1,\"shards\":["
                                      E("train-00000.shard", "train", 2, 10) "]}"), ESMT_OK);
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":2," ID
                                      "\"shards\":[" E("t", "train", 2, 10) "]}"), ESMT_OK);
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":2,"
                                      "\"shards\":[" E("t", "train", 2, 10) "]}"), ESMT_ERR_FORMAT);
  expect_error("\"dataset_id\" is missing or not 32 hex digits");
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":3,\"shards\":[]}"),
                   ESMT_ERR_FORMAT);
  expect_error("dataset version 3, this library reads versions 1 to 2");
  assert_int_equal(load_manifest_text("{\"format\":\"other\",\"version\":2,\"shards\":[]}"),
                   ESMT_ERR_FORMAT);
  expect_error("not an esmtrain dataset manifest");
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":2," ID
                                      "\"shards\":[" E("t", "train", 2, 10) "," E("v", "valid", 1, 3)
                                      "," E("t", "train", 2, 10) "]}"), ESMT_ERR_FORMAT);
  expect_error("shard t is listed twice (entries 0 and 2)");
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":2," ID
                                      "\"shards\":[" E("t", "test", 2, 10) "]}"), ESMT_ERR_FORMAT);
  expect_error("shard t: \"split\" is \"test\", expected \"train\" or \"valid\"");
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":2," ID
                                      "\"shards\":[" E("valid-00003.shard", "train", 2, 10) "]}"),
                   ESMT_ERR_FORMAT);
  expect_error("the file name says valid, the manifest's \"split\" says train");
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":2," ID
                                      "\"shards\":[" E("../t", "train", 2, 10) "]}"), ESMT_ERR_FORMAT);
  expect_error("shard entry 0 has no valid \"file\"");
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":2," ID
                                      "\"shards\":[{\"file\":\"t\",\"split\":\"train\",\"tokens\":3,"
                                      "\"crc32\":1}]}"), ESMT_ERR_FORMAT);
  expect_error("shard entry 0 has no valid \"records\"");
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":2," ID
                                      "\"shards\":[" E("t", "train", 2, 10) "," E("v", "valid", 1, 3)
                                      "],\"stats\":{\"records\":3,\"residues\":12}}"),
                   ESMT_ERR_FORMAT);
  expect_error("stats.residues is 12, the shard entries add up to 13");
  assert_int_equal(load_manifest_text("{\"format\":\"esmtrain-dataset\",\"version\":2," ID
                                      "\"shards\":[" E("t", "train", 2, 10) "," E("v", "valid", 1, 3)
                                      "],\"stats\":{\"train_records\":2,\"valid_records\":2}}"),
                   ESMT_ERR_FORMAT);
  expect_error("stats.valid_records is 2, the shard entries add up to 1");
}

/* A well-formed header of `tokens` tokens in `records` records, its file
 * size, and the matching manifest entry. */
static uint64_t good_header(esmt_shard_header *h, esmt_dataset_manifest *m, esmt_manifest_entry *e,
                            uint64_t records, uint64_t tokens) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, ESMT_SHARD_MAGIC, 8);
  h->version = 2;
  h->header_size = 64;
  h->records = records;
  h->tokens = tokens;
  h->index_offset = (64 + tokens + 7) & ~7ull;
  h->crc32 = 77;
  memset(h->dataset_id, 0xab, sizeof h->dataset_id);
  memset(m, 0, sizeof *m);
  m->version = 2;
  memset(m->dataset_id, 0xab, sizeof m->dataset_id);
  memset(e, 0, sizeof *e);
  e->file = "s";
  e->records = records;
  e->tokens = tokens;
  e->crc32 = 77;
  return h->index_offset + (records + 1) * 8;
}

static void check_header_fails(const esmt_shard_header *h, uint64_t size,
                               const esmt_dataset_manifest *m, const esmt_manifest_entry *e,
                               const char *fragment) {
  assert_int_equal(esmt_shard_check_header("s", h, size, m, e), ESMT_ERR_FORMAT);
  expect_error(fragment);
}

/* One message per field, each naming what is wrong and both values. */
static void header_field_messages(void **state) {
  (void)state;
  esmt_shard_header h;
  esmt_dataset_manifest m;
  esmt_manifest_entry e;
  uint64_t size = good_header(&h, &m, &e, 3, 21);
  assert_int_equal(esmt_shard_check_header("s", &h, size, &m, &e), ESMT_OK);
  assert_int_equal(size, 88 + 32);
  /* the index offset disagrees while the size adds up with it */
  h.index_offset += 8;
  check_header_fails(&h, size + 8, &m, &e, "index_offset is 96, expected 88 (64 + 21 tokens");
  good_header(&h, &m, &e, 3, 21);
  check_header_fails(&h, size - 1, &m, &e, "119 bytes on disk, 120 expected for 3 records of 21 tokens");
  h.header_size = 72;
  check_header_fails(&h, size, &m, &e, "header_size is 72, expected 64");
  good_header(&h, &m, &e, 3, 21);
  h.records = 1ull << 41;
  check_header_fails(&h, size, &m, &e, "records is 2199023255552, more than the 1099511627776");
  good_header(&h, &m, &e, 3, 21);
  h.tokens = 1ull << 51;
  check_header_fails(&h, size, &m, &e, "tokens is 2251799813685248, more than the");
  good_header(&h, &m, &e, 3, 21);
  h.split = 2;
  check_header_fails(&h, size, &m, &e, "split field is 2, expected 0 (train) or 1 (valid)");
  h.split = 1;
  check_header_fails(&h, size, &m, &e, "split: the manifest says train, the shard header says valid");
  good_header(&h, &m, &e, 3, 21);
  h.version = 3;
  check_header_fails(&h, size, &m, &e, "shard version 3, this library reads versions 1 to 2");
  h.version = 1;
  check_header_fails(&h, size, &m, &e, "shard version 1 in a version-2 dataset");
  good_header(&h, &m, &e, 3, 21);
  memcpy(h.magic, "ESMTSHRX", 8);
  check_header_fails(&h, size, &m, &e, "bad magic");
  good_header(&h, &m, &e, 3, 21);
  e.records = 4;
  check_header_fails(&h, size, &m, &e, "records: the manifest says 4, the shard header says 3");
  good_header(&h, &m, &e, 3, 21);
  e.tokens = 20;
  check_header_fails(&h, size, &m, &e, "tokens: the manifest says 20, the shard header says 21");
  good_header(&h, &m, &e, 3, 21);
  e.crc32 = 78;
  check_header_fails(&h, size, &m, &e, "crc32: the manifest says 78, the shard header says 77");
  good_header(&h, &m, &e, 3, 21);
  h.dataset_id[15] = 0xac;
  check_header_fails(&h, size, &m, &e, "dataset_id: the manifest says abababababababababababababababab, "
                     "the shard header says abababababababababababababababac");
  /* version 1: no identity to compare */
  m.version = 1;
  h.version = 1;
  assert_int_equal(esmt_shard_check_header("s", &h, size, &m, &e), ESMT_OK);
}

/* Set byte `off` of a shard to `value` and recompute the header's crc32,
 * as a careless tool would: only the id check can tell. */
static void poke_with_crc(const char *shard, uint64_t off, uint8_t value) {
  int fd = open(shard, O_RDWR);
  assert_true(fd >= 0);
  struct stat sb;
  assert_int_equal(fstat(fd, &sb), 0);
  uint8_t *b = malloc((size_t)sb.st_size);
  assert_int_equal(pread(fd, b, (size_t)sb.st_size, 0), sb.st_size);
  b[off] = value;
  esmt_shard_header h;
  memcpy(&h, b, sizeof h);
  h.crc32 = (uint32_t)crc32(crc32(0, Z_NULL, 0), b + 64, (uInt)(sb.st_size - 64));
  memcpy(b, &h, sizeof h);
  assert_int_equal(pwrite(fd, b, (size_t)sb.st_size, 0), sb.st_size);
  free(b);
  close(fd);
}

static esmt_status verify_file(const char *shard) {
  esmt_shard_header h = read_header(shard);
  int fd = open(shard, O_RDONLY);
  assert_true(fd >= 0);
  esmt_status st = esmt_shard_verify_body(fd, shard, &h);
  close(fd);
  return st;
}

/* Ids ingest never writes (<cls> 0, <null_1> 31, <mask> 32: all below the
 * vocabulary size 33 the old check used) are refused under a valid crc32,
 * naming the record, the token, the byte and the value; so is padding
 * that is not zero. */
static void token_ids_checked_in_crc_pass(void **state) {
  (void)state;
  const char *d = ingest_text("tok", ">a\nMKVL\n>b\nAGGHH\n"); /* 9 tokens: 7 padding bytes */
  const char *s = shard_of(d);
  assert_int_equal(verify_file(s), ESMT_OK);
  poke_with_crc(s, 64 + 6, 31);
  assert_int_equal(verify_file(s), ESMT_ERR_FORMAT);
  expect_error("record 1, token 6 (byte 70 of the file): id 31 is not a residue id (3..30)");
  poke_with_crc(s, 64 + 6, 7);
  assert_int_equal(verify_file(s), ESMT_OK);
  poke_with_crc(s, 64 + 0, 0);
  assert_int_equal(verify_file(s), ESMT_ERR_FORMAT);
  expect_error("record 0, token 0 (byte 64 of the file): id 0 is not");
  poke_with_crc(s, 64 + 0, 32);
  assert_int_equal(verify_file(s), ESMT_ERR_FORMAT);
  expect_error("id 32 is not a residue id");
  poke_with_crc(s, 64 + 0, 20);
  poke_with_crc(s, 64 + 9, 1);
  assert_int_equal(verify_file(s), ESMT_ERR_FORMAT);
  expect_error("padding byte 73 is 0x01, expected 0");
  poke_with_crc(s, 64 + 9, 0);
  assert_int_equal(verify_file(s), ESMT_OK);
}

/* A shard from another ingest of the same FASTA (same bytes, same crc32,
 * same counts) is refused by its dataset id alone. */
static void foreign_shard_refused(void **state) {
  (void)state;
  const char *a = ingest_text("fa", ">a\nMKVLAGG\n>b\nKKLL\n");
  const char *b = ingest_text("fb", ">a\nMKVLAGG\n>b\nKKLL\n");
  char sa[600], sb[600], cmd[1400];
  snprintf(sa, sizeof sa, "%s", shard_of(a));
  snprintf(sb, sizeof sb, "%s", shard_of(b));
  esmt_shard_set set;
  assert_int_equal(esmt_shard_set_open(a, 0, &set), ESMT_OK);
  esmt_shard_set_close(&set);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", sb, sa);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(esmt_shard_set_open(a, 0, &set), ESMT_ERR_FORMAT);
  expect_error("dataset_id: the manifest says");
  expect_error("belongs to another dataset");
}

static char g_logged[2048];
static void remember_log(void *user, esmt_log_level level, const char *message) {
  (void)user;
  if (level >= ESMT_LOG_WARN) snprintf(g_logged, sizeof g_logged, "%s", message);
}

/* Rewrite a dataset as an older build wrote it: version 1, no id. */
static void make_version1(const char *dir, int shards_too) {
  char p[600];
  snprintf(p, sizeof p, "%s/manifest.json", dir);
  char *text = read_text(p);
  char *v = strstr(text, "\"version\": 2");
  assert_non_null(v);
  v[11] = '1';
  char *id = strstr(text, "\"dataset_id\"");
  assert_non_null(id);
  char *end = strchr(id, '\n');
  memmove(id, end + 1, strlen(end + 1) + 1);
  write_file(p, text);
  free(text);
  if (!shards_too) return;
  esmt_shard_header h = read_header(shard_of(dir));
  h.version = 1;
  memset(h.dataset_id, 0, sizeof h.dataset_id);
  write_header(shard_of(dir), &h);
}

/* A version-1 dataset is read (every check but identity) with a one-line
 * note suggesting a re-ingest; a version-2 shard in it is refused. */
static void version1_dataset_read_with_note(void **state) {
  (void)state;
  const char *d = ingest_text("v1", ">a\nMKVLAGG\n>b\nKKLL\n");
  make_version1(d, 1);
  esmt_set_log_callback(remember_log, NULL, ESMT_LOG_WARN);
  g_logged[0] = 0;
  esmt_shard_set set;
  assert_int_equal(esmt_shard_set_open(d, 0, &set), ESMT_OK);
  assert_int_equal(set.records, 2);
  esmt_shard_set_close(&set);
  assert_non_null(strstr(g_logged, "a version-1 dataset"));
  assert_non_null(strstr(g_logged, "re-ingest"));
  esmt_set_log_callback(NULL, NULL, ESMT_LOG_INFO);
  /* still checked: a changed token is a checksum mismatch */
  int fd = open(shard_of(d), O_WRONLY);
  assert_int_equal(pwrite(fd, "\x07", 1, 64), 1);
  close(fd);
  assert_int_equal(esmt_shard_set_open(d, 0, &set), ESMT_ERR_FORMAT);
  expect_error("checksum mismatch");
  const char *d2 = ingest_text("v1b", ">a\nMKVLAGG\n>b\nKKLL\n");
  make_version1(d2, 0);
  assert_int_equal(esmt_shard_set_open(d2, 0, &set), ESMT_ERR_FORMAT);
  expect_error("shard version 2 in a version-1 dataset");
}

/* Inputs that are not regular files are refused at once, never read. */
static void fasta_non_regular_refused(void **state) {
  (void)state;
  const char *fifo = path_in("in.fifo");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  esmt_fasta *f = NULL;
  alarm(20); /* a regression blocks in open(2): fail instead of hanging */
  assert_int_equal(esmt_fasta_open(fifo, &f), ESMT_ERR_FORMAT);
  alarm(0);
  expect_error("is a FIFO (named pipe), not a regular file");
  assert_int_equal(esmt_fasta_open(g_dir, &f), ESMT_ERR_FORMAT);
  expect_error("is a directory");
  assert_int_equal(esmt_fasta_open("/dev/null", &f), ESMT_ERR_FORMAT);
  expect_error("is a character device");
  assert_null(f);
}

static void magic_named(const char *bytes, size_t n, const char *fragment) {
  unsigned char head[600] = {0};
  memcpy(head, bytes, n);
  assert_int_equal(esmt_fasta_check_magic("x.fa.gz", head, sizeof head, 0), ESMT_ERR_FORMAT);
  expect_error(fragment);
}

static void compressed_formats_named(void **state) {
  (void)state;
  magic_named("BZh91AY", 7, "x.fa.gz: is bzip2-compressed, not plain FASTA or gzip: decompress "
              "it first (bzip2 -dc x.fa.gz > FILE.fa) or pipe it: bzip2 -dc x.fa.gz | "
              "esmtrain-example ingest - -o DIR");
  magic_named("\x28\xb5\x2f\xfd", 4, "is zstd-compressed");
  magic_named("\xfd" "7zXZ\x00", 6, "is xz-compressed");
  magic_named("\x04\x22\x4d\x18", 4, "is lz4-compressed");
  magic_named("PK\x03\x04", 4, "is a zip archive, not a FASTA file");
  magic_named("7z\xbc\xaf\x27\x1c", 6, "is a 7-zip archive");
  unsigned char tar[600] = "prot.fa";
  memcpy(tar + 257, "ustar", 5);
  assert_int_equal(esmt_fasta_check_magic("t.tar", tar, sizeof tar, 0), ESMT_ERR_FORMAT);
  expect_error("t.tar: is a tar archive, not a FASTA file");
  expect_error("tar -xOf t.tar");
  assert_int_equal(esmt_fasta_check_magic("-", (const unsigned char *)"\x1f\x8b\x08", 3, 1),
                   ESMT_ERR_FORMAT);
  expect_error("standard input: is gzip-compressed twice inside its gzip layer");
  assert_int_equal(esmt_fasta_check_magic("x.fa", (const unsigned char *)">a\nMK\n", 6, 0), ESMT_OK);
  assert_int_equal(esmt_fasta_check_magic("x.fa", (const unsigned char *)"BZ", 2, 0), ESMT_OK);
}

typedef struct progress_seen {
  int calls;
  uint64_t last_done, max_total;
  int went_back;
} progress_seen;

static int on_progress(void *user, const esmt_progress *p) {
  progress_seen *s = user;
  if (p->done < s->last_done) s->went_back = 1;
  s->last_done = p->done;
  if (p->total > s->max_total) s->max_total = p->total;
  s->calls++;
  return 0;
}

/* "-" reads standard input (a pipe, more than the 1 MiB between progress
 * reports): progress has no total and counts the bytes actually read. */
static void stdin_is_read_with_sane_progress(void **state) {
  (void)state;
  int pfd[2];
  assert_int_equal(pipe(pfd), 0);
  const int records = 30000;
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    close(pfd[0]);
    FILE *w = fdopen(pfd[1], "w");
    for (int r = 0; r < records; r++)
      fprintf(w, ">s%d\nMKVLAGGHHKKLLAAGGDEFPQRSTVWYCINMKVLAGGHHKKLLAAGGDEFPQRSTVWYCIN\n", r);
    fclose(w);
    _exit(0);
  }
  close(pfd[1]);
  int saved = dup(STDIN_FILENO);
  assert_int_equal(dup2(pfd[0], STDIN_FILENO), STDIN_FILENO);
  close(pfd[0]);
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  const char *inputs[] = {"-"};
  o.inputs = inputs;
  o.n_inputs = 1;
  o.output_dir = path_in("from-stdin");
  progress_seen seen = {0, 0, 0, 0};
  o.progress = on_progress;
  o.progress_user = &seen;
  esmt_ingest_stats s = ESMT_INGEST_STATS_INIT;
  esmt_status st = esmt_ingest(&o, &s);
  dup2(saved, STDIN_FILENO);
  close(saved);
  int status;
  waitpid(child, &status, 0);
  assert_int_equal(st, ESMT_OK);
  assert_int_equal(s.records, records);
  uint64_t expect = 0;
  for (int r = 0; r < records; r++) expect += (uint64_t)snprintf(NULL, 0, ">s%d\n", r) + 63; /* 62 residues */
  assert_int_equal(s.bytes_read, expect);
  assert_true(seen.calls >= 1);
  assert_int_equal(seen.max_total, 0);
  assert_false(seen.went_back);
  assert_true(seen.last_done <= expect);
  /* standard input twice cannot work: refused */
  const char *twice[] = {"-", "-"};
  o.inputs = twice;
  o.n_inputs = 2;
  o.output_dir = path_in("twice");
  assert_int_equal(esmt_ingest(&o, NULL), ESMT_ERR_INVALID_ARGUMENT);
  expect_error("standard input ('-') is given twice");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ingest_writes_identity),
      cmocka_unit_test(manifest_checks),
      cmocka_unit_test(header_field_messages),
      cmocka_unit_test(token_ids_checked_in_crc_pass),
      cmocka_unit_test(foreign_shard_refused),
      cmocka_unit_test(version1_dataset_read_with_note),
      cmocka_unit_test(fasta_non_regular_refused),
      cmocka_unit_test(compressed_formats_named),
      cmocka_unit_test(stdin_is_read_with_sane_progress),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
