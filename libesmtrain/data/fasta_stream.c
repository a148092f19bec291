/* SPDX-License-Identifier: MIT */
/* See fasta_stream.h. Text is validated here (binary junk, NUL bytes,
 * non-ASCII, data before the first header); residue policies are the
 * ingest's business. */
#define _POSIX_C_SOURCE 200809L
#include "fasta_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fasta_magic.h"
#include "gz_input.h"
#include "input_file.h"

struct esmt_fasta {
  gzFile gz;
  char *path;                /* for messages: the file, or "standard input" */
  const char *name;          /* as given: "-" for standard input */
  int stream;                /* standard input: no size, no seeking */
  int filled;                /* the first bytes were read (and sniffed) */
  unsigned char buf[1 << 16];
  int pos, len, eof;
  uint64_t line;
  char *id, *seq;
  size_t id_len, id_cap, seq_len, seq_cap;
  int have_header;            /* a '>' line was read and its record not returned */
  uint64_t header_line;
  uint64_t records;
};

esmt_status esmt_fasta_open(const char *path, esmt_fasta **out) {
  *out = NULL;
  const int is_stdin = !strcmp(path, "-");
  esmt_fasta *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(is_stdin ? "standard input" : path))) {
    free(f);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  f->name = is_stdin ? "-" : f->path;
  f->stream = is_stdin;
  esmt_status st = esmt_gz_input_open(path, "FASTA input", "pipe the FASTA in (zcat x.fa.gz | "
                                      "esmtrain-example ingest - -o DIR)", &f->gz);
  if (st) {
    free(f->path);
    free(f);
    return st;
  }
  f->line = 1;
  *out = f;
  return ESMT_OK;
}

void esmt_fasta_close(esmt_fasta *f) {
  if (!f) return;
  if (f->gz) gzclose(f->gz);
  free(f->id);
  free(f->seq);
  free(f->path);
  free(f);
}

uint64_t esmt_fasta_offset(const esmt_fasta *f) { return esmt_gz_input_offset(f->gz, f->stream); }

int esmt_fasta_is_stream(const esmt_fasta *f) { return f->stream; }

/* -1 at end of input, -2 on a read error (message set). */
static int next_byte(esmt_fasta *f) {
  if (f->pos == f->len) {
    if (f->eof) return -1;
    int n = gzread(f->gz, f->buf, sizeof f->buf);
    if (n < 0) {
      int zerr;
      const char *msg = gzerror(f->gz, &zerr);
      esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu: cannot read: %s", f->path,
                (unsigned long long)f->line, zerr == Z_ERRNO ? strerror(errno) : msg);
      return -2;
    }
    if (n == 0) {
      int zerr;
      const char *msg = gzerror(f->gz, &zerr);
      if (zerr != Z_OK && zerr != Z_STREAM_END) { /* truncated gzip and the like */
        esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu: corrupt or truncated compressed data (%s)",
                  f->path, (unsigned long long)f->line, msg);
        return -2;
      }
      f->eof = 1;
      return -1;
    }
    f->pos = 0;
    f->len = n;
    if (!f->filled) { /* the first bytes: a format ingest does not read? */
      f->filled = 1;
      if (esmt_fasta_check_magic(f->name, f->buf, (size_t)n, !gzdirect(f->gz))) return -2;
    }
  }
  return f->buf[f->pos++];
}

static int append(char **buf, size_t *len, size_t *cap, int c) {
  if (*len + 1 >= *cap) {
    size_t ncap = *cap ? 2 * *cap : 256;
    char *nb = realloc(*buf, ncap);
    if (!nb) return 0;
    *buf = nb;
    *cap = ncap;
  }
  (*buf)[(*len)++] = (char)c;
  (*buf)[*len] = '\0';
  return 1;
}

static int bad_char(esmt_fasta *f, int c, const char *where) {
  const char *what = c == 0 ? "a NUL byte" : c > 127 ? "a non-ASCII byte" : "a control character";
  esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu: %s (0x%02x) in %s%s%s", f->path,
            (unsigned long long)f->line, what, (unsigned)c, where,
            f->id_len ? " of record " : "", f->id_len ? f->id : "");
  return -1;
}

/* Read the header line after '>' into f->id (first word). */
static int read_header(esmt_fasta *f) {
  f->id_len = 0;
  f->seq_len = 0;
  if (f->id) f->id[0] = '\0';
  if (f->seq) f->seq[0] = '\0';
  f->header_line = f->line;
  int in_id = 1, c;
  while ((c = next_byte(f)) >= 0 && c != '\n') {
    if (c == '\r') continue;
    if (c == 0 || c >= 127 || (c < 32 && c != '\t')) return bad_char(f, c, "a header");
    if (c == ' ' || c == '\t') in_id = 0;
    if (in_id && !append(&f->id, &f->id_len, &f->id_cap, c))
      return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", f->path), -1;
  }
  if (c == -2) return -1;
  if (c == '\n') f->line++;
  if (!f->id_len && !append(&f->id, &f->id_len, &f->id_cap, '?'))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", f->path), -1;
  f->have_header = 1;
  return 0;
}

int esmt_fasta_next(esmt_fasta *f, esmt_fasta_record *rec) {
  int c;
  if (f->have_header == 2 && read_header(f)) return -1; /* '>' already consumed */
  if (!f->have_header) { /* the first record: skip blank lines, then need '>' */
    for (;;) {
      c = next_byte(f);
      if (c == -2) return -1;
      if (c == -1) {
        if (f->records == 0)
          esmt_fail(ESMT_ERR_FORMAT, "%s: no FASTA records (empty file or no '>' header)", f->path);
        return f->records == 0 ? -1 : 0;
      }
      if (c == '\n') { f->line++; continue; }
      if (c == '\r' || c == ' ' || c == '\t') continue;
      if (c != '>') {
        if (c == 0 || c >= 127 || c < 32) return bad_char(f, c, "the file before any header");
        esmt_fail(ESMT_ERR_FORMAT, "%s: line %llu: sequence data before the first '>' header "
                  "(not a FASTA file?)", f->path, (unsigned long long)f->line);
        return -1;
      }
      break;
    }
    if (read_header(f)) return -1;
  }
  /* Sequence lines until the next '>' at a line start, or the end; whole
   * runs up to a newline are scanned at once. */
  int at_line_start = 1;
  for (;;) {
    if (f->pos == f->len) {
      c = next_byte(f); /* refills */
      if (c == -2) return -1;
      if (c == -1) { f->have_header = 0; break; }
      f->pos--;
    }
    unsigned char *p = f->buf + f->pos, *end = f->buf + f->len;
    if (at_line_start && *p == '>') {
      f->pos++;
      rec->id = f->id ? f->id : "";
      rec->seq = f->seq ? f->seq : "";
      rec->len = f->seq_len;
      rec->header_line = f->header_line;
      f->records++;
      /* The next header is read on the next call (the record's buffers
       * stay valid until then). */
      f->have_header = 2;
      return 1;
    }
    unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
    unsigned char *stop = nl ? nl : end;
    size_t run = (size_t)(stop - p);
    if (f->seq_len + run + 1 > f->seq_cap) {
      size_t cap = f->seq_cap ? f->seq_cap : 256;
      while (cap < f->seq_len + run + 1) cap *= 2;
      char *ns = realloc(f->seq, cap);
      if (!ns) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory (record too long?)", f->path), -1;
      f->seq = ns;
      f->seq_cap = cap;
    }
    char *dst = f->seq + f->seq_len;
    for (unsigned char *q = p; q < stop; q++) {
      unsigned char b = *q;
      if (b > 32 && b < 127) { *dst++ = (char)b; continue; }
      if (b == ' ' || b == '\t' || b == '\r') continue;
      f->seq_len = (size_t)(dst - f->seq);
      f->seq[f->seq_len] = '\0';
      return bad_char(f, b, "the sequence");
    }
    f->seq_len = (size_t)(dst - f->seq);
    f->seq[f->seq_len] = '\0';
    if (nl) {
      f->line++;
      at_line_start = 1;
      f->pos = (int)(nl - f->buf) + 1;
    } else {
      at_line_start = run ? 0 : at_line_start;
      f->pos = f->len;
    }
  }
  if (!f->id_len) return 0;
  rec->id = f->id;
  rec->seq = f->seq ? f->seq : "";
  rec->len = f->seq_len;
  rec->header_line = f->header_line;
  f->records++;
  f->id_len = 0; /* consumed: the next call reports the end */
  return 1;
}
