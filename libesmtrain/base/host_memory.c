/* SPDX-License-Identifier: MIT */
/* Host memory still available to this process; see host_memory.h. */
#define _GNU_SOURCE
#include "host_memory.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* A "Key:   123 kB" line of a /proc file, in bytes; 0 when absent. */
static uint64_t proc_kb(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  const size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0 && line[n] == ':' && sscanf(line + n + 1, "%llu", &kb) == 1)
      break;
  fclose(f);
  return (uint64_t)kb * 1024;
}

/* One number from a cgroup file ("max" and absence are UINT64_MAX). */
static uint64_t cgroup_value(const char *name) {
  char path[256];
  snprintf(path, sizeof path, "/sys/fs/cgroup/%s", name);
  FILE *f = fopen(path, "r");
  if (!f) return UINT64_MAX;
  unsigned long long v = 0;
  int ok = fscanf(f, "%llu", &v) == 1;
  fclose(f);
  return ok ? (uint64_t)v : UINT64_MAX;
}

static void consider(esmt_host_memory *m, uint64_t bytes, const char *why) {
  if (bytes < m->available) {
    m->available = bytes;
    snprintf(m->limited_by, sizeof m->limited_by, "%s", why);
  }
}

void esmt_host_memory_probe(esmt_host_memory *m) {
  m->available = UINT64_MAX;
  snprintf(m->limited_by, sizeof m->limited_by, "nothing known");
  const uint64_t avail = proc_kb("/proc/meminfo", "MemAvailable");
  if (avail) consider(m, avail, "MemAvailable in /proc/meminfo");
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const uint64_t used = proc_kb("/proc/self/status", "VmSize");
    consider(m, rl.rlim_cur > used ? rl.rlim_cur - used : 0, "the address-space limit (ulimit -v)");
  }
  if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const uint64_t used = proc_kb("/proc/self/status", "VmData");
    consider(m, rl.rlim_cur > used ? rl.rlim_cur - used : 0, "the data-segment limit (ulimit -d)");
  }
  const uint64_t max = cgroup_value("memory.max"), cur = cgroup_value("memory.current");
  if (max != UINT64_MAX && cur != UINT64_MAX)
    consider(m, max > cur ? max - cur : 0, "the cgroup's memory.max");
}

const char *esmt_format_bytes(uint64_t b, char *buf, size_t cap) {
  static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = (double)b;
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    u++;
  }
  if (u == 0) snprintf(buf, cap, "%llu bytes", (unsigned long long)b);
  else snprintf(buf, cap, "%.1f %s", v, unit[u]);
  return buf;
}

esmt_status esmt_host_memory_check(uint64_t need, const char *what, const char *advice) {
  esmt_host_memory m;
  esmt_host_memory_probe(&m);
  if (need <= m.available) return ESMT_OK;
  char a[32], b[32];
  return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s needs at least %s of host memory, and %s are "
                   "available (%s): %s", what, esmt_format_bytes(need, a, sizeof a),
                   esmt_format_bytes(m.available, b, sizeof b), m.limited_by, advice);
}
