/* SPDX-License-Identifier: MIT */
/* CPU feature detection for `probe` output and run-time kernel dispatch.
 * Built without any -m flags: probing must not need the features probed. */
#include "esmtrain/esmtrain.h"
#include "internal.h"

#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

esmt_status esmt_cpu_info_query(esmt_cpu_info *info) {
  ESMT_CHECK_ARG(info, "esmt_cpu_info_query", "info is NULL");
  esmt_status st = esmt_check_struct("esmt_cpu_info_query", "esmt_cpu_info", info->struct_size,
                                     sizeof(esmt_cpu_info));
  if (st) return st;
  uint32_t size = info->struct_size;
  memset(info, 0, sizeof *info);
  info->struct_size = size;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  info->logical_cores = n > 0 ? (int)n : 1;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    memcpy(info->vendor, &b, 4);
    memcpy(info->vendor + 4, &d, 4);
    memcpy(info->vendor + 8, &c, 4);
    info->vendor[12] = '\0';
  }
  unsigned max_ext = __get_cpuid_max(0x80000000u, NULL);
  if (max_ext >= 0x80000004u) {
    unsigned regs[12];
    for (unsigned i = 0; i < 3; i++)
      __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                  &regs[4 * i + 3]);
    char brand[49];
    memcpy(brand, regs, 48);
    brand[48] = '\0';
    const char *p = brand;
    while (*p == ' ') p++;
    strncpy(info->model, p, sizeof info->model - 1);
  }
  __builtin_cpu_init();
  info->avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
  info->fma = __builtin_cpu_supports("fma") ? 1 : 0;
  info->avx512f = __builtin_cpu_supports("avx512f") ? 1 : 0;
  if (__get_cpuid_max(0, NULL) >= 7) {
    __cpuid_count(7, 1, a, b, c, d);
    info->avx512bf16 = (info->avx512f && (a & (1u << 5))) ? 1 : 0;
    __cpuid_count(7, 0, a, b, c, d);
    info->amx_tile = (d & (1u << 24)) ? 1 : 0;
    info->amx_bf16 = (d & (1u << 22)) ? 1 : 0;
  }
#endif
  return ESMT_OK;
}
