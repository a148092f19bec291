#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prints the cpu.so kernel variants this machine can run, as a CMake list
# for ESMT_CPU_ISAS ("generic;avx2", plus ";avx512" where the CPU has the
# AVX-512 subsets the variant needs; cpu_isa.c makes the same choice at run
# time). The test builds other than Release compile only these: the
# variants' isa_attention.c is the slowest file to compile (60-90 s each
# under the sanitizers) and a variant the CPU cannot run is never tested.
set -euo pipefail
isas="generic;avx2"
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
for f in avx512f avx512vl avx512bw avx512dq; do
  [[ " $flags " == *" $f "* ]] || { echo "$isas"; exit 0; }
done
echo "$isas;avx512"
