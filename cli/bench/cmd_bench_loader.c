/* SPDX-License-Identifier: MIT */
/* `esmtrain-example bench-loader --data DIR`: how fast the loader alone
 * makes esm2_t6_8M-shaped batches (4 x 512 by default) on this thread,
 * and its resident memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"

/* A "Name:   123 kB" line of /proc/self/status in MiB, or -1 (not Linux). */
static double proc_status_mib(const char *name) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  double v = -1;
  size_t n = strlen(name);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, name, n) && line[n] == ':') {
      v = atof(line + n + 1) / 1024.0;
      break;
    }
  fclose(f);
  return v;
}

int cmd_bench_loader(int argc, char **argv) {
  const char *data = NULL;
  int rows = 4, len = 512, batches = 2000, pack = 0, by_cluster = 0;
  for (int i = 0; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--data")) data = argv[i + 1];
    else if (!strcmp(argv[i], "--sampling") && (!strcmp(argv[i + 1], "sequence") ||
                                                !strcmp(argv[i + 1], "cluster")))
      by_cluster = !strcmp(argv[i + 1], "cluster");
    else if (!strcmp(argv[i], "--rows") || !strcmp(argv[i], "--max-len") ||
             !strcmp(argv[i], "--batches") || !strcmp(argv[i], "--pack")) {
      long long x = 0;
      if (!cli_int_arg("bench-loader", argv[i], argv[i + 1], 0, 1 << 30, &x)) return 2;
      *(!strcmp(argv[i], "--rows") ? &rows : !strcmp(argv[i], "--max-len") ? &len
        : !strcmp(argv[i], "--batches") ? &batches : &pack) = (int)x;
    } else { fprintf(stderr, "bench-loader: unknown argument '%s'\n", argv[i]); return 2; }
  }
  if (!data) {
    printf("usage: esmtrain-example bench-loader --data DIR [--rows 4] [--max-len 512] "
           "[--batches 2000] [--pack 0|1] [--sampling sequence|cluster]\n");
    return 2;
  }
  esmt_loader_options o = ESMT_LOADER_OPTIONS_INIT;
  o.dir = data;
  o.max_len = len;
  o.batch_rows = rows;
  o.tokens_per_batch = (uint64_t)rows * (uint64_t)len;
  o.pack = pack;
  o.sampling = by_cluster ? ESMT_SAMPLING_CLUSTER : ESMT_SAMPLING_SEQUENCE;
  esmt_loader *l = NULL;
  esmt_status st = esmt_loader_create(&o, &l);
  if (st) { cli_error("bench-loader", st); return 1; }
  double t0 = esmt_clock_seconds();
  uint64_t tokens = 0;
  for (int i = 0; i < batches; i++) {
    esmt_batch b = ESMT_BATCH_INIT;
    if ((st = esmt_loader_next(l, &b))) { cli_error("bench-loader", st); return 1; }
    tokens += (uint64_t)b.batch * (uint64_t)b.seq_len;
  }
  double dt = esmt_clock_seconds() - t0;
  esmt_loader_stats s = {.struct_size = sizeof s};
  esmt_loader_stats_get(l, &s);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("loader: %d batches of %d x %d in %.3f s: %.0f batches/s, %.0f tokens/s, padding %.1f%%, "
         "%llu records, peak RSS %.1f MiB\n", batches, rows, len, dt, batches / dt, tokens / dt,
         100 * s.padding_fraction, (unsigned long long)s.records, ru.ru_maxrss / 1024.0);
  /* Private memory (heap, stacks) apart from the mapped shard pages, which
   * are page cache shared with the system and dropped after each window. */
  double anon = proc_status_mib("RssAnon"), file = proc_status_mib("RssFile");
  printf("  now: %.1f MiB private (RssAnon), %.1f MiB file-backed (RssFile: library code and "
         "mapped shard pages)\n", anon, file);
  printf("ESMT_LOADER_RESULT batches_per_s=%.1f rss_mib=%.1f anon_mib=%.1f file_mib=%.1f "
         "records=%llu\n", batches / dt, ru.ru_maxrss / 1024.0, anon, file,
         (unsigned long long)s.records);
  esmt_loader_destroy(l);
  return 0;
}
