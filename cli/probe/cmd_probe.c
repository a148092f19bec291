/* SPDX-License-Identifier: MIT */
/* `esmtrain-example probe`: what the registry found and what it chose. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_cpu(void) {
  esmt_cpu_info cpu = ESMT_CPU_INFO_INIT;
  if (esmt_cpu_info_query(&cpu) != ESMT_OK) return;
  printf("cpu: %s (%s), %d logical cores\n", cpu.model[0] ? cli_esc(cpu.model) : "unknown",
         cpu.vendor[0] ? cli_esc(cpu.vendor) : "?", cpu.logical_cores);
  printf("  features: avx2=%s fma=%s avx512f=%s avx512bf16=%s amx_tile=%s amx_bf16=%s\n",
         cpu.avx2 ? "yes" : "no", cpu.fma ? "yes" : "no", cpu.avx512f ? "yes" : "no",
         cpu.avx512bf16 ? "yes" : "no", cpu.amx_tile ? "yes" : "no", cpu.amx_bf16 ? "yes" : "no");
}

int cmd_probe(int argc, char **argv) {
  esmt_context_options opts = ESMT_CONTEXT_OPTIONS_INIT;
  opts.log = cli_log_stderr;
  opts.log_level = ESMT_LOG_WARN;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--backend-path") == 0 && i + 1 < argc) opts.backend_path = argv[++i];
    else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) opts.backend = argv[++i];
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      long long x = 0;
      if (!cli_int_arg("probe", "--threads", argv[++i], 0, 4096, &x)) return 2;
      opts.num_threads = (int)x;
    }
    else if (strcmp(argv[i], "--verbose") == 0) opts.log_level = ESMT_LOG_DEBUG;
    else if (strcmp(argv[i], "--help") == 0) {
      printf("usage: esmtrain-example probe [--backend-path DIRS] [--backend NAME] "
             "[--threads N] [--verbose]\n"
             "Lists every backend found (available or not, and why), its score, the chosen\n"
             "one, the devices each drives, and the CPU's features. Exit status 0 when a\n"
             "backend is usable, 1 otherwise.\n");
      return 0;
    } else {
      fprintf(stderr, "esmtrain-example probe: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  printf("libesmtrain %s\n", esmt_version_string());
  print_cpu();
  esmt_context *ctx = NULL;
  esmt_status st = esmt_context_create(&opts, &ctx);
  if (st != ESMT_OK) {
    cli_error("probe", st);
    return 1;
  }
  int n = 0;
  esmt_context_backend_count(ctx, &n);
  printf("backends (%d found):\n", n);
  for (int i = 0; i < n; i++) {
    esmt_backend_info info;
    info.struct_size = sizeof info;
    if (esmt_context_backend_info(ctx, i, &info) != ESMT_OK) continue;
    /* the names and texts are the plugin's own: escaped */
    printf("  %c %-12s %-11s score %3d  %s\n", info.chosen ? '*' : ' ', cli_esc(info.name),
           info.available ? "available" : "unavailable", info.score, cli_esc(info.path));
    if (info.description[0]) printf("      %s\n", cli_esc(info.description));
    if (!info.available && info.reason[0]) printf("      reason: %s\n", cli_esc(info.reason));
    if (info.available && info.note[0]) printf("      %s\n", cli_esc(info.note));
    for (int d = 0; d < info.device_count; d++) {
      char total[32], avail[32];
      const esmt_device_info *dev = &info.devices[d];
      if (dev->cc_major)
        printf("      device %d: %s, compute capability %d.%d, %s total, %s free\n", d,
               cli_esc(dev->name), dev->cc_major, dev->cc_minor, cli_bytes(dev->total_bytes, total, 32),
               cli_bytes(dev->free_bytes, avail, 32));
      else
        printf("      device %d: %s, %s RAM, %s available\n", d, cli_esc(dev->name),
               cli_bytes(dev->total_bytes, total, 32), cli_bytes(dev->free_bytes, avail, 32));
    }
  }
  printf("chosen: %s\n", cli_esc(esmt_context_backend_name(ctx)));
  esmt_context_destroy(ctx);
  return 0;
}
