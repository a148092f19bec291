/* SPDX-License-Identifier: MIT */
/* `esmtrain-example ingest IN... -o DIR`: FASTA(.gz) or CSV/TSV tables into token shards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Called every MiB of input: draws the bar unless quiet; a stop signal
 * cancels the ingest (its temporary files are removed). With standard
 * input the size is unknown (total 0): no bar, percent or ETA. */
static int progress_bar(void *user, const esmt_progress *p) {
  if (cli_signal_caught()) return 1;
  if (!*(const int *)user) return 0;
  double mb = (double)p->done / 1048576.0, rate = p->elapsed_s > 0 ? mb / p->elapsed_s : 0;
  double seqs = p->elapsed_s > 0 ? (double)p->items / p->elapsed_s : 0;
  if (!p->total) {
    fprintf(stderr, "\r%8.1f MB read %6.1f MB/s %8.0f seq/s", mb, rate, seqs);
    return 0;
  }
  double frac = p->total ? (double)p->done / (double)p->total : 0;
  double eta = rate > 0 && p->total ? ((double)p->total - (double)p->done) / 1048576.0 / rate : 0;
  int width = 30, fill = (int)(frac > 1 ? width : frac * width);
  fprintf(stderr, "\r[%.*s%*s] %5.1f%% %8.1f MB %6.1f MB/s %8.0f seq/s ETA %4.0fs", fill,
          "##############################", width - fill, "", 100 * frac, mb, rate, seqs, eta);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: esmtrain-example ingest IN.fasta[.gz]|IN.csv[.gz]|IN.tsv[.gz]|-... -o DIR\n"
         "          [--valid-fraction F] [--unknown unk|skip|fail] [--gaps keep|drop|fail]\n"
         "          [--max-len N] [--format auto|fasta|csv|tsv] [--seq-column NAME]\n"
         "          [--id-column NAME] [--quiet]\n"
         "Streams FASTA records into memory-mapped token shards under DIR (which must not\n"
         "exist or be empty), split train/validation by a hash of each record id\n"
         "(default 0.005 validation). --max-len N skips records of more than N residues\n"
         "(default: keep all; training crops long proteins at random). Prints a summary of\n"
         "every problem met.\n"
         "IN '-' reads standard input (plain or gzip), e.g. for other compressions:\n"
         "  zstd -dc x.fa.zst | esmtrain-example ingest - -o DIR\n"
         "Inputs must be regular files (or '-'); bzip2, zstd, xz, zip and tar inputs are\n"
         "refused with the command to decompress them.\n"
         "Tables (docs/formats.md): IN.csv, IN.tsv or IN.tab (each optionally .gz) are read\n"
         "as CSV (RFC 4180 quoting) or TSV (no quoting) with a header row; other names as\n"
         "FASTA.\n"
         "--format auto|fasta|csv|tsv  the format of every input (default auto: by name,\n"
         "                  and '-' is FASTA), e.g. zcat x.csv.gz | ... ingest - --format csv\n"
         "--seq-column NAME the header name of the sequence column (default: sequence)\n"
         "--id-column NAME  the header name of the id column (default: id; a table without\n"
         "                  one numbers its rows row1, row2, ...)\n"
         "Parquet: python3 scripts/parquet_to_fasta.py x.parquet | esmtrain-example ingest -\n"
         "          -o DIR (needs pyarrow)\n"
         "--clusters FILE   \"representative<TAB>member\" lines (MMseqs2 easy-cluster's\n"
         "                  *_cluster.tsv, or UniRef50 -> UniRef90 ids), plain or gzip:\n"
         "                  validation then holds out whole clusters, and training can\n"
         "                  sample a cluster, then a member (data.sampling: cluster), as\n"
         "                  ESM-2 was trained. Records no line names are clusters of\n"
         "                  their own.\n"
         "--valid-clusters N  hold out N whole clusters (those whose representatives hash\n"
         "                  lowest) instead of --valid-fraction; needs --clusters.\n");
}

/* Index of v in the NULL-terminated names, or -1 (with a message). */
static int pick(const char *opt, const char *v, const char *const *names) {
  for (int k = 0; names[k]; k++)
    if (!strcmp(v, names[k])) return k;
  fprintf(stderr, "ingest: %s '%s': expected %s|%s|%s\n", opt, v, names[0], names[1], names[2]);
  return -1;
}

int cmd_ingest(int argc, char **argv) {
  esmt_ingest_options o = ESMT_INGEST_OPTIONS_INIT;
  const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
  int n = 0, quiet = 0;
  if (!inputs) return 1;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help")) { usage(stdout); free(inputs); return 0; }
    if (!strcmp(a, "--quiet")) { quiet = 1; continue; }
    if (a[0] != '-' || !strcmp(a, "-")) { inputs[n++] = a; continue; }
    if (!v) { fprintf(stderr, "ingest: %s needs a value\n", a); free(inputs); return 2; }
    static const char *const unk_names[] = {"unk", "skip", "fail", NULL};
    static const char *const gap_names[] = {"keep", "drop", "fail", NULL};
    char *end = NULL;
    int bad = 0, k;
    if (!strcmp(a, "-o") || !strcmp(a, "--output")) o.output_dir = v;
    else if (!strcmp(a, "--clusters")) o.clusters = v;
    else if (!strcmp(a, "--valid-clusters")) {
      long long c = strtoll(v, &end, 10);
      if (end == v || *end || c < 1) {
        fprintf(stderr, "ingest: --valid-clusters '%s': expected a positive number of clusters\n", v);
        bad = 1;
      }
      o.valid_clusters = c > 0 ? (uint64_t)c : 0;
    }
    else if (!strcmp(a, "--seq-column")) o.seq_column = v;
    else if (!strcmp(a, "--id-column")) o.id_column = v;
    else if (!strcmp(a, "--format")) {
      static const char *const formats[] = {"auto", "fasta", "csv", "tsv", NULL};
      for (k = 0; formats[k] && strcmp(v, formats[k]); k++) {}
      if (!formats[k]) {
        fprintf(stderr, "ingest: --format '%s': expected auto|fasta|csv|tsv\n", v);
        bad = 1;
      }
      o.input_format = k; /* the order of esmt_input_format */
    }
    else if (!strcmp(a, "--valid-fraction")) {
      o.valid_fraction = strtod(v, &end);
      if (end == v || *end || !(o.valid_fraction >= 0 && o.valid_fraction < 1)) {
        fprintf(stderr, "ingest: --valid-fraction '%s': expected a number in [0, 1)\n", v);
        bad = 1;
      }
    } else if (!strcmp(a, "--max-len")) {
      long long m = strtoll(v, &end, 10);
      if (end == v || *end || m < 1) {
        fprintf(stderr, "ingest: --max-len '%s': expected a positive number of residues\n", v);
        bad = 1;
      }
      o.max_residues = m > 0 ? (uint64_t)m : 0;
    } else if (!strcmp(a, "--unknown")) {
      if ((k = pick(a, v, unk_names)) < 0) bad = 1;
      else o.unknown = (esmt_unknown_policy)k;
    } else if (!strcmp(a, "--gaps")) {
      if ((k = pick(a, v, gap_names)) < 0) bad = 1;
      else o.gaps = (esmt_gap_policy)k;
    } else {
      fprintf(stderr, "ingest: unknown argument '%s'%s (try --help)\n", a, cli_option_hint(a, usage));
      bad = 1;
    }
    if (bad) { free(inputs); return 2; }
    i++;
  }
  if (!n || !o.output_dir) {
    fprintf(stderr, "ingest: need input files and -o DIR (try --help)\n");
    free(inputs);
    return 2;
  }
  o.inputs = inputs;
  o.n_inputs = n;
  int bar = !quiet && isatty(STDERR_FILENO);
  o.progress = progress_bar;
  o.progress_user = &bar;
  cli_signals_catch(NULL);
  esmt_ingest_stats s = ESMT_INGEST_STATS_INIT;
  esmt_status st = esmt_ingest(&o, &s);
  if (bar) fputc('\n', stderr);
  free(inputs);
  int sig = cli_signal_caught();
  if (st && sig) {
    if (st != ESMT_ERR_CANCELLED) cli_error("ingest", st);
    fprintf(stderr, "esmtrain-example: ingest: stopped by %s: no dataset was written to %s and "
            "the temporary files were removed\n", cli_signal_name(sig), o.output_dir);
    return 128 + sig;
  }
  if (st) { cli_error("ingest", st); return 1; }
  printf("ingest: %llu records, %llu residues in %.1f s (%.1f MB/s of input) -> %s\n",
         (unsigned long long)s.records, (unsigned long long)s.residues, s.seconds,
         s.seconds > 0 ? (double)s.bytes_read / 1048576.0 / s.seconds : 0.0, o.output_dir);
  printf("  train %llu records / %llu residues, validation %llu / %llu, %d shards, longest %llu\n",
         (unsigned long long)s.train_records, (unsigned long long)s.train_residues,
         (unsigned long long)s.valid_records, (unsigned long long)s.valid_residues, s.shards,
         (unsigned long long)s.longest);
  printf("  problems: %llu empty, %llu skipped (unknown letters), %llu skipped (longer than "
         "--max-len), %llu unknown letters as <unk>, %llu gaps dropped, %llu terminal '*', "
         "%llu duplicate ids, %llu lowercase letters\n",
         (unsigned long long)s.empty_records, (unsigned long long)s.skipped_records,
         (unsigned long long)s.too_long_records,
         (unsigned long long)s.unknown_letters, (unsigned long long)s.gaps_dropped,
         (unsigned long long)s.terminal_stops, (unsigned long long)s.duplicate_ids,
         (unsigned long long)s.lowercase_letters);
  if (o.clusters) {
    printf("  clusters: %llu listed, %llu in training, %llu held out whole for validation; "
           "%llu records in no cluster (each its own), %llu listed clusters with no record in "
           "the input, %llu repeated member lines\n",
           (unsigned long long)s.clusters_listed, (unsigned long long)s.train_clusters,
           (unsigned long long)s.valid_clusters, (unsigned long long)s.unclustered_records,
           (unsigned long long)s.empty_clusters, (unsigned long long)s.duplicate_members);
  } else if (s.valid_records) {
    printf("  validation is split by record: it may hold near-duplicates of training proteins "
           "(--clusters holds out whole clusters)\n");
  }
  return 0;
}
